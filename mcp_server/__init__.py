"""MemStrata's MCP tools on the official ``mcp`` SDK.

Public face:

- :func:`build_server` — ``MCPServer`` named ``memstrata`` with ``context_query``,
  ``index_status`` and ``savings_summary`` serving one :class:`~indexer.workspace.Workspace`.
  ``savings`` is a zero-argument callable returning the seven savings fields.
- :class:`IndexWarmup` — catch-up index + graph load + watcher on a background
  thread, so the server answers at once; pass it to ``build_server``.
- :class:`MCPHttp` — SSE (``GET /mcp``) and Streamable HTTP (``POST /mcp``) for
  one server: mount ``.routes`` and enter ``.lifespan()`` once in the host app's
  lifespan.  :func:`mcp_http_app` wraps that into a standalone Starlette app.

Stdio serving is ``anyio.run(server.run_stdio_async)`` (``memstrata mcp`` in
:mod:`harness.cmd_mcp` adds logging and stdout hygiene around it).
"""

from .http import MCPHttp, mcp_http_app, transport_security
from .server import TOOL_NAMES, build_server
from .tools import SavingsProvider
from .warmup import IndexWarmup

__all__ = [
    "build_server", "TOOL_NAMES", "SavingsProvider",
    "IndexWarmup", "MCPHttp", "mcp_http_app", "transport_security",
]
