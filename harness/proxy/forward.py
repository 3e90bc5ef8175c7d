"""The compressing proxy: OpenAI chat/completions and responses, Anthropic messages.

A model call is read whole (it is JSON), compressed on a worker thread,
forwarded with httpx, and the upstream's response is streamed back chunk by
chunk as it arrives — status, headers (minus per-hop ones) and body bytes
unchanged.  The :class:`Recorder` counts tokens off the request path and
writes the ledger row just before the answer's last bytes go out.
Other paths under ``/v1`` and ``/anthropic`` (``/v1/models``,
``messages/count_tokens``, ...) are passed through untouched and unrecorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field

import anyio
import httpx
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from memstrata.mcp_server.quiet import YIELD_S

from .body_encoding import SUPPORTED, BadEncoding, DecodedTooLarge, UnsupportedEncoding, codings, decode_body
from .compress_request import ANTHROPIC, OPENAI, RESPONSES, CompressionResult, CompressionSettings, Compressor
from .counterfactual import cache_family
from .metrics import Metrics
from .recorder import Finished, Recorder
from .upstream import (
    DEFAULT_ANTHROPIC_BASE,
    DEFAULT_OPENAI_BASE,
    UPSTREAM_KEEPALIVE_S,
    Upstream,
    decoded_by_httpx,
    hide_url_secrets,
    shown_host,
    error_body,
    request_headers,
    response_headers,
    sse_error_event,
)

log = logging.getLogger(__name__)

ANSWER_CAPTURE_BYTES = 8 * 1024 * 1024  # enough answer to measure; the client still gets everything
MAX_URL_CHARS = 8192      # path + query; longer gets 414 (the upstream hop could not carry it anyway)
MAX_JSON_DEPTH = 100      # real requests nest about 10 deep; deeper is refused before anything walks it
INLINE_BODY_BYTES = 64 * 1024  # smaller bodies are prepared on the event loop (a thread hop costs more)
# Larger ones are prepared on worker threads, at most this many at once (at least 2, so one long
# preparation never holds up every other).  Preparing is Python holding the interpreter lock, so
# more threads than cores do no more work: with dozens of agents in flight they only take turns,
# every request's preparation is stretched over everyone's time slices and the event loop waits
# its turn among them.  At 32 concurrent agents that doubled the compressed path's p95.
PREPARING_THREADS = max(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2)
# How long a request body may pause between two chunks before the request is refused (408).
BODY_IDLE_S = 60.0
# Background work (whole-file token counts) waits while requests are prepared, at most this long
# a step: a steady stream of requests slows it down but cannot stop it.
QUIET_MAX_WAIT_S = 2.0
MAX_CONNECTIONS = 512     # to the upstreams, over all pools
MAX_KEEPALIVE = 128
UPSTREAM_POOLS = 8


@dataclass
class ProxyConfig:
    openai_base: str = DEFAULT_OPENAI_BASE
    anthropic_base: str = DEFAULT_ANTHROPIC_BASE
    openai_provider: str = "openai"
    anthropic_provider: str = "anthropic"
    compress: bool = True     # False: forward everything unchanged (the same as compression.mode "off")
    compression: CompressionSettings = field(default_factory=CompressionSettings)
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    max_body_bytes: int = 64 * 1024 * 1024
    trust_env: bool = True  # honour HTTPS_PROXY / NO_PROXY for the upstream hop


class Proxy:
    def __init__(self, ws, config: ProxyConfig, metrics: Metrics, recorder: Recorder | None = None):
        self.ws = ws
        self.config = config
        self.metrics = metrics
        self.recorder = recorder
        settings = config.compression
        if not config.compress and settings.mode != "off":
            settings = CompressionSettings.for_mode("off")
        self.compressor = Compressor(ws, settings)
        self.upstreams = {
            OPENAI: Upstream(OPENAI, config.openai_base, config.openai_provider),
            ANTHROPIC: Upstream(ANTHROPIC, config.anthropic_base, config.anthropic_provider),
        }
        self.upstreams[RESPONSES] = self.upstreams[OPENAI]  # the same host, another endpoint
        self.clients: list[httpx.AsyncClient] = []
        self._turn = 0
        self.session_id: int | None = None
        self.stats = {"requests": 0, "compressed": 0, "errors": 0}
        self._preparing: anyio.CapacityLimiter | None = None
        self._in_preparation = 0
        self._quiet = threading.Condition()
        self._relaying: set[httpx.Response] = set()  # upstream answers being relayed now
        self.stopping: str | None = None  # why the answers still relayed were ended, once they were

    async def end_answers(self, reason: str) -> None:
        """Ends every answer still being relayed (serve is stopping and its grace is over): a
        stream gets an error event saying ``reason``, a JSON body is cut off, and each is
        recorded as ended by the shutdown, not as abandoned by its client."""
        self.stopping = reason
        for resp in list(self._relaying):
            with contextlib.suppress(Exception):
                await resp.aclose()  # the relaying loop's next read fails at once

    async def start(self) -> None:
        c = self.config
        hide_url_secrets(logging.getLogger("httpx"))  # its request lines carry the upstream URL
        self._preparing = anyio.CapacityLimiter(PREPARING_THREADS)  # made on the event loop it serves
        # Several small connection pools instead of one large one: httpx's pool walks all its
        # connections (polling every idle socket) each time a request starts or an answer ends,
        # which with dozens of agents in flight cost more CPU than relaying their bodies.
        self.clients = [httpx.AsyncClient(
            timeout=httpx.Timeout(connect=c.connect_timeout, read=c.read_timeout, write=60.0, pool=c.connect_timeout),
            limits=httpx.Limits(max_connections=MAX_CONNECTIONS // UPSTREAM_POOLS,
                                max_keepalive_connections=MAX_KEEPALIVE // UPSTREAM_POOLS,
                                keepalive_expiry=UPSTREAM_KEEPALIVE_S),
            follow_redirects=False,
            trust_env=c.trust_env,
        ) for _ in range(UPSTREAM_POOLS)]

    def _client(self) -> httpx.AsyncClient:
        """The next pool, in turn."""
        self._turn = (self._turn + 1) % len(self.clients)
        return self.clients[self._turn]

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
        self.clients = []

    # -- model calls ------------------------------------------------------------------

    async def model_call(self, request: Request, api: str, rest: str, endpoint: str) -> Response:
        t0 = time.perf_counter()
        arrived = time.time()
        upstream = self.upstreams[api]
        self.stats["requests"] += 1
        try:
            raw = await self._read_body(request)
        except _TooLarge:
            return self._local_error(api, 413, "request body is larger than the proxy accepts", endpoint, t0)
        except _BodyStalled:
            return self._local_error(api, 408, f"the request body stopped arriving ({BODY_IDLE_S:g} s without a byte)",
                                     endpoint, t0)
        except ClientDisconnect:
            return Response(status_code=499)
        if _url_too_long(request):
            return self._local_error(api, 414, "the request URL is too long", endpoint, t0)
        decoded = bool(codings(request.headers.get("content-encoding", "")))
        if decoded:
            try:
                raw = decode_body(raw, request.headers["content-encoding"], self.config.max_body_bytes)
            except UnsupportedEncoding as exc:
                return self._local_error(api, 415, f"request body Content-Encoding {exc.name!r} is not supported "
                                                   f"(the proxy reads {', '.join(SUPPORTED)} and plain bodies)",
                                         endpoint, t0)
            except DecodedTooLarge:
                return self._local_error(api, 413, "request body, once decoded, is larger than the proxy accepts",
                                         endpoint, t0)
            except BadEncoding as exc:
                return self._local_error(api, 400, f"request body is {exc} (its Content-Encoding says so)",
                                         endpoint, t0)
        # Parsing, compressing and re-serializing a large body runs on a worker thread, so the
        # event loop keeps relaying other answers meanwhile.
        if len(raw) > INLINE_BODY_BYTES:
            prepared = await anyio.to_thread.run_sync(self._prepare_counted, raw, api, limiter=self._preparing)
        else:
            prepared = self._prepare_counted(raw, api)
        if prepared.error is not None:
            return self._local_error(api, 400, prepared.error, endpoint, t0)
        body, comp, content = prepared.body, prepared.compression, prepared.content
        if self.compressor.settings.mode != "off":
            self.metrics.compression_seconds.observe(prepared.compress_seconds)
        if comp is not None and comp.changed:
            self.stats["compressed"] += 1
        model = body.get("model") if isinstance(body.get("model"), str) else None
        stream = body.get("stream") is True

        # Token counting starts now, on the recorder's thread, while the upstream answers;
        # the access log reads the counts from request.state.
        counting = None
        if self.recorder is not None:
            counting = self.recorder.begin(body, comp, api, family=cache_family(api, upstream.provider),
                                           model=model, arrived=arrived)
        request.state.counting = counting

        def finish(status: int | None, error: str | None, captured: bytes | None,
                   completed: bool = False) -> Awaitable[None] | None:
            """Hand the request to the recorder; ``completed``: returns what to await for its row
            to be committed."""
            if self.recorder is None:
                return None
            item = Finished(
                time=arrived, endpoint=endpoint, api=api, provider=upstream.provider, model=model, stream=stream,
                status=status, error=error, body=body, compression=comp, response=captured,
                duration_ms=(time.perf_counter() - t0) * 1000, session_id=self.session_id, counting=counting,
            )
            if completed:
                return self.recorder.commit_completed(item)
            self.recorder.submit(item)
            return None

        return await self._forward(request, api, upstream.url(rest, request.url.query), content, endpoint, t0,
                                   finish, decoded=decoded)

    def wait_quiet(self, max_wait: float = QUIET_MAX_WAIT_S) -> None:
        """Return when no request is being prepared, or after ``max_wait`` seconds: the pause
        between steps of the server's background work, which is Python under the same
        interpreter lock the compression needs.  It lets go of that lock for a moment first,
        so that a request just arrived is read at once (see mcp_server/quiet.py)."""
        time.sleep(YIELD_S)
        with self._quiet:
            if self._in_preparation:
                self._quiet.wait_for(lambda: not self._in_preparation, timeout=max_wait)

    def _prepare_counted(self, raw: bytes, api: str) -> "_Prepared":
        with self._quiet:
            self._in_preparation += 1
        try:
            return self._prepare(raw, api)
        finally:
            with self._quiet:
                self._in_preparation -= 1
                if not self._in_preparation:
                    self._quiet.notify_all()

    def _prepare(self, raw: bytes, api: str) -> "_Prepared":
        try:
            body, plain_numbers, deep = _parse(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return _Prepared(error=f"request body is not valid JSON: {_json_reason(exc)}")
        except RecursionError:
            return _Prepared(error=f"request body is nested more than {MAX_JSON_DEPTH} levels deep")
        if deep if deep is not None else _too_deep(body, MAX_JSON_DEPTH):
            return _Prepared(error=f"request body is nested more than {MAX_JSON_DEPTH} levels deep")
        if not isinstance(body, dict):  # JSON null, a number, a list
            return _Prepared(error="request body must be a JSON object")
        c0 = time.perf_counter()
        try:
            comp = self.compressor.compress(body, api)
        except Exception as exc:  # compression is best effort: forward the original
            log.warning("compression failed (%s); forwarding the request unchanged", type(exc).__name__)
            comp = None
        seconds = time.perf_counter() - c0
        content = raw
        if comp is not None and comp.changed:
            written = _request_json(comp.body, plain_numbers)
            if written is None:
                log.warning("the compressed request cannot be written as the JSON it was read from "
                            "(a number past the float range); forwarding the request unchanged")
                comp = None
            else:
                content = written
        return _Prepared(body=body, compression=comp, content=content, compress_seconds=seconds)

    # -- other endpoints: pass through ----------------------------------------------

    async def passthrough(self, request: Request, api: str, rest: str) -> Response:
        t0 = time.perf_counter()
        if _url_too_long(request):
            return self._local_error(api, 414, "the request URL is too long", "passthrough", t0)
        if api == OPENAI and "anthropic-version" in request.headers:
            # An Anthropic client given the proxy's root as its base URL (messages, count_tokens,
            # models): its key must not go to the OpenAI-compatible upstream (api.openai.com by
            # default), which has no such endpoint.
            host = request.headers.get("host", "127.0.0.1:8080")
            return self._local_error(ANTHROPIC, 404, f"this is the OpenAI route: Anthropic requests go to "
                                                     f"/anthropic (ANTHROPIC_BASE_URL=http://{host}/anthropic)",
                                     "passthrough", t0)
        if api == ANTHROPIC and "anthropic-version" not in request.headers and _openai_endpoint(rest):
            # An OpenAI client given the Anthropic route as its base URL: its key must not go to the
            # Anthropic upstream, which has none of OpenAI's endpoints (every Anthropic SDK call
            # carries anthropic-version).
            host = request.headers.get("host", "127.0.0.1:8080")
            return self._local_error(OPENAI, 404, f"this is the Anthropic route: OpenAI requests go to "
                                                  f"/v1 (OPENAI_BASE_URL=http://{host}/v1)", "passthrough", t0)
        try:
            content = await self._read_body(request)
        except _TooLarge:
            return self._local_error(api, 413, "request body is larger than the proxy accepts", "passthrough", t0)
        except _BodyStalled:
            return self._local_error(api, 408, f"the request body stopped arriving ({BODY_IDLE_S:g} s without a byte)",
                                     "passthrough", t0)
        except ClientDisconnect:
            return Response(status_code=499)
        return await self._forward(request, api, self.upstreams[api].url(rest, request.url.query), content,
                                   "passthrough", t0, None)

    # -- the hop ----------------------------------------------------------------------

    async def _forward(self, request: Request, api: str, url: str, content: bytes, endpoint: str, t0: float,
                       finish, decoded: bool = False) -> Response:
        assert self.clients, "proxy not started"
        client = self._client()
        headers = request_headers(request.headers)
        if decoded:  # the body goes out as the plain JSON it was decoded to
            headers = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
        req = client.build_request(request.method, url, headers=headers,
                                        content=content if request.method not in ("GET", "HEAD") else None)
        host = shown_host(url)
        try:
            resp = await _send_while_client_waits(client, req, request)
        except _ClientLeft:
            # Nobody will read the answer: the upstream call is cancelled (its connection closed,
            # so the provider stops generating) and the request recorded as abandoned.
            self.metrics.requests.labels(status="499").inc()
            self.metrics.request_seconds.labels(endpoint=endpoint).observe(time.perf_counter() - t0)
            if finish:
                finish(None, "client_gone", None)
            return Response(status_code=499)
        except httpx.TimeoutException:
            self.metrics.upstream_errors.labels(kind="timeout").inc()
            if finish:
                finish(None, "timeout", None)
            return self._local_error(api, 504, f"the upstream ({host}) did not answer in time", endpoint, t0)
        except httpx.ConnectError:
            self.metrics.upstream_errors.labels(kind="connect").inc()
            if finish:
                finish(None, "connect", None)
            return self._local_error(api, 502, f"could not connect to the upstream ({host})", endpoint, t0)
        except httpx.HTTPError as exc:
            self.metrics.upstream_errors.labels(kind="dropped").inc()
            if finish:
                finish(None, "dropped", None)
            return self._local_error(api, 502, f"the upstream ({host}) closed the connection without an answer "
                                               f"({type(exc).__name__})", endpoint, t0)

        status = resp.status_code
        if status >= 400:
            self.metrics.upstream_errors.labels(kind=f"http_{status}").inc()
            self.stats["errors"] += 1
        content_type = resp.headers.get("content-type", "")
        is_sse = "text/event-stream" in content_type
        # A 2xx that is neither JSON nor a stream (a captive portal's page, a wrong upstream) is
        # relayed as it came but recorded as no answer: no model ran, and nothing was saved.
        no_answer = status < 300 and bool(content_type) and not is_sse and "json" not in content_type
        metrics = self.metrics

        async def record_completed() -> None:
            # Before the client can see the end of the answer, so a crash never loses a row it saw.
            with anyio.CancelScope(shield=True):
                committed = finish(status, "not_an_answer" if no_answer else None, b"".join(captured), True)
                if committed is not None:
                    await committed

        captured: list[bytes] = []

        async def body_iter():
            size = relayed = 0
            error = None
            first = True
            recorded = finish is None
            ended = False  # the upstream's answer ran out (or failed), rather than the client leaving
            tail = b""
            self._relaying.add(resp)
            try:
                async for chunk in resp.aiter_bytes():
                    if first:
                        metrics.ttfb_seconds.labels(endpoint=endpoint).observe(time.perf_counter() - t0)
                        first = False
                    if finish is not None and size < ANSWER_CAPTURE_BYTES:
                        captured.append(chunk)
                        size += len(chunk)
                    if not recorded and is_sse and ends_stream(tail + chunk):
                        recorded = True  # the SDKs stop reading at this event
                        await record_completed()
                    tail = chunk[-32:]
                    relayed += len(chunk)
                    yield chunk
                ended = True
                if not recorded and is_sse and status < 400:
                    # The upstream closed the stream before its final event (an overloaded error
                    # event, a cut): relayed as it came, recorded as what it was.
                    error = "incomplete"
                elif not recorded:
                    recorded = True
                    await record_completed()
            except Exception as exc:
                if self.stopping is not None:
                    error, ended = "shutdown", True  # end_answers closed the upstream's answer
                elif isinstance(exc, httpx.TimeoutException):
                    error, ended = "timeout", True
                elif isinstance(exc, httpx.HTTPError):
                    error, ended = "dropped", True
                else:
                    raise
            finally:
                self._relaying.discard(resp)
                if not ended and not recorded:
                    error = "client_gone"  # the client stopped reading before the answer's end
                if error is None and first:
                    metrics.ttfb_seconds.labels(endpoint=endpoint).observe(time.perf_counter() - t0)
                metrics.requests.labels(status=str(status)).inc()
                metrics.request_seconds.labels(endpoint=endpoint).observe(time.perf_counter() - t0)
                if error is not None and error != "client_gone":
                    metrics.upstream_errors.labels(kind=error).inc()
                if not recorded:  # cut off: the client never had the whole answer
                    finish(status, error, b"".join(captured))
                with anyio.CancelScope(shield=True):  # also when the client went away mid-stream
                    await resp.aclose()
            if error in ("timeout", "dropped", "shutdown"):
                # The status line is gone; tell the client in the stream's own terms.
                message = {"timeout": "the upstream stopped answering (timeout)",
                           "dropped": "the upstream closed the connection mid-answer",
                           "shutdown": f"memstrata serve is stopping ({self.stopping})"}[error]
                log.warning("%s: %s (%s, %d bytes relayed); the client %s", endpoint, message, host, relayed,
                            "got an error event" if is_sse else "sees the response cut off")
                if is_sse:
                    yield sse_error_event(api, message)
                else:
                    raise _Aborted(message)

        response = _RelayResponse(body_iter(), status_code=status)
        response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                                for k, v in response_headers(resp.headers, decoded=decoded_by_httpx(resp))]
        return response

    async def _read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.config.max_body_bytes:
            raise _TooLarge
        chunks, size = [], 0
        stream = request.stream().__aiter__()
        while True:
            # A client that stops sending halfway would hold its connection for ever.
            with anyio.move_on_after(BODY_IDLE_S) as idle:
                try:
                    chunk = await stream.__anext__()
                except StopAsyncIteration:
                    return b"".join(chunks)
            if idle.cancelled_caught:
                raise _BodyStalled
            size += len(chunk)
            if size > self.config.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)

    def _local_error(self, api: str, status: int, message: str, endpoint: str, t0: float) -> Response:
        self.metrics.requests.labels(status=str(status)).inc()
        self.metrics.request_seconds.labels(endpoint=endpoint).observe(time.perf_counter() - t0)
        return JSONResponse(error_body(api, status, message), status_code=status)


# Responses API streams send no [DONE]: their last event is the response's final state.
_STREAM_ENDS = (b"data: [DONE]", b"event: message_stop", b"event: response.completed",
                b"event: response.incomplete", b"event: response.failed")


def ends_stream(data: bytes) -> bool:
    """True when ``data`` holds the final event of an OpenAI, Responses or Anthropic stream."""
    return any(marker in data for marker in _STREAM_ENDS)


@dataclass
class _Prepared:
    body: dict | None = None
    compression: CompressionResult | None = None
    content: bytes = b""
    compress_seconds: float = 0.0
    error: str | None = None   # a 400 to answer instead


class _BodyStalled(Exception):
    """The client sent part of a request body, then nothing for BODY_IDLE_S."""


class _TooLarge(Exception):
    pass


class _ClientLeft(Exception):
    """The client disconnected before the upstream's answer began."""


