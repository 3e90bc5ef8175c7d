"""Both MCP HTTP transports on one path, ready to mount in an ASGI app.

- ``GET /mcp`` without an ``Mcp-Session-Id`` header opens the documented
  (legacy) SSE stream; its first event names ``/mcp/messages/?session_id=...``
  as the POST route for that session.
- ``POST /mcp`` (and the session's ``GET``/``DELETE /mcp``) is Streamable
  HTTP, answered on the exact path with no redirect.

A Streamable HTTP client only sends ``GET`` once it holds a session id, so the
header alone tells the two transports apart.  The SDK's DNS-rebinding
protection stays on: a ``Host`` other than loopback gets 421, a foreign
``Origin`` 403.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def transport_security(extra_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """Loopback names (with or without a port) plus ``extra_hosts`` for Host and Origin."""
    names = [*LOOPBACK_HOSTS, *extra_hosts]
    # "name:*" only matches a Host that carries a port, so list the bare name too.
    hosts = [h for name in names for h in (name, f"{name}:*")]
    origins = [o for name in names for scheme in ("http", "https")
               for o in (f"{scheme}://{name}", f"{scheme}://{name}:*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts, allowed_origins=origins)


class MCPHttp:
    """The SSE and Streamable HTTP transports of one ``MCPServer``, at ``path``.

    Build it once per server and process: mount :attr:`routes` in the host app
    and enter :meth:`lifespan` exactly once in the host app's lifespan (a
    mounted app's own lifespan never runs, and the Streamable HTTP session
    manager cannot be started twice).
    """

    def __init__(self, server: MCPServer, *, path: str = "/mcp", extra_hosts: Iterable[str] = ()):
        self.path = "/" + path.strip("/")
        self.message_path = f"{self.path}/messages/"
        security = transport_security(extra_hosts)
        self._guard = TransportSecurityMiddleware(security)
        self._streamable = server.streamable_http_app(streamable_http_path=self.path,
                                                      transport_security=security)
        self._session_manager = server.session_manager
        self._sse = server.sse_app(sse_path=self.path, message_path=self.message_path,
                                   transport_security=security)
        # Plain routes, not a Mount: the sub-apps see the path unchanged and
        # POST /mcp is served as is (a Mount would redirect it to /mcp/).
        self.routes = [
            Route(self.path, endpoint=self, methods=["GET", "POST", "DELETE"]),
            Route(self.message_path, endpoint=self, methods=["POST"]),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """Runs the Streamable HTTP session manager; usable directly as a Starlette/FastAPI lifespan."""
        async with self._session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        headers = Headers(scope=scope)
        legacy = scope["path"].endswith(self.message_path) or (
            method == "GET" and "mcp-session-id" not in headers)
        if not legacy:
            await self._streamable(scope, receive, send)
            return
        if method == "GET":
            # The SDK's SSE handler sends its 421/403 and then raises, which
            # would log an ASGI traceback for every refused request; refuse
            # here first instead.
            refusal = await self._guard.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self._sse(scope, receive, send)


def mcp_http_app(server: MCPServer, **options: Any) -> Starlette:
    """A standalone ASGI app serving ``server`` at ``/mcp`` (options as for :class:`MCPHttp`)."""
    http = MCPHttp(server, **options)
    return Starlette(routes=http.routes, lifespan=http.lifespan)
