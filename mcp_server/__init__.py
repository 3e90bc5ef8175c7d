"""MemStrata's MCP tools on the official ``mcp`` SDK.

Public face:

- :func:`build_server` — ``MCPServer`` named ``memstrata`` with ``context_query``,
  ``index_status`` and ``savings_summary`` serving one :class:`~indexer.workspace.Workspace`.
  ``savings`` is a zero-argument callable returning the seven savings fields.
- :class:`IndexWarmup` — catch-up index + graph load + watcher on a background
  thread, so the server answers at once; pass it to ``build_server``.
- :class:`MCPHttp` — SSE (``GET /mcp``, and ``GET /sse`` + ``POST /messages/``)
  and Streamable HTTP (``POST /mcp``) for one server: mount ``.routes`` and
  enter ``.lifespan()`` once in the host app's lifespan.  :func:`mcp_http_app`
  wraps that into a standalone Starlette app.
- :func:`serve_stdio` — serves any of the project's servers over stdin/stdout:
  ``anyio.run(serve_stdio, server)``.  Unlike the SDK's own stdio transport it
  answers malformed input with JSON-RPC errors and, at end of input, answers
  every request already read before it returns.
- :class:`PlainMCPServer` — the ``MCPServer`` every server here is built on:
  tool arguments the SDK rejects are told in one plain sentence.
"""

from .arguments import PlainMCPServer
from .http import MCPHttp, mcp_http_app, transport_security
from .server import TOOL_NAMES, build_server
from .stdio import serve_stdio
from .tools import SavingsProvider
from .warmup import IndexWarmup

__all__ = [
    "build_server", "TOOL_NAMES", "SavingsProvider",
    "IndexWarmup", "MCPHttp", "mcp_http_app", "transport_security", "serve_stdio", "PlainMCPServer",
]
