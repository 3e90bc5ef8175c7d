"""MCP over stdin/stdout for every server built on the SDK here.

The SDK's own stdio transport drops what it cannot parse without a word and,
when stdin ends, stops at once, losing the answers to requests it had
already read.  :func:`serve_stdio` sits in front of the SDK's session loop
instead and keeps to JSON-RPC 2.0:

- a line that is not UTF-8 or not JSON gets ``-32700`` (id null);
- a message that is not a JSON-RPC 2.0 request, notification or response
  (no ``"jsonrpc": "2.0"``, an id that is not a string or an integer, a
  method that is not a string, params that are not an object, an empty
  batch) gets ``-32600`` with its id when it has a usable one, else null;
- a batch is answered, element by element, with ``-32600`` (MCP carries one
  message per line; the SDK's HTTP transport refuses batches the same way);
- a line over :data:`MAX_MESSAGE_BYTES` gets ``-32600`` and is skipped;
- blank lines are not messages and are ignored;
- at end of input, every request already read is answered (bounded by
  ``drain_timeout``) before the session closes;
- at most :data:`MAX_IN_FLIGHT` requests are read ahead of their answers.

Everything valid goes to the SDK unchanged, so the protocol itself (versions,
``initialize``, tools, ``-32601`` for unknown methods) stays the SDK's.  The
line framing is :mod:`.jsonrpc`'s, in this front's words (:data:`DIALECT`).

While serving, file descriptor 0 reads from ``/dev/null`` and 1 writes to
stderr; the protocol uses private duplicates.  A library that prints, or a
child process that inherits the descriptors, can then never corrupt the wire
or swallow input.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import IO, Any

import anyio
import mcp.types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage

from .jsonrpc import (
    INVALID_PARAMS, INVALID_REQUEST, BatchPolicy, Dialect, Message, Oversized, Reply, error_response, is_mcp_id,
    read_lines, write_line)

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE  # the same cap as one HTTP request body
DEFAULT_DRAIN_TIMEOUT = 60.0  # longer than a context_query may wait for the index
# Requests handed to the SDK and not answered yet.  The SDK runs each one in a task
# of its own, so without a cap a client that sends faster than it reads answers
# would grow the server's tasks and memory without bound; at the cap the front
# stops reading until an answer goes out.  (These servers never send requests to
# the client, so no answer the SDK waits for can be stuck behind the cap.)
MAX_IN_FLIGHT = 64
_EOF = object()


# The front's words for what it answers itself; the SDK never sees those lines.
DIALECT = Dialect(
    valid_id=is_mcp_id,  # MCP's ids: a string or an integer, never null
    # MCP carries one message per line, and the SDK's HTTP transport refuses
    # batches the same way: each element owed an answer gets this -32600.
    batches=BatchPolicy.refused("Invalid Request: batches are not supported; send one message per line"),
    not_utf8="Parse error: the message is not valid UTF-8 (byte {byte})",
    not_json="Parse error: {msg} (line {line}, column {column})",
    constant="Parse error: {name} is not JSON",
    bad_value="Parse error: {reason}",
    too_deep="Parse error: the JSON is nested too deeply",
    # A lone surrogate (a \ud800 escape without its pair) is valid to Python but
    # cannot be written back as UTF-8: answered here, it never reaches the SDK,
    # whose encoder would fail.
    lone_surrogate="Parse error: lone surrogate in a string escape",
    surrogate_request="Invalid Request: a string holds a lone surrogate (a \\ud800-\\udfff escape without its pair)",
    too_long="Invalid Request: the message is larger than {mib} MiB",
    empty_batch="Invalid Request: empty batch",
    not_an_object="Invalid Request: a JSON-RPC message is a JSON object",
    bad_id="Invalid Request: id must be a string or an integer",
    bad_version='Invalid Request: "jsonrpc" must be "2.0"',
    bad_method="Invalid Request: method must be a string",
    skip_bom=True,
)


def _refusal(id_: Any, code: int, message: str) -> Reply:
    return Reply(error_response(id_, code, message))


def check_message(obj: Any) -> SessionMessage | Reply | None:
    """One decoded JSON value -> the message for the SDK, or the answer it gets here instead
    (None: a notification that cannot be read, which JSON-RPC leaves unanswered).

    Past the envelope, params and responses are checked here too, since the
    SDK would drop what it cannot validate without a word.
    """
    refused = DIALECT.check_envelope(obj)
    if refused is not None:
        return Reply(refused)
    reply_id = obj.get("id")
    if "method" in obj and "id" not in obj:
        # A notification is never answered (JSON-RPC 2.0, section 4.1), not even to say it is wrong.
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            log.debug("notification %r with params that are not an object: dropped", obj["method"])
            return None
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_python(obj, by_name=False))
        except ValueError:
            log.debug("notification %r that is not valid JSON-RPC: dropped", obj["method"])
            return None
    if "method" in obj:
        params = obj.get("params")
        if isinstance(params, list):
            return _refusal(reply_id, INVALID_PARAMS, "Invalid params: params must be an object")
        if params is not None and not isinstance(params, dict):
            return _refusal(reply_id, INVALID_REQUEST, "Invalid Request: params must be an object")
        if obj["method"] == "initialize" and (problem := _initialize_problem(params)) is not None:
            return _refusal(reply_id, INVALID_PARAMS, f"Invalid params: {problem}")
        if obj["method"] == "tools/call" and isinstance(params, dict):
            # The SDK's own answer to these is "Invalid request parameters", which names neither.
            if not isinstance(params.get("name"), str):
                return _refusal(reply_id, INVALID_PARAMS, "Invalid params: tools/call needs the tool's name, a string")
            if params.get("arguments") is not None and not isinstance(params["arguments"], dict):
                return _refusal(reply_id, INVALID_PARAMS,
                                "Invalid params: tools/call arguments must be an object of argument names to values")
    elif "id" not in obj or ("result" in obj) == ("error" in obj):
        return _refusal(reply_id, INVALID_REQUEST,
                        "Invalid Request: a message needs a method, or an id with a result or an error")
    try:
        message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except ValueError:  # pydantic's ValidationError; its text is not for the wire
        return _refusal(reply_id, INVALID_REQUEST, "Invalid Request: not a valid JSON-RPC 2.0 message")
    return SessionMessage(message)


def _initialize_problem(params: dict | None) -> str | None:
    """What is wrong with ``initialize``'s params, said for the client (the SDK's own answer,
    "Invalid request parameters", names nothing)."""
    params = params or {}
    if not isinstance(params.get("protocolVersion"), str):
        return 'initialize needs protocolVersion, a string such as "2025-06-18"'
    if not isinstance(params.get("capabilities"), dict):
        return "initialize needs capabilities, an object (it may be empty)"
    info = params.get("clientInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        return "initialize needs clientInfo, an object with name and version strings"
    return None


# The modern protocol (2026-07-28) has no initialize: each request names its version here.
_MODERN_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_BEFORE_INITIALIZE = frozenset({"initialize", "ping", "server/discover"})


def needs_initialize(message: types.JSONRPCRequest) -> bool:
    """Whether a request sent before any ``initialize`` cannot be served: it is no handshake
    and does not carry the modern protocol's per-request version either."""
    if message.method in _BEFORE_INITIALIZE:
        return False
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    return not (isinstance(meta, dict) and _MODERN_VERSION_KEY in meta)


