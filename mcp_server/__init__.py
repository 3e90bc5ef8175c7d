"""MemStrata's MCP tools on the official ``mcp`` SDK.

Public face:

- :func:`build_server` — ``MCPServer`` named ``memstrata`` with ``context_query``,
  ``index_status``, ``savings_summary`` and the navigation tools ``find_symbol``,
  ``find_references`` and ``file_outline``, serving one :class:`~indexer.workspace.Workspace`.
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

import importlib

# Loaded on first use: the SDK takes a second or more to import, and the
# surfaces that do not use it (the Strata server) should not pay for it.
_EXPORTS = {
    "MCPHttp": ".http", "mcp_http_app": ".http", "transport_security": ".http",
    "TOOL_NAMES": ".server", "build_server": ".server",
    "SavingsProvider": ".tools", "IndexWarmup": ".warmup",
    "PlainMCPServer": ".arguments", "serve_stdio": ".stdio",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "build_server", "TOOL_NAMES", "SavingsProvider",
    "IndexWarmup", "MCPHttp", "mcp_http_app", "transport_security", "serve_stdio", "PlainMCPServer",
]
