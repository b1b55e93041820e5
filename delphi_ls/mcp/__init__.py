"""Delphi over the Model Context Protocol: tools (``tools``), the server (``server``), the loopback
HTTP daemon (``daemon``) and the ``delphi mcp`` / ``delphi serve`` commands (``commands``)."""
