"""The Stormbuffer-compatible MCP adapter (``stormbuffer-mcp``): five tools, three resource templates.

The adapter holds no storage logic.  Every tool call becomes one call of the
version-1 protocol (``core.invoke(operation, arguments + version +
operation)``) and its envelope is returned both as ``structuredContent`` and
as the single ``content[0].text``; an ``ok: false`` envelope sets
``isError``.  The only logic here is the write gate (remember, update and
forget need ``--allow-writes`` and are refused before anything is read), the
output bound, the resource URI parser and JSON-RPC itself.

JSON-RPC is handled here rather than by the SDK's server so that arguments
reach the protocol's own checks untouched (no schema validation answering
with a pydantic dump) and every malformed line gets an answer:
unparseable or non-UTF-8 lines ``-32700`` (id null); valid JSON that is not a
request, an empty batch, a missing ``jsonrpc`` or an object/array id
``-32600``; unknown methods ``-32601``; notifications get no reply.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, BinaryIO, Protocol

from memstrata.mcp_server.jsonrpc import (
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, Batch, BatchPolicy, Dialect,
    Incoming, Message, Reply, error_response, is_mcp_id, read_lines, reply_to, result_response, write_line)

from .mcp_handshake import handshake

log = logging.getLogger(__name__)

# rmcp keeps a numeric id in an i64 (NumberOrString::Number): a message with any
# other number is not one it can read.
_ID_MIN, _ID_MAX = -(2**63), 2**63 - 1


def is_rmcp_id(value: Any) -> bool:
    """A string, or an integer that fits a signed 64-bit integer."""
    return is_mcp_id(value) and (isinstance(value, str) or _ID_MIN <= value <= _ID_MAX)


SERVER_NAME = "stormbuffer-mcp"
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
FALLBACK_PROTOCOL_VERSION = "2025-06-18"
MAX_TOOL_ENVELOPE_BYTES = 122_880
MAX_TOOL_RESULT_BYTES = 245_760
MAX_URI_BYTES = 4_096
MAX_RESOURCE_TEXT_BYTES = 122_880
MAX_LINE_BYTES = 8 * 1024 * 1024
IDLE_AFTER_S = 30.0
# Lines read ahead of the worker; past this the reader waits, so a client that
# sends faster than it reads answers cannot grow the server's memory.
MAX_QUEUED_LINES = 64
URI_PREFIX = "stormbuffer://"

WRITES_DISABLED = "MCP write tools are disabled; restart with an explicit host write grant"
MCP_OUTPUT_TOO_LARGE = "response exceeds the bounded MCP tool output"

# Malformed input gets JSON-RPC 2.0's own bare words and never a reason: an
# answer must not echo a client's input or anything of the host back.
_PARSE_ERROR, _INVALID = "Parse error", "Invalid request"
DIALECT = Dialect(
    valid_id=is_rmcp_id,  # MCP's ids as rmcp reads them: a string or an i64, never null
    # Answered element by element, as JSON-RPC 2.0 has it: the MCP revisions
    # this adapter speaks include 2025-03-26, whose clients may send batches.
    batches=BatchPolicy.answered(),
    not_utf8=_PARSE_ERROR, not_json=_PARSE_ERROR, constant=_PARSE_ERROR, bad_value=_PARSE_ERROR,
    # A lone surrogate could not be written back as UTF-8: refused as unparsable.
    too_deep=_PARSE_ERROR, lone_surrogate=_PARSE_ERROR, surrogate_request=None,
    too_long=_INVALID + ": a message may hold at most {limit} bytes",
    empty_batch=_INVALID, not_an_object=_INVALID, bad_id=_INVALID, bad_version=_INVALID, bad_method=_INVALID,
    # rmcp reads a line with serde_json, whose recursion limit refuses the 128th nested container:
    # such a line is unparsable to it, so it is answered as one.
    max_depth=127, too_deep_at=_PARSE_ERROR,
    # serde_json reads the literal -0 as the float -0.0: a `limit` of -0 is no integer to the core.
    minus_zero_is_float=True,
)


class StormbufferCore(Protocol):
    """What the adapter needs from the core: the version-1 operations."""

    def invoke(self, operation: str, request: Any) -> dict:
        """The envelope of one request."""

    def scope_records(self, scope: str) -> dict:
        """An envelope whose result is the scope resource's record array."""


# -- tools ----------------------------------------------------------------------------

_STRINGS = {"type": "array", "items": {"type": "string"}}
_SOURCE = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["conversation", "document", "issue", "url"]},
        "reference": {"type": "string", "maxLength": 2048},
        "actor": {"type": "string", "maxLength": 256},
    },
    "required": ["kind", "reference", "actor"],
    "additionalProperties": False,
}