NOT_INITIALIZED = ("Invalid Request: the session is not initialized; send initialize first (or, at protocol "
                   f'2026-07-28, name the version in every request\'s params._meta["{_MODERN_VERSION_KEY}"])')


def classify(line: bytes) -> SessionMessage | Reply | None:
    """A line of input -> the message for the SDK, or the answer it gets here (None: nothing, a blank line)."""
    incoming = DIALECT.parse(line)
    if not isinstance(incoming, Message):
        return incoming  # never a Batch: DIALECT refuses batches
    return check_message(incoming.value)


@contextlib.contextmanager
def _claim_std_streams() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """Private binary handles on the wire; fd 0 reads /dev/null and fd 1 goes to stderr meanwhile."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
    finally:
        os.close(devnull)
    stdin = os.fdopen(wire_in, "rb", closefd=False)  # buffered: readline() must not read byte by byte
    stdout = os.fdopen(wire_out, "wb", buffering=0, closefd=False)
    try:
        yield stdin, stdout
    finally:
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        # A reader thread may still block in read() on wire_in after a signal;
        # leave the duplicates to the process exit rather than close them
        # under it (a closed descriptor number could be reused meanwhile).


class StdioFront:
    """One stdio session: the reader, the SDK's session loop and one writer."""

    def __init__(self, server: MCPServer, stdin: IO[bytes], stdout: IO[bytes], *,
                 drain_timeout: float = DEFAULT_DRAIN_TIMEOUT, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 max_in_flight: int = MAX_IN_FLIGHT):
        self.server = server
        self.stdin = stdin
        self.stdout = stdout
        self.drain_timeout = drain_timeout
        self.max_message_bytes = max_message_bytes
        self._pending: Counter[str | int] = Counter()  # request ids the SDK has not answered yet
        self._in_flight = 0                              # their total
        self.max_in_flight = max_in_flight
        self._room: anyio.Event | None = None            # set when an answer frees a place
        self._drained: anyio.Event | None = None
        self._write_lock = anyio.Lock()
        self._broken = False
        # Own worker threads for the blocking pipe reads and writes, so that a
        # burst of tool calls on the SDK's shared thread pool can never starve
        # the wire.
        self._read_thread = anyio.CapacityLimiter(1)
        self._write_thread = anyio.CapacityLimiter(1)
        self._greeted = False  # an initialize (or a modern request naming its version) was passed on

    async def run(self) -> None:
        lowlevel = getattr(self.server, "_lowlevel_server", None)
        if lowlevel is None:
            raise RuntimeError("this version of the mcp SDK is not supported (MCPServer has no session loop)")
        to_sdk, sdk_in = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        sdk_out, from_sdk = anyio.create_memory_object_stream[SessionMessage](16)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lowlevel.run, sdk_in, sdk_out, lowlevel.create_initialization_options())
            tg.start_soon(self._relay_replies, from_sdk)
            async with to_sdk:
                await self._read_requests(to_sdk)
                await self._drain()
            # Closing to_sdk ends the SDK's loop, which closes sdk_out and so the relay.

    # -- input -------------------------------------------------------------------

    async def _read_requests(self, to_sdk: anyio.abc.ObjectSendStream) -> None:
        lines = read_lines(self.stdin, self.max_message_bytes, prefixes=True)
        while not self._broken:
            # Only the read runs on the thread: parsing stays on this one, so its
            # nesting bound (RecursionError) is the same wherever the front runs.
            line = await anyio.to_thread.run_sync(next, lines, _EOF, abandon_on_cancel=True,
                                                  limiter=self._read_thread)
            if line is _EOF:
                return
            outcome = Reply(DIALECT.oversized(self.max_message_bytes, line)) if isinstance(line, Oversized) \
                else classify(line)
            if outcome is None:
                continue
            if isinstance(outcome, Reply):
                await self._refuse(outcome.payload)
                continue
            message = outcome.message
            if isinstance(message, types.JSONRPCRequest) and not self._greeted:
                if needs_initialize(message):
                    await self._refuse(error_response(message.id, INVALID_REQUEST, NOT_INITIALIZED))
                    continue
                self._greeted = message.method != "ping"
            if isinstance(message, types.JSONRPCRequest):
                while self._in_flight >= self.max_in_flight and not self._broken:
                    self._room = anyio.Event()
                    await self._room.wait()
                self._pending[message.id] += 1
                self._in_flight += 1
            elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                # A cancelled request is never answered (MCP): stop waiting for it.
                request_id = (message.params or {}).get("requestId")
                if is_mcp_id(request_id):
                    self._answered(request_id)
            await to_sdk.send(outcome)

    async def _drain(self) -> None:
        """After end of input: wait (bounded) until every request read has been answered."""
        if not self._pending or self._broken:
            return
        self._drained = anyio.Event()
        with anyio.move_on_after(self.drain_timeout) as scope:
            await self._drained.wait()
        if scope.cancelled_caught:
            log.warning("stdin closed; %d request(s) still unanswered after %.0fs are dropped",
                        sum(self._pending.values()), self.drain_timeout)

    # -- output ------------------------------------------------------------------

    async def _relay_replies(self, from_sdk: anyio.abc.ObjectReceiveStream) -> None:
        async with from_sdk:
            async for session_message in from_sdk:
                message = session_message.message
                await self._write_line(message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8"))
                if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)) and message.id is not None:
                    self._answered(message.id)

    def _answered(self, request_id: str | int) -> None:
        count = self._pending.get(request_id, 0)
        if count > 1:
            self._pending[request_id] -= 1
        elif count == 1:
            del self._pending[request_id]
        if count:
            self._in_flight -= 1
            if self._room is not None:
                self._room.set()
        if not self._pending and self._drained is not None:
            self._drained.set()

    async def _refuse(self, payload: dict | list) -> None:
        if isinstance(payload, list):
            for refusal in payload:
                log.info("refused a JSON-RPC batch element: %s", refusal["error"]["message"])
        else:
            log.info("refused a JSON-RPC message: %s", payload["error"]["message"])
        await self._write(payload)

    async def _write(self, payload: Any) -> None:
        await self._write_line(json.dumps(payload, separators=(",", ":")).encode("utf-8"))

    async def _write_line(self, data: bytes) -> None:
        if self._broken:
            return  # the client is gone; keep consuming so the SDK never blocks
        async with self._write_lock:
            try:
                await anyio.to_thread.run_sync(write_line, self.stdout, data, abandon_on_cancel=True,
                                               limiter=self._write_thread)
            except OSError as exc:  # EPIPE: the client closed its end
                log.info("stdout closed (%s); ending the session", exc.strerror or exc)
                self._broken = True
                if self._drained is not None:
                    self._drained.set()
                if self._room is not None:
                    self._room.set()