async def _send_while_client_waits(client: httpx.AsyncClient, req: httpx.Request, request: Request) -> httpx.Response:
    """``client.send(req)`` up to the upstream's status line, given up as soon as the client
    disconnects.  The request body has been read whole, so the next message the server has for
    this request is ``http.disconnect``; waiting for it costs nothing while the client stays."""
    sending = asyncio.ensure_future(client.send(req, stream=True))
    leaving = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((sending, leaving), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        sending.cancel()
        leaving.cancel()
        raise
    if sending.done():
        leaving.cancel()
        return sending.result()
    sending.cancel()
    await asyncio.wait((sending,))  # never raises the task's own error; our cancellation does
    if not sending.cancelled() and sending.exception() is None:  # the headers came as the client left
        await sending.result().aclose()
    raise _ClientLeft


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class _Aborted(Exception):
    """Raised inside a JSON body stream: the response ends without its last chunk."""


class _RelayResponse(StreamingResponse):
    """A streamed answer that can end cut off: when the upstream dies mid-body, the final
    empty chunk is never sent, so the server closes the connection and the client sees an
    incomplete response instead of a truncated success (and no traceback is logged)."""

    async def stream_response(self, send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except _Aborted:
            _quiet_incomplete_once()
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_INCOMPLETE = "ASGI callable returned without completing response."
_incomplete_expected = 0


def _quiet_incomplete_once() -> None:
    """The proxy already logged why this response is cut off; uvicorn's own line would repeat it."""
    global _incomplete_expected
    _incomplete_expected += 1


class _IncompleteFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        global _incomplete_expected
        if _incomplete_expected > 0 and record.getMessage() == _INCOMPLETE:
            _incomplete_expected -= 1
            return False
        return True


logging.getLogger("uvicorn.error").addFilter(_IncompleteFilter())


def _url_too_long(request: Request) -> bool:
    return len(request.url.path) + len(request.url.query) > MAX_URL_CHARS


def _too_deep(value, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` containers deep (walked without recursion,
    a level at a time: the containers of each level collected by one comprehension per container,
    with no depth carried per value)."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        inner = []
        for v in level:
            inner += [x for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, (dict, list))]
        level = inner
        depth += 1
    return False


# The first parts of OpenAI endpoint paths the Anthropic API has no namesake of (its own are
# under v1/: messages, models, files, ...), after an optional v1/.
_OPENAI_ONLY = frozenset({"chat", "responses", "completions", "embeddings", "moderations", "audio", "images"})


def _openai_endpoint(rest: str) -> bool:
    parts = [p for p in rest.split("/") if p]
    if parts and parts[0] == "v1":
        parts = parts[1:]
    return bool(parts) and parts[0] in _OPENAI_ONLY


def _json_reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        # The decoder's message for some errors ends in a dangling "at" ("Invalid control character at").
        return f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    # Python refuses to read an integer of more than sys.get_int_max_str_digits() digits.
    return f"a number in it has more than {sys.get_int_max_str_digits():,} digits"


def _parse(raw: bytes, depth_limit: int = MAX_JSON_DEPTH) -> tuple[object, bool, bool | None]:
    """The request body; whether every number in it can be written back as JSON (not so for
    ``NaN`` and ``Infinity``, which Python's reader accepts, or a literal past the float range such
    as ``1e400``, which reads as an infinity); and whether it nests more than ``depth_limit``
    containers deep (None: not checked yet, see :func:`_too_deep`).

    orjson reads a body in about a third of the standard library's time (a 150 KB agent request:
    0.39 -> 0.13 ms, on the preparation slot every large request queues for), and gives the same
    value for everything it accepts but one: an integer outside [-2**63, 2**64), which it reads as
    a float.  What it refuses (``NaN``, ``Infinity``, ``1e400``, a lone surrogate escape, a
    byte-order mark, UTF-16, anything malformed or nested past its limit) and a body holding a
    float of magnitude 2**63 or more (where such an integer would have become one) are read by the
    standard library, exactly as before, with its errors.  The depth is checked by the same walk
    that looks for those floats."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _parse_std(raw) + (None,)
    deep, huge = _depth_and_huge_floats(body, depth_limit)
    if huge:
        return _parse_std(raw) + (None,)
    return body, True, deep


HUGE_FLOAT = float(2 ** 63)


def _depth_and_huge_floats(value, limit: int) -> tuple[bool, bool]:
    """(whether ``value`` nests more than ``limit`` containers deep, whether it holds a float of
    magnitude 2**63 or more), walked as :func:`_too_deep` walks, a level at a time; once too deep,
    the floats of the levels below are not looked at (the body is refused either way)."""
    if isinstance(value, float):
        return False, not -HUGE_FLOAT < value < HUGE_FLOAT
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth > limit:
            return True, False
        inner = []
        for v in level:
            inner += [x for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, (dict, list, float))]
        level = []
        for x in inner:
            if isinstance(x, float):
                if not -HUGE_FLOAT < x < HUGE_FLOAT:
                    return False, True
            else:
                level.append(x)
        depth += 1
    return False, False


def _parse_std(raw: bytes) -> tuple[object, bool]:
    """The body and whether its numbers can be written back as JSON (see :func:`_parse`), read by
    the standard library: the hooks run only on such literals and on floats, a handful in a
    request."""
    odd: list[str] = []

    def constant(name: str) -> float:
        odd.append(name)
        return float(name)   # "NaN", "Infinity", "-Infinity": what the reader gives by default

    def decimal(text: str) -> float:
        value = float(text)
        if value - value != 0:   # an infinity (or NaN)
            odd.append(text)
        return value

    return json.loads(raw, parse_constant=constant, parse_float=decimal), not odd


def _request_json(body: dict, plain_numbers: bool = True) -> bytes | None:
    """A changed request as the UTF-8 JSON the provider reads, or None where it cannot be written as
    it was read: a number such as 1e400 became an infinity, which JSON cannot spell.  orjson
    writes it in about a tenth of the standard library's time (a 390 KB agent request: 1.84 ms
    -> 0.14 ms, under the interpreter lock that every request in preparation shares); what it
    refuses -- a lone surrogate (valid JSON as an escape: a cut emoji, binary tool output), an
    integer past 64 bits -- goes through the standard library, the surrogate out as the same
    escape it came in as.  orjson would write an infinity as null, so a body holding one
    (``plain_numbers`` False) never reaches it."""
    if plain_numbers:
        try:
            return orjson.dumps(body)
        except TypeError:   # orjson.JSONEncodeError is one
            pass
    try:
        text = json.dumps(body, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return None
    return text.encode("utf-8", "backslashreplace")
