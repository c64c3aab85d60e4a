"""tao's tools and agents served over MCP (``tao mcp serve``): the server (``server``) and who
may call it (``access``: the bearer token, the Host and Origin allow-list, approval asked of the
calling client). A room at the top, beside the CLI's other doors, because a served agent is
built like any other; the client side - any MCP server's tools in an agent - is ``tao.mcp``.
Loaded only when named: ``import tao`` imports neither this nor the ``mcp`` SDK."""