async def serve_stdio(server: MCPServer, *, drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
                      stops: "StopSignals | None" = None) -> None:
    """Serve ``server`` on this process's stdin/stdout until the input ends
    and every request read has been answered (see the module docstring).
    With ``stops``, SIGINT and SIGTERM end the session too: the event loop
    receives them and cancels the session, and ``stops`` says which came."""
    with _claim_std_streams() as (stdin, stdout):
        front = StdioFront(server, stdin, stdout, drain_timeout=drain_timeout)
        if stops is None:
            await front.run()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(stops.watch, tg.cancel_scope)
            await front.run()
            tg.cancel_scope.cancel()  # the input ended and was answered: stop watching


class StopSignals:
    """SIGTERM (how clients stop a server they launched) and SIGINT (Ctrl-C) stop a stdio server;
    which of the two came is remembered.  While the session runs, the event loop receives them
    (:meth:`watch`): a signal turned into an exception could land in any task, and the session's
    task group then ended in an exception group asyncio reported with a traceback, or waited on
    a task stuck in its shutdown.  Before and after, SIGTERM unwinds like Ctrl-C, so that what
    the caller opened is closed on the way out."""

    def __init__(self):
        self.terminated = False
        self.signalled = False

    def install(self) -> "StopSignals":
        signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum, frame):
        self.terminated = True
        raise KeyboardInterrupt

    async def watch(self, scope: anyio.CancelScope) -> None:
        """Cancel ``scope`` at the first SIGINT or SIGTERM."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
            async for signum in received:
                self.signalled = True
                self.terminated = signum == signal.SIGTERM
                scope.cancel()
                return


def run_stdio_server(server: MCPServer, cleanup: Callable[[], object], stops: StopSignals | None = None,
                     interrupted: str = "interrupted",
                     report: Callable[[BaseException], int | None] | None = None) -> int:
    """Serve ``server`` over stdio in this process until stdin ends (0) or SIGTERM (0) or SIGINT
    (130, printing ``interrupted``), then ``cleanup()``.  A failure is put in words by ``report``
    (which prints one line and gives the exit code), else logged in one line with exit code 1.

    Unless stdin ended, the thread reading it is still blocked in a read only the client can end
    (the pipe stays open until it closes it), and the interpreter would wait for that thread at
    exit: once ``cleanup`` has run (a second signal meanwhile is ignored), the process leaves at
    once instead, also when serving failed."""
    stops = stops or StopSignals().install()
    ended = False
    code = 1
    try:
        try:
            anyio.run(functools.partial(serve_stdio, server, stops=stops))
        except KeyboardInterrupt:  # a signal before the session's loop received it, or after
            stops.signalled = True
        ended = not stops.signalled
        code = 130 if stops.signalled and not stops.terminated else 0
        if code == 130:
            print(interrupted, file=sys.stderr)
    except Exception as exc:
        said = report(exc) if report is not None else None
        if said is None:
            log.error("the stdio session failed: %s: %s", type(exc).__name__, exc)
        code = 1 if said is None else said
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        try:
            cleanup()
        finally:
            if not ended:
                logging.shutdown()
                sys.stderr.flush()
                os._exit(code)
    return 0


__all__ = ["serve_stdio", "run_stdio_server", "StopSignals", "StdioFront", "classify", "DIALECT", "MAX_MESSAGE_BYTES", "DEFAULT_DRAIN_TIMEOUT"]
