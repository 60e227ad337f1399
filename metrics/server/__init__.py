"""The HTTP side: the only package that imports ``http.server``. The dashboard's JSON API
(``api``), the one body each of its writes declares (``bodies``), the panels' filters
(``panelquery``) and the model page (``modelpage``); the routes of Ollama's and Gemini's clients
(``clientapis``); who may call (``guard``, gateway ``keys``,
per-key ``ratelimit``, the dashboard's login ``session`` and where its sessions live,
``sessiontable``); the routes of both servers. The HTTP front end they stand on (the server
base, connections, the ``pool`` of threads that answer them, ``workers``: several processes of
one server on one port) is the subpackage ``front``, with a diagram of a connection's life.

Nothing of the domain imports this package.
"""
