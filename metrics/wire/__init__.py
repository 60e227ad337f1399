"""Wire formats: thin adapters between a format's body and the one panel request, and back.
``models`` is what ``GET /v1/models`` says; ``responses`` is OpenAI's Responses format;
``messages`` is Anthropic's Messages format; ``ollama`` and ``gemini`` are Ollama's and Google's
APIs; ``errors`` is the table of each error class's HTTP status and body shape, which every
server answers errors by.

A format never grows its own seating or logging: wire imports panel types, ``metrics.errors``
and ``metrics.store``, never the ledger or the seats core.
"""
