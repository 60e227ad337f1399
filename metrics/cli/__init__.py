"""The ``panelist`` command line: ``noun verb`` parsers and their commands (``main``), and the
MCP server over stdio (``mcp``). Nothing imports this package but the entry points.
"""
