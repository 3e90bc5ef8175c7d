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
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from .jsonrpc import INVALID_REQUEST, Reply, error_response
from .stdio import DIALECT, MAX_MESSAGE_BYTES, classify

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def transport_security(extra_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """Loopback names (with or without a port) plus ``extra_hosts`` for Host and Origin."""
    # An IPv6 address is bracketed in a Host header and an Origin.
    # Lower-cased, as the Host check in front of it (harness/proxy/app.py) hands headers on: host
    # names are case-insensitive, the SDK's lists are matched exactly.
    names = [*LOOPBACK_HOSTS, *(f"[{h.strip('[]')}]" if ":" in h else h for h in (x.lower() for x in extra_hosts))]
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
        if scope["method"] == "POST":
            # The Host/Origin check before anything of the body is read.
            refusal = await self._guard.validate_request(Request(scope), is_post=True)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            checked = await _checked_body(scope, receive, send)
            if checked is None:
                return  # answered here, or the client went away
            receive = checked
        if app is None:
            await self._streamable(scope, receive, _without_session_on_refusal(send))
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


def _without_session_on_refusal(send: Send) -> Send:
    """``send`` for the SDK's Streamable HTTP answers, less the ``mcp-session-id`` header on a
    refusal (4xx): the SDK names a session it never opened there, and a client that keeps the
    id gets "Session not found" on its next request."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and 400 <= message.get("status", 200) < 500:
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"mcp-session-id"]
            message = {**message, "headers": headers}
        await send(message)

    return sending


async def _checked_body(scope: Scope, receive: Receive, send: Send) -> Receive | None:
    """A POST body checked as the stdio front checks a line: one the SDK would answer with its
    validation dump (a batch, a value that is no object, a wrong ``jsonrpc``, a lone surrogate) is
    answered here with HTTP 400 and the JSON-RPC error in plain words (None is returned); any other
    is handed on (the returned ``receive`` replays it).  A body over the SDK's size limit is handed
    on unread: the SDK refuses it (413)."""
    headers = Headers(scope=scope)
    try:
        declared = int(headers.get("content-length", "0"))
    except ValueError:
        declared = 0
    if declared > MAX_MESSAGE_BYTES:
        return receive
    chunks, size, more = [], 0, False
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body", False))
        if not more or size > MAX_MESSAGE_BYTES:
            break
    body = b"".join(chunks)
    if not more and size <= MAX_MESSAGE_BYTES and "json" in headers.get("content-type", "").lower():
        outcome = classify(body)
        if outcome is None and body.lstrip()[:1] == b"[":
            # A batch of notifications only: nothing is owed an answer over stdio, but HTTP
            # answers every POST, and MCP takes one message per request.
            outcome = Reply(error_response(None, INVALID_REQUEST, DIALECT.batches.refusal))
        if isinstance(outcome, Reply) and _sdk_would_dump(body):
            await JSONResponse(outcome.payload, status_code=400)(scope, receive, send)
            return None
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


def _sdk_would_dump(body: bytes) -> bool:
    """Whether the SDK would answer ``body`` with its validation text rather than a parse error:
    it parses as JSON (the SDK's own -32700 for what does not is plain)."""
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _route_path(scope: Scope) -> str:
    """The request path below the prefix the routes are mounted at."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def mcp_http_app(server: MCPServer, **options: Any) -> Starlette:
    """A standalone ASGI app serving ``server`` at ``/mcp`` (options as for :class:`MCPHttp`)."""
    http = MCPHttp(server, **options)
    return Starlette(routes=http.routes, lifespan=http.lifespan)