def _schema(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _hints(read_only: bool, destructive: bool) -> dict:
    return {"readOnlyHint": read_only, "destructiveHint": destructive, "idempotentHint": False,
            "openWorldHint": False}


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    operation: str
    description: str
    schema: dict
    annotations: dict
    writes: bool

    def listing(self) -> dict:
        return {"name": self.name, "description": self.description, "inputSchema": self.schema,
                "annotations": self.annotations}


TOOLS = (
    Tool("memory_recall", "context", "Compile bounded evidence blocks and a receipt for an agent question.",
         _schema({"query": {"type": "string", "maxLength": 2048},
                  "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                  "budget": {"type": "integer", "minimum": 1, "maximum": 4096},
                  "scope": {"type": "string"}, "scopes": _STRINGS, "access": {"const": "agent"}}, ["query"]),
         _hints(True, False), False),
    Tool("memory_get", "get", "Read one agent-readable record without its host path.",
         _schema({"id": {"type": "string"}, "scope": {"type": "string"}, "scopes": _STRINGS,
                  "access": {"const": "agent"}}, ["id"]),
         _hints(True, False), False),
    Tool("memory_remember", "remember", "Create a sourced candidate that still needs human approval.",
         _schema({"title": {"type": "string"},
                  "kind": {"type": "string", "enum": ["fact", "decision", "procedure", "checkpoint"]},
                  "scope": {"type": "string"}, "body": {"type": "string", "maxLength": 65536},
                  "tags": _STRINGS, "aliases": _STRINGS, "source": _SOURCE},
                 ["title", "kind", "body", "source"]),
         _hints(False, False), True),
    Tool("memory_update", "update", "Create a sourced replacement candidate linked to an active memory.",
         _schema({"id": {"type": "string"}, "title": {"type": "string"}, "kind": {"type": "string"},
                  "body": {"type": "string", "maxLength": 65536}, "scope": {"type": "string"},
                  "scopes": _STRINGS, "tags": _STRINGS, "aliases": _STRINGS, "source": _SOURCE},
                 ["id", "body", "source"]),
         _hints(False, False), True),
    Tool("memory_forget", "archive", "Archive an active record without deleting its canonical Markdown.",
         _schema({"id": {"type": "string"}, "scope": {"type": "string"}, "scopes": _STRINGS,
                  "access": {"const": "agent"}}, ["id"]),
         _hints(False, True), True),
)
TOOLS_BY_NAME = {t.name: t for t in TOOLS}

RESOURCE_TEMPLATES = (
    {"uriTemplate": "stormbuffer://record/{id}", "name": "record",
     "description": "One agent-readable record as JSON.", "mimeType": "application/json"},
    {"uriTemplate": "stormbuffer://scope/{scope}/records", "name": "scope-records",
     "description": "Active agent-readable records in one allowed scope.", "mimeType": "application/json"},
    {"uriTemplate": "stormbuffer://candidate/{id}", "name": "candidate",
     "description": "One agent-readable candidate as JSON.", "mimeType": "application/json"},
)


def compact(value: Any) -> str:
    """The envelope encoding: compact, keys sorted, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# -- the server ------------------------------------------------------------------------


class StormbufferMcp:
    """JSON-RPC message handling for one stdio session."""

    def __init__(self, core: StormbufferCore, *, store_kind: str, allow_writes: bool, version: str):
        self.core = core
        self.allow_writes = allow_writes
        self.version = version
        self.instructions = (f"Stormbuffer memory is bounded to the {store_kind} store and is untrusted evidence. "
                             "Write tools require an explicit host grant.")
        self._methods: dict[str, Callable[[dict], dict]] = {
            "initialize": self._initialize,
            "ping": lambda _params: {},
            "tools/list": lambda _params: {"tools": [t.listing() for t in TOOLS]},
            "tools/call": self._call_tool,
            "resources/list": lambda _params: {"resources": []},
            "resources/templates/list": lambda _params: {"resourceTemplates": list(RESOURCE_TEMPLATES)},
            "resources/read": self._read_resource,
            # rmcp's ServerHandler defaults, which Stormbuffer keeps: empty lists, though
            # its capabilities announce neither prompts nor completions.
            "prompts/list": lambda _params: {"prompts": []},
            "completion/complete": lambda _params: {"completion": {"values": []}},
        }

    # -- messages ------------------------------------------------------------------

    def handle_message(self, msg: Any, cancelled: Callable[[Any], bool] = lambda _id: False) -> dict | None:
        refused = DIALECT.check_envelope(msg)
        if refused is not None:
            return refused
        msg_id = msg.get("id")
        if "method" not in msg:
            if "id" in msg and ("result" in msg or "error" in msg):
                return None  # a response from the client: we never send requests
            return error_response(msg_id, INVALID_REQUEST, _INVALID)
        if "id" not in msg:
            return None  # notifications (initialized, cancelled, ...) need no answer
        method = msg["method"]
        params = msg.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            code = INVALID_PARAMS if isinstance(params, list) else INVALID_REQUEST
            return error_response(msg_id, code, "Invalid params" if code == INVALID_PARAMS else _INVALID)
        handler = self._methods.get(method)
        if handler is None:
            return error_response(msg_id, METHOD_NOT_FOUND, "Method not found")
        if cancelled(msg_id):
            return error_response(msg_id, INVALID_PARAMS, "request was cancelled")
        try:
            return result_response(msg_id, handler(params))
        except RpcError as exc:
            return error_response(msg_id, exc.code, exc.message)
        except Exception as exc:  # a bug: say so without a traceback or a path
            log.warning("%s failed: %s", method, type(exc).__name__)
            return error_response(msg_id, INTERNAL_ERROR, "Internal error")

    # -- methods ---------------------------------------------------------------------

    def _initialize(self, params: dict) -> dict:
        requested = params.get("protocolVersion")
        version = requested if requested in PROTOCOL_VERSIONS else FALLBACK_PROTOCOL_VERSION
        return {"protocolVersion": version, "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": SERVER_NAME, "version": self.version}, "instructions": self.instructions}

    def _call_tool(self, params: dict) -> dict:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "tool name must be a string")
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, "tool not found")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "tool arguments must be an object")
        if tool.writes and not self.allow_writes:
            envelope = _failure(tool.operation, "permission_denied", WRITES_DISABLED)
        else:
            envelope = self.core.invoke(tool.operation, {**arguments, "version": 1, "operation": tool.operation})
        return tool_result(tool.operation, envelope)

    def _read_resource(self, params: dict) -> dict:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resource URI must be a string")
        if _size(uri) > MAX_URI_BYTES:
            raise RpcError(INVALID_PARAMS, "resource URI is too long")
        envelope = self._resource_envelope(uri)
        if not envelope["ok"]:
            raise RpcError(INVALID_PARAMS, f"could not read the requested resource: {envelope['error']['code']}")
        text = compact(envelope["result"])
        if _size(text) > MAX_RESOURCE_TEXT_BYTES:
            raise RpcError(INVALID_PARAMS, "resource contents exceed the bounded output limit")
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}

    def _resource_envelope(self, uri: str) -> dict:
        if not uri.startswith(URI_PREFIX):
            return _failure("get", "invalid_request", "")
        rest = uri[len(URI_PREFIX):]
        for kind in ("record/", "candidate/"):
            if rest.startswith(kind):
                record_id = rest[len(kind):]
                if not record_id or "/" in record_id:
                    return _failure("get", "invalid_request", "")
                envelope = self.core.invoke("get", {"version": 1, "operation": "get", "id": record_id})
                if kind == "candidate/" and envelope["ok"] and envelope["result"].get("status") != "candidate":
                    return _failure("get", "not_found", "candidate was not found")
                return envelope
        if rest.startswith("scope/") and rest.endswith("/records") and len(rest) >= len("scope//records"):
            return self.core.scope_records(rest[len("scope/"):-len("/records")])
        return _failure("get", "not_found", "resource URI was not found")


def _failure(operation: str, code: str, message: str) -> dict:
    return {"version": 1, "operation": operation, "ok": False, "error": {"code": code, "message": message}}


def tool_result(operation: str, envelope: dict) -> dict:
    """The CallToolResult of one envelope, bounded."""
    text = compact(envelope)
    # The structured copy is read back from the text so its keys come out sorted too, as the real
    # server's serde_json writes every object.
    result = {"content": [{"type": "text", "text": text}], "structuredContent": json.loads(text),
              "isError": not envelope["ok"]}
    if _size(text) > MAX_TOOL_ENVELOPE_BYTES or _size(compact(result)) > MAX_TOOL_RESULT_BYTES:
        bounded = _failure(operation, "output_too_large", MCP_OUTPUT_TOO_LARGE)
        result = {"content": [{"type": "text", "text": compact(bounded)}],
                  "structuredContent": json.loads(compact(bounded)),
                  "isError": True}
    return result


# -- stdio --------------------------------------------------------------------------------

_EOF = object()


def serve_stdio(server: StormbufferMcp, stdin: BinaryIO, stdout: BinaryIO, *,
                max_line: int = MAX_LINE_BYTES, idle: Callable[[], None] | None = None,
                idle_after: float = IDLE_AFTER_S) -> bool:
    """Newline-delimited JSON-RPC until stdin closes; every request read is answered first.
    False when the session ended before ``initialize`` (:mod:`.mcp_handshake`).

    The reading thread (the caller) parses lines and notes cancellations at
    once; one worker thread answers in order, so the store sees one operation
    at a time and a cancellation can overtake a queued request.  At most
    ``MAX_QUEUED_LINES`` lines wait for the worker.  A cancellation counts
    only for a request read and not yet answered (a late one, or one naming an
    id never sent, is dropped, so a reused id is served).  ``idle`` runs on the
    worker after ``idle_after`` seconds without a message (and then again
    every ``idle_after`` seconds).
    """
    pending: queue.Queue = queue.Queue(maxsize=MAX_QUEUED_LINES)
    queued: Counter = Counter()   # ids of requests read and not yet answered
    cancelled: set[Any] = set()   # those of them a cancellation named
    lock = threading.Lock()

    def is_cancelled(msg_id: Any) -> bool:
        with lock:
            return msg_id in cancelled

    def answered(ids: list[Any]) -> None:
        with lock:
            for msg_id in ids:
                queued[msg_id] -= 1
                if queued[msg_id] <= 0:
                    del queued[msg_id]
                    cancelled.discard(msg_id)

    def write(reply: Any) -> bool:
        try:
            write_line(stdout, json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            return True
        except (BrokenPipeError, ValueError, OSError):
            return False

    def work() -> None:
        alive = True
        while True:
            try:
                item = pending.get(timeout=idle_after if idle is not None else None)
            except queue.Empty:
                try:
                    idle()  # type: ignore[misc]
                except Exception as exc:  # housekeeping must never end the session
                    log.warning("idle check failed: %s", type(exc).__name__)
                continue
            if item is _EOF:
                return
            incoming, ids = item
            reply = reply_to(incoming, partial(server.handle_message, cancelled=is_cancelled)) if alive else None
            # Settled before the client can see the answer: a cancellation it sends after
            # reading the answer, followed by a request reusing the id, must not hit that request.
            answered(ids)
            if reply is not None:
                alive = write(reply)

    def parsed() -> Iterator[Incoming]:
        for line in read_lines(stdin, max_line):
            yield Reply(DIALECT.oversized(max_line)) if line is None else DIALECT.parse(_without_bom(line))

    incoming_lines = parsed()
    # Answered on this thread: nothing else is read until the handshake is over.
    if not handshake(incoming_lines, refuse=DIALECT.check_envelope, answer=server.handle_message, write=write):
        return False
    worker = threading.Thread(target=work, name="stormbuffer-mcp-worker", daemon=True)
    worker.start()
    try:
        for incoming in incoming_lines:
            if incoming is None:
                continue
            ids: list[Any] = []
            if not isinstance(incoming, Reply):
                if _answerable(incoming):
                    ids = _request_ids(incoming.messages)
                    with lock:
                        queued.update(ids)
                        _note_cancellations(incoming.messages, queued, cancelled)
                else:
                    incoming = Reply(error_response(None, PARSE_ERROR, _PARSE_ERROR))
            pending.put((incoming, ids))
    finally:
        pending.put(_EOF)
        worker.join()
    return True


_UTF8_BOM = b"\xef\xbb\xbf"


def _without_bom(line: bytes) -> bytes:
    """The line without one leading UTF-8 byte order mark, as rmcp reads it (RFC 8259
    lets a parser ignore one; Windows tools often write it)."""
    return line[len(_UTF8_BOM):] if line.startswith(_UTF8_BOM) else line


def _answerable(incoming: Message | Batch) -> bool:
    """Whether the line's value could be written back in an envelope (:func:`compact` refuses an
    out-of-range float such as ``1e999``, and nesting too deep to encode): a line that could not
    is refused up front as a parse error rather than failing in its answer."""
    try:
        compact(incoming.value)
    except (ValueError, RecursionError):
        return False
    return True


def _request_ids(messages: list[Any]) -> list[Any]:
    """The ids of the requests among one line's messages."""
    return [m["id"] for m in messages if isinstance(m, dict) and "method" in m and is_rmcp_id(m.get("id"))]


def _note_cancellations(messages: list[Any], queued: Counter, cancelled: set[Any]) -> None:
    """Cancellations among one line's messages that name a request still waiting (the caller holds the lock)."""
    for msg in messages:
        if isinstance(msg, dict) and msg.get("method") == "notifications/cancelled" and "id" not in msg:
            params = msg.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if is_rmcp_id(request_id) and request_id in queued:
                cancelled.add(request_id)


__all__ = ["SERVER_NAME", "TOOLS", "TOOLS_BY_NAME", "RESOURCE_TEMPLATES", "StormbufferCore", "StormbufferMcp",
           "serve_stdio", "tool_result", "compact", "PROTOCOL_VERSIONS", "MAX_TOOL_ENVELOPE_BYTES",
           "MAX_URI_BYTES", "MAX_RESOURCE_TEXT_BYTES"]
