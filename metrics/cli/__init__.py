"""The ``panelist`` command line. ``main`` is the frame (the parser registry, ``Out``, the one
place an error exits); beside it one module per noun holds that noun's parsers and commands
(``model``, ``collection``, ``ask``, ``verdict``, ``race``, ``suite``, ``serve``, ...);
``remote`` is the one client of a running gateway (``--url`` and MCP), ``mcp`` the Model
Context Protocol server over stdio and ``mcpcalls`` the bounded pool its tool calls run on.
Nothing imports this package but the entry points.
"""
