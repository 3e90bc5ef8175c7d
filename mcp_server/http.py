"""Both MCP HTTP transports, ready to mount in an ASGI app.

- ``GET /mcp`` without an ``Mcp-Session-Id`` header opens the documented
  (legacy) SSE stream; its first event names ``/mcp/messages/?session_id=...``
  as the POST route for that session.
- ``GET /sse`` and ``POST /messages/`` are the same SSE transport at the SDK's
  default URLs, which MCP Inspector's SSE mode (and other SSE-only clients)
  request; their endpoint event names ``/messages/?session_id=...``.
- ``POST /mcp`` (and the session's ``GET``/``DELETE /mcp``) is Streamable
  HTTP, answered on the exact path with no redirect.

A Streamable HTTP client only sends ``GET`` once it holds a session id, so the
header alone tells the two transports apart on ``/mcp``.  The SDK's
DNS-rebinding protection stays on everywhere: a ``Host`` other than loopback
gets 421, a foreign ``Origin`` 403.
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
    # An IPv6 address is bracketed in a Host header and an Origin.
    names = [*LOOPBACK_HOSTS, *(f"[{h.strip('[]')}]" if ":" in h else h for h in extra_hosts)]
    # "name:*" only matches a Host that carries a port, so list the bare name too.
    hosts = [h for name in names for h in (name, f"{name}:*")]
    origins = [o for name in names for scheme in ("http", "https")
               for o in (f"{scheme}://{name}", f"{scheme}://{name}:*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts, allowed_origins=origins)


class MCPHttp:
    """The SSE and Streamable HTTP transports of one ``MCPServer``.

    ``path`` carries both transports; ``sse_paths`` (an SSE GET path and its
    POST path; None for none) adds the SSE transport at a second pair of
    URLs.  Build it once per server and process: mount :attr:`routes` in the
    host app and enter :meth:`lifespan` exactly once in the host app's
    lifespan (a mounted app's own lifespan never runs, and the Streamable
    HTTP session manager cannot be started twice).
    """

    def __init__(self, server: MCPServer, *, path: str = "/mcp", extra_hosts: Iterable[str] = (),
                 sse_paths: tuple[str, str] | None = ("/sse", "/messages/")):
        self.path = "/" + path.strip("/")
        self.message_path = f"{self.path}/messages/"
        security = transport_security(extra_hosts)
        self._guard = TransportSecurityMiddleware(security)
        self._streamable = server.streamable_http_app(streamable_http_path=self.path,
                                                      transport_security=security)
        self._session_manager = server.session_manager
        # SSE GET path -> (its POST path, the SDK's SSE app serving both).
        self._sse: dict[str, tuple[str, Starlette]] = {}
        pairs = [(self.path, self.message_path)]
        if sse_paths is not None:
            pairs.append(("/" + sse_paths[0].strip("/"), "/" + sse_paths[1].strip("/") + "/"))
        # Plain routes, not a Mount: the sub-apps see the path unchanged and
        # POST /mcp is served as is (a Mount would redirect it to /mcp/).
        self.routes = [Route(self.path, endpoint=self, methods=["GET", "POST", "DELETE"])]
        for get_path, post_path in pairs:
            app = server.sse_app(sse_path=get_path, message_path=post_path, transport_security=security)
            self._sse[get_path] = (post_path, app)
            if get_path != self.path:
                self.routes.append(Route(get_path, endpoint=self, methods=["GET"]))
            self.routes.append(Route(post_path, endpoint=self, methods=["POST"]))

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """Runs the Streamable HTTP session manager; usable directly as a Starlette/FastAPI lifespan."""
        async with self._session_manager.run():
            yield

    def _sse_app_for(self, scope: Scope) -> Starlette | None:
        """The SSE app a request belongs to, or None for Streamable HTTP."""
        path = _route_path(scope)
        for get_path, (post_path, app) in self._sse.items():
            if path == post_path or (path == get_path and get_path != self.path):
                return app
        if scope["method"] == "GET" and "mcp-session-id" not in Headers(scope=scope):
            return self._sse[self.path][1]
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._sse_app_for(scope)
        if app is None:
            await self._streamable(scope, receive, send)
            return
        if scope["method"] == "GET":
            # The SDK's SSE handler sends its 421/403 and then raises, which
            # would log an ASGI traceback for every refused request; refuse
            # here first instead.
            refusal = await self._guard.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await app(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The request path below the prefix the routes are mounted at."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def mcp_http_app(server: MCPServer, **options: Any) -> Starlette:
    """A standalone ASGI app serving ``server`` at ``/mcp`` (options as for :class:`MCPHttp`)."""
    http = MCPHttp(server, **options)
    return Starlette(routes=http.routes, lifespan=http.lifespan)
