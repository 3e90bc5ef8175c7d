"""The Strata-compatible MCP server: newline-delimited JSON-RPC 2.0 over stdio.

This is a small loop of its own rather than the MCP SDK's server: the SDK
validates tool arguments against their schemas and reshapes results and
errors, while a Strata client expects the engine's own answers byte for
byte (its field-level wire errors, ``isError`` results without
``structuredContent``, the client's ``protocolVersion`` echoed back).  The
SDK's client is what the tests drive it with.

Every line gets exactly one answer unless it is a notification: bad UTF-8 or
JSON -> -32700; valid JSON that is not a request -> -32600; an unknown method
-> -32601; a tools/call without a name, with non-object arguments or for an
unknown tool -> -32602.  Requests are answered in order, and at end of input
every request already read has been answered.  Nothing but protocol goes to
stdout; logs go to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, BinaryIO

from memstrata import __version__

from memstrata.mcp_server.jsonrpc import (
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, BatchPolicy, Dialect, error_response,
    is_jsonrpc_id, read_lines, reply_to, result_response, write_line)
from .commands import dumps
from .engine import Engine
from .guide import guide_markdown
from .tools import TOOLS, Call, ToolInputError, UnknownTool, build_call

log = logging.getLogger("memstrata.strata.mcp")

SERVER_NAME = "strata"
DEFAULT_PROTOCOL = "2025-06-18"
# The longest line read as a message; a longer one is answered -32600 and skipped
# (a 32768-dimension vector or a large JSON document fits many times over).
MAX_LINE_BYTES = 16 * 1024 * 1024
INSTRUCTIONS = (
    "Strata is an embedded multi-model database (KV, JSON, vectors, events, graphs) with branches and "
    "time travel. When unsure, call the `strata_guide` tool first: it explains how this server targets "
    "a database, the JSON envelopes every tool returns, the error codes, and each command "
    "`strata_command` runs by raw wire JSON. Results and errors are the same envelopes and stable codes "
    "as Strata's CLI; byte fields (KV keys and values, KV list cursors) are base64. This server is "
    "MemStrata's Strata-compatible implementation."
)


# Strata's own words for malformed input, which its clients see byte for byte.
DIALECT = Dialect(
    valid_id=is_jsonrpc_id,  # plain JSON-RPC 2.0: a number or null is an id too
    # A Strata server is plain JSON-RPC 2.0, which answers a batch element by element in one array.
    batches=BatchPolicy.answered(),
    not_utf8="parse error: invalid UTF-8 at byte {byte}",
    not_json="parse error: {msg} at line {line} column {column}",
    constant="parse error: {name} is not valid JSON",
    bad_value="parse error: {reason}",
    too_deep="parse error: nesting too deep",
    # A \uD800-style escape without its pair is valid to Python, not to JSON, and no UTF-8
    # answer could carry it back: refused before it reaches the engine.
    lone_surrogate="parse error: lone surrogate in a string escape", surrogate_request=None,
    too_long="invalid request: a message may hold at most {limit} bytes",
    empty_batch="invalid request: empty batch",
    not_an_object="invalid request: expected a JSON-RPC request object",
    bad_id="invalid request: `id` must be a string, a number or null",
    bad_version='invalid request: `jsonrpc` must be "2.0"',
    bad_method="invalid request: `method` must be a string",
    # Strata's server reads lines with serde_json, which refuses a double past f64's range
    # (1e400) rather than take it as infinity, which no JSON answer could carry back.
    out_of_range="parse error: number out of range",
    # serde_json reads the literal -0 as the float -0.0: a document keeps it as -0.0, and a
    # field that takes an unsigned integer refuses it as a floating point.
    minus_zero_is_float=True,
    # serde_json's recursion limit on the whole line: the 128th nested container is refused.
    max_depth=127, too_deep_at="parse error: recursion limit exceeded at line {line} column {column}",
)


def tool_result(text: str, is_error: bool) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class StrataServer:
    """Answers JSON-RPC messages for one open database."""

    def __init__(self, engine: Engine):
        self.engine = engine

    # -- framing -----------------------------------------------------------------

    def handle_line(self, raw: bytes) -> str | None:
        """The answer line for one input line (None: nothing to answer)."""
        answer = reply_to(DIALECT.parse(raw), self.handle_message)
        return None if answer is None else dumps(answer)

    def handle_message(self, message: Any) -> dict | None:
        refused = DIALECT.check_envelope(message)
        if refused is not None:
            return refused
        id_ = message.get("id")
        if "method" not in message:  # this server never sends requests, so a response is no message for it
            return error_response(id_, INVALID_REQUEST, DIALECT.bad_method)
        if "id" not in message:
            return None  # a notification: never answered
        method = message["method"]
        params = message.get("params")
        try:
            return self.dispatch(id_, method, params)
        except Exception:  # noqa: BLE001 - one bad call must not end the session
            log.exception("internal error answering %s", method)
            return error_response(id_, INTERNAL_ERROR, "internal error; see the server log")

    # -- methods -----------------------------------------------------------------

    def dispatch(self, id_: Any, method: str, params: Any) -> dict:
        if method == "initialize":
            return result_response(id_, self.initialize_result(params))
        if method == "ping":
            return result_response(id_, {})
        if method == "tools/list":
            return result_response(id_, {"tools": TOOLS})
        if method == "tools/call":
            return self.tools_call(id_, params)
        return error_response(id_, METHOD_NOT_FOUND, f"method `{method}` is not supported")

    @staticmethod
    def initialize_result(params: Any) -> dict:
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        return {
            "protocolVersion": requested if isinstance(requested, str) else DEFAULT_PROTOCOL,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    def tools_call(self, id_: Any, params: Any) -> dict:
        params = params if isinstance(params, dict) else {}
        name = params.get("name")
        if not isinstance(name, str):
            return error_response(id_, INVALID_PARAMS, "tools/call requires a `name`")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            return error_response(id_, INVALID_PARAMS, "`arguments` must be an object")
        try:
            text, is_error = self.call_tool(name, arguments)
        except UnknownTool:
            return error_response(id_, INVALID_PARAMS, f"unknown tool `{name}`; list tools with tools/list")
        return result_response(id_, tool_result(text, is_error))

    def call_tool(self, name: str, arguments: dict) -> tuple[str, bool]:
        """The text and isError flag of one tool call (UnknownTool for a name not listed)."""
        try:
            call: Call = build_call(name, arguments)
        except ToolInputError as exc:
            return str(exc), True
        if call.guide:
            return guide_markdown(), False
        outcome = self.engine.run(call.command)
        if outcome.invalid is not None:
            return f"invalid arguments for `{name}`: {outcome.invalid}", True
        return outcome.text(), outcome.envelope is None


def serve(engine: Engine, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None, *,
          max_line: int = MAX_LINE_BYTES) -> int:
    """Answer lines from stdin until it closes; every line read is answered before returning."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    server = StrataServer(engine)
    for raw in read_lines(stdin, max_line):
        answer = dumps(DIALECT.oversized(max_line)) if raw is None else server.handle_line(raw)
        if answer is not None:
            try:
                write_line(stdout, answer.encode("utf-8"))
            except BrokenPipeError:
                log.info("client closed the connection")
                return 0
    return 0
