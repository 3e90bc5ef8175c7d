"""The Kura daemon's HTTP app: the read-only API and, when enabled, MCP
(Streamable HTTP and SSE at ``/mcp``; SSE also at ``/sse`` + ``/messages/``).

``GET /api/health``, ``GET /api/list``, ``GET /api/search`` are Kura's API;
``POST /api/reload`` (re-read the registry now) and ``GET /api/status``
(per-database state for ``kura list``) serve the ``kura`` CLI.  Every request
must name a loopback Host and, when it carries an Origin, come from a
loopback page: that keeps DNS-rebinding and cross-site pages from reading the
documents or driving the daemon, although the socket is loopback-only anyway.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from memstrata.mcp_server.http import MCPHttp
from .mcp import build_kura_server
from .search import DatabaseUnavailable, InvalidArgument, KuraSearch
from . import store as kura_store

from memstrata.mcp_server.loopback import HOST, refused
from .library import Library

def refusal(headers: Headers) -> tuple[int, str] | None:
    """Why a request must be refused (mcp_server/loopback.py): a Host that is not a
    loopback name (421, DNS rebinding) or an Origin other than a loopback page
    (403, a cross-site request from a browser, ``Origin: null`` included)."""
    # Every copy of each header counts: a foreign Origin beside a local one is still foreign.
    verdicts = {refused(host, origin) for host in headers.getlist("host") or [None]
                for origin in headers.getlist("origin") or [None]}
    which = HOST if HOST in verdicts else next((v for v in verdicts if v is not None), None)
    if which == HOST:
        return 421, "invalid Host header"
    if which is not None:
        return 403, "cross-origin requests are refused"
    return None


class LoopbackOnly:
    """Host and Origin checks on every route.  Pure ASGI (not BaseHTTPMiddleware),
    so MCP's streamed responses pass untouched."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            problem = refusal(Headers(scope=scope))
            if problem is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                status, message = problem
                await JSONResponse({"error": message}, status_code=status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(library: Library, *, remote: bool, version: str,
              on_started: Callable[[], None] = lambda: None,
              on_stopping: Callable[[], None] = lambda: None) -> FastAPI:
    search = KuraSearch(library)
    mcp_http = MCPHttp(build_kura_server(search, version=version)) if remote else None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if mcp_http is not None:
                await stack.enter_async_context(mcp_http.lifespan())
            on_started()
            try:
                yield
            finally:
                on_stopping()

    app = FastAPI(title="kura", version=version, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.add_middleware(LoopbackOnly)

    @app.get("/api/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": version, "pid": os.getpid(), "remote": remote}

    @app.get("/api/list")
    def list_dbs() -> dict[str, Any]:
        return search.list_rag()

    @app.get("/api/search")
    def search_dbs(db: str | None = None, q: str | None = None, limit: str | None = None,
                   mode: str | None = None):
        try:
            return search.search_rag(db, q, limit, mode)
        except DatabaseUnavailable as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        except InvalidArgument as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    @app.post("/api/reload")
    def reload() -> dict[str, Any]:
        library.reload()
        return search.list_rag()

    @app.get("/api/status")
    def status() -> dict[str, Any]:
        problems = library.problems()
        out = []
        for entry in library.registered():
            name = entry["db"]
            item: dict[str, Any] = {**entry, "loaded": False}
            store = library.reader(name)
            if store is not None:
                try:
                    st = kura_store.stats(store)
                    item.update(loaded=True, sources=st.sources, chunks=st.chunks,
                                skipped=kura_store.get_skipped(store), root=str(library.root_of(name)))
                except Exception as exc:  # noqa: BLE001 - report, do not fail the listing
                    item["problem"] = str(exc)
            elif name in problems:
                item["problem"] = problems[name]
            out.append(item)
        return {"databases": out, "remote": remote}

    if mcp_http is not None:
        app.router.routes.extend(mcp_http.routes)
    return app
