"""The harness's FastAPI app: proxy, dashboard (/), /health, /status, /metrics and /mcp.

:func:`build_app` wires one open :class:`~indexer.workspace.Workspace` (the
caller indexes, watches and closes it) to the proxy, the ledger recorder,
the metrics registry and the MCP transports.  Every request first passes the
:class:`HostGuard`: MemStrata only answers requests addressed to a loopback
name, which defeats DNS rebinding from a browser.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memstrata import __version__
from memstrata.storage import ledger

from memstrata.harness import dashboard
from .accesslog import AccessLog
from memstrata.mcp_server.loopback import HOST, allowed_names, refused
from .metrics import Metrics
from .forward import Proxy, ProxyConfig
from .labels import Labels, resolve as resolve_labels
from .recorder import Recorder
from .savings import WindowSavings, iso, load_providers, savings_report
from .compress_request import RESPONSES
from .upstream import ANTHROPIC, OPENAI, api_for_path, error_body

log = logging.getLogger(__name__)

@dataclass
class HarnessConfig:
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    allowed_hosts: tuple[str, ...] = ()  # extra Host names to accept (e.g. a non-loopback --host)
    mount_mcp: bool = True
    access_log: bool = False              # one stderr line per request (harness/proxy/accesslog.py)
    address: str | None = None            # the URL served, recorded with the ledger session
    labels: Labels | None = None          # user/host recorded with each ledger row (None: env, then the OS's)


@dataclass
class Harness:
    """What the routes share; ``app.state.harness``."""

    ws: object
    config: HarnessConfig
    metrics: Metrics
    proxy: Proxy
    started: float
    recorder: Recorder | None = None
    session_id: int | None = None
    providers_error: str | None = None

    def uptime(self) -> float:
        return time.time() - self.started

    def flush(self) -> None:
        """Wait until every finished request is in the ledger (tests, shutdown)."""
        if self.recorder is not None:
            self.recorder.flush()


class HostGuard:
    """Refuses requests whose Host (or Origin, when sent) is not a loopback/allowed name: every
    copy of either header must be one."""

    def __init__(self, app, allowed: Iterable[str] = (), metrics: Metrics | None = None):
        self.app = app
        self.allowed = allowed_names(allowed)
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        # Every copy of each header is checked: a request carrying a foreign one beside a local one
        # is refused whichever comes first (what reads it behind this may take either copy).
        hosts, origins = [], []
        for k, v in scope.get("headers", ()):
            if k == b"host":
                hosts.append(v.decode("latin-1"))
            elif k == b"origin":
                origins.append(v.decode("latin-1"))
        problem = None
        host = next((h for h in hosts if refused(h, None, self.allowed) == HOST), None)
        if host is not None or not hosts:
            problem = (421, f"MemStrata only answers requests addressed to localhost; refused Host "
                            f"{(host or '(none)')[:100]!r} (DNS-rebinding protection)")
        else:
            origin = next((o for o in origins if refused(hosts[0], o, self.allowed) is not None), None)
            if origin is not None:
                problem = (403, f"MemStrata refuses cross-site requests; Origin {origin[:100]!r} is not local")
        if problem is None or scope["type"] != "http":
            if problem is not None:  # websocket: just close
                return await send({"type": "websocket.close", "code": 1008})
            if any(v != v.lower() for v in (*hosts, *origins)):
                # Host names are case-insensitive; what is mounted behind (the MCP SDK's own check)
                # compares exact strings, so it gets them as this check read them.
                scope = dict(scope, headers=[(k, v.lower()) if k in (b"host", b"origin") else (k, v)
                                             for k, v in scope["headers"]])
            return await self.app(scope, receive, send)
        status, message = problem
        path = scope.get("path", "")
        if self.metrics is not None and (path.startswith("/v1/") or path.startswith("/anthropic/")):
            self.metrics.requests.labels(status=str(status)).inc()  # proxied paths count every answer
        response = JSONResponse(error_body(api_for_path(scope.get("path", "")), status, message), status_code=status)
        await response(scope, receive, send)


class CloseAfterRefusal:
    """A request refused for its size (414, 431) gets its answer, then the connection closes.

    A client that sent such a request is often still sending it, or reads to
    the end of the connection; idle connections otherwise stay open long
    (http11.CLIENT_KEEPALIVE_S), and it would wait that long.  The HTTP
    protocol answers the requests too large to parse in the same way.
    """

    CLOSE_AFTER = frozenset({414, 431})

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_closing(message):
            if message["type"] == "http.response.start" and message["status"] in self.CLOSE_AFTER:
                headers = [h for h in message.get("headers", ()) if h[0].lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        return await self.app(scope, receive, send_closing)


def build_app(ws, config: HarnessConfig | None = None, *, started: float | None = None) -> FastAPI:
    config = config or HarnessConfig()
    labels = config.labels if config.labels is not None else resolve_labels()
    started = time.time() if started is None else started
    metrics = Metrics(project=Path(ws.root).name)
    proxy = Proxy(ws, config.proxy, metrics)
    harness = Harness(ws=ws, config=config, metrics=metrics, proxy=proxy, started=started)

    mcp_http = None
    if config.mount_mcp:
        mcp_http = _build_mcp(ws, harness, config.allowed_hosts)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        # Starting a session first closes the sessions of serve processes that died.
        harness.session_id = await anyio.to_thread.run_sync(
            lambda: ledger.start_session(ws.store, started, os.getpid(), address=config.address,
                                         user_label=labels.user, host_label=labels.host))
        # The recorder writes on a connection of its own, so its commit at the end of
        # each answer never queues behind this process's readers.
        ledger_store = await anyio.to_thread.run_sync(ws.store.another)
        harness.recorder = Recorder(ws, metrics, harness.session_id, store=ledger_store, labels=labels)
        proxy.recorder = harness.recorder
        proxy.session_id = harness.session_id
        await proxy.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if mcp_http is not None:
                    await stack.enter_async_context(mcp_http.lifespan(app))
                yield
        finally:
            await proxy.aclose()
            # Drain what finished before the server stopped, then close the session.
            await anyio.to_thread.run_sync(harness.recorder.close)
            await anyio.to_thread.run_sync(ledger_store.close)
            with contextlib.suppress(Exception):
                await anyio.to_thread.run_sync(ledger.end_session, ws.store, harness.session_id, time.time())

    app = FastAPI(title="MemStrata", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.harness = harness
    app.add_middleware(HostGuard, allowed=config.allowed_hosts, metrics=metrics)
    app.add_middleware(CloseAfterRefusal)
    if config.access_log:  # outermost, so refused requests get their line too
        app.add_middleware(AccessLog)

    # -- harness endpoints ---------------------------------------------------------

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "uptime_seconds": int(harness.uptime())})

    async def status(request: Request) -> Response:
        return JSONResponse(await anyio.to_thread.run_sync(status_payload, harness))

    async def metrics_endpoint(request: Request) -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    async def dashboard_page(request: Request) -> Response:
        return dashboard.page_response()

    async def dashboard_api(request: Request) -> Response:
        return JSONResponse(await anyio.to_thread.run_sync(dashboard.data, harness),
                            headers={"cache-control": "no-store"})

    async def team_api(request: Request) -> Response:
        return JSONResponse(await anyio.to_thread.run_sync(dashboard.team, harness),
                            headers={"cache-control": "no-store"})

    app.add_route("/health", health, methods=["GET"])
    app.add_route("/status", status, methods=["GET"])
    app.add_route("/metrics", metrics_endpoint, methods=["GET"])
    app.add_route("/", dashboard_page, methods=["GET"])
    app.add_route("/api/dashboard", dashboard_api, methods=["GET"])
    app.add_route("/api/team", team_api, methods=["GET"])

    # -- proxy -------------------------------------------------------------------------

    async def openai_chat(request: Request) -> Response:
        return await proxy.model_call(request, OPENAI, "chat/completions", "openai.chat")

    async def openai_responses(request: Request) -> Response:
        return await proxy.model_call(request, RESPONSES, "responses", "openai.responses")

    async def anthropic_messages(request: Request) -> Response:
        return await proxy.model_call(request, ANTHROPIC, "v1/messages", "anthropic.messages")

    # A model endpoint spelled with a doubled or trailing slash (a base URL ending in "/" joined
    # to "/v1/messages") is still that endpoint: compressed and recorded, not passed through.
    model_routes = {(OPENAI, "chat/completions"): openai_chat, (OPENAI, "responses"): openai_responses,
                    (ANTHROPIC, "v1/messages"): anthropic_messages}

    async def other(request: Request, api: str) -> Response:
        rest = request.path_params["rest"]
        if request.method == "POST":
            route = model_routes.get((api, "/".join(part for part in rest.split("/") if part)))
            if route is not None:
                return await route(request)
        return await proxy.passthrough(request, api, rest)

    async def openai_other(request: Request) -> Response:
        return await other(request, OPENAI)

    async def anthropic_other(request: Request) -> Response:
        return await other(request, ANTHROPIC)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    app.add_route("/v1/chat/completions", openai_chat, methods=["POST"])
    app.add_route("/v1/responses", openai_responses, methods=["POST"])
    app.add_route("/anthropic/v1/messages", anthropic_messages, methods=["POST"])
    app.add_route("/v1/{rest:path}", openai_other, methods=methods)
    app.add_route("/anthropic/{rest:path}", anthropic_other, methods=methods)

    if mcp_http is not None:
        app.router.routes.extend(mcp_http.routes)

    @app.exception_handler(404)
    async def not_found(request: Request, exc) -> Response:
        path = request.url.path
        message = f"no such endpoint: {path}"
        if path.strip("/").split("/", 1)[0] in _OPENAI_ROOTS:
            # An OpenAI client given the proxy's root as its base URL: its paths lack the /v1.
            host = request.headers.get("host", "127.0.0.1:8080")
            message += f" (OpenAI requests go to /v1: OPENAI_BASE_URL=http://{host}/v1)"
        return JSONResponse(error_body(api_for_path(path), 404, message), status_code=404)

    @app.exception_handler(405)
    async def not_allowed(request: Request, exc) -> Response:
        return JSONResponse(error_body(api_for_path(request.url.path), 405,
                                       f"{request.method} is not supported on {request.url.path}"), status_code=405)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        log.error("internal error on %s: %s", request.url.path, type(exc).__name__)
        return JSONResponse(error_body(api_for_path(request.url.path), 500, "internal error in the MemStrata proxy"),
                            status_code=500)

    return app


def _build_mcp(ws, harness: Harness, extra_hosts: Iterable[str]):
    try:
        from memstrata.mcp_server import MCPHttp, build_server
    except ImportError:  # the MCP package is optional for the proxy
        log.warning("MCP transports unavailable; /mcp is not mounted")
        return None

    def savings() -> dict:
        ids = [harness.session_id] if harness.session_id is not None else []
        return savings_report(ws.store, session_ids=ids).summary()

    return MCPHttp(build_server(ws, savings=savings), extra_hosts=[h for h in extra_hosts])


# The first part of OpenAI's endpoint paths, asked of the root by a client whose base URL lacks /v1.
_OPENAI_ROOTS = frozenset({"chat", "responses", "completions", "embeddings", "models", "moderations"})
_WINDOW_FIELDS = (
    "requests", "ok_requests", "compressed_requests", "tokens_original", "tokens_forwarded", "tokens_saved",
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens",
    "compactions",
    "prefix_invalidated_tokens", "dollar_saved_gross", "cache_miss_dollars", "dollar_saved", "dollar_spent",
    "cf_requests", "bill_direct", "bill_proxied",
    "unpriced_tokens_saved", "top_model",
)


def window_fields(w) -> dict:
    return {k: getattr(w, k) for k in _WINDOW_FIELDS}


def status_payload(harness: Harness) -> dict:
    """``index_status`` fields at the top level, then this serve session's and the cycle's figures."""
    st = harness.ws.status()
    out = st.api_fields()
    if st.message:
        out["message"] = st.message
    out["symbols"] = st.symbols
    out["languages"] = st.languages
    out["watching"] = bool(getattr(harness.ws, "watching", False))
    providers, error = load_providers()
    ids = [harness.session_id] if harness.session_id is not None else []
    report = savings_report(harness.ws.store, session_ids=ids, providers=providers)
    session = report.session if report.session is not None else WindowSavings(since=harness.started)
    out["session"] = {
        "id": harness.session_id,
        "started": iso(harness.started),
        "uptime_seconds": int(harness.uptime()),
        "pid": os.getpid(),
        **window_fields(session),
        "compression": _compression_mode(harness.config.proxy),
    }
    out["cycle"] = {"started": report.cycle.as_dict()["since_iso"], **window_fields(report.cycle)}
    out["savings"] = report.summary()
    if error:
        out["providers_error"] = "providers.json is invalid; rates are unknown until it is fixed"
    return out


def _compression_mode(proxy_config) -> str:
    """safe | aggressive | off, from the proxy's settings (a bool before modes existed)."""
    mode = getattr(proxy_config, "mode", None) or getattr(getattr(proxy_config, "compression", None), "mode", None)
    if isinstance(mode, str):
        return mode
    return "safe" if proxy_config.compress else "off"


def dumps(obj) -> str:
    return json.dumps(obj, indent=2)
