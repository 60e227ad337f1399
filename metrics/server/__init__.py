"""The HTTP side: the only package that imports ``http.server``. The dashboard's JSON API
(``api``), the one body each of its writes declares (``bodies``), the panels' filters
(``panelquery``) and the model page (``modelpage``); the routes of Ollama's and Gemini's clients
(``clientapis``); who may call (``guard``, gateway ``keys``,
per-key ``ratelimit``, the dashboard's login ``session`` and where its sessions live,
``sessiontable``); the server base both servers are composed from, the ``pool`` of threads
that answer its connections, and ``workers``: several
processes of one server on one port, and how a server stops.

Nothing of the domain imports this package.
"""
