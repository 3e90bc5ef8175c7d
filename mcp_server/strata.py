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

import json
import logging
import sys
from typing import Any, BinaryIO

from memstrata import __version__

from .lines import read_lines
from .strata_engine import Engine, dumps
from .strata_guide import guide_markdown
from .strata_tools import TOOLS, Call, ToolInputError, UnknownTool, build_call

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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_line(raw: bytes) -> Any:
    """The JSON value of one line; ValueError (with a short reason) when it is not JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("nesting too deep") from None
    if "\\u" in text:
        # A \uD800-style escape without its pair is valid to Python, not to JSON.
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("lone surrogate in a string escape") from None
        except RecursionError:
            raise ValueError("nesting too deep") from None
    return value


def rpc_result(id_: Any, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def rpc_error(id_: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def tool_result(text: str, is_error: bool) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class StrataServer:
    """Answers JSON-RPC messages for one open database."""

    def __init__(self, engine: Engine):
        self.engine = engine

    # -- framing -----------------------------------------------------------------

    def handle_line(self, raw: bytes) -> str | None:
        """The answer line for one input line (None: nothing to answer)."""
        if not raw.strip():
            return None
        try:
            message = parse_line(raw)
        except ValueError as exc:
            return dumps(rpc_error(None, -32700, f"parse error: {exc}"))
        if isinstance(message, list):
            if not message:
                return dumps(rpc_error(None, -32600, "invalid request: empty batch"))
            answers = [a for a in (self.handle_message(m) for m in message) if a is not None]
            return dumps(answers) if answers else None
        answer = self.handle_message(message)
        return None if answer is None else dumps(answer)

    def handle_message(self, message: Any) -> dict | None:
        if not isinstance(message, dict):
            return rpc_error(None, -32600, "invalid request: expected a JSON-RPC request object")
        id_ = message.get("id")
        if "id" in message and (isinstance(id_, (dict, list)) or id_ is True or id_ is False):
            return rpc_error(None, -32600, "invalid request: `id` must be a string, a number or null")
        if message.get("jsonrpc") != "2.0":
            return rpc_error(id_, -32600, 'invalid request: `jsonrpc` must be "2.0"')
        method = message.get("method")
        if not isinstance(method, str):
            return rpc_error(id_, -32600, "invalid request: `method` must be a string")
        if "id" not in message:
            return None  # a notification: never answered
        params = message.get("params")
        try:
            return self.dispatch(id_, method, params)
        except Exception:  # noqa: BLE001 - one bad call must not end the session
            log.exception("internal error answering %s", method)
            return rpc_error(id_, -32603, "internal error; see the server log")

    # -- methods -----------------------------------------------------------------

    def dispatch(self, id_: Any, method: str, params: Any) -> dict:
        if method == "initialize":
            return rpc_result(id_, self.initialize_result(params))
        if method == "ping":
            return rpc_result(id_, {})
        if method == "tools/list":
            return rpc_result(id_, {"tools": TOOLS})
        if method == "tools/call":
            return self.tools_call(id_, params)
        return rpc_error(id_, -32601, f"method `{method}` is not supported")

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
            return rpc_error(id_, -32602, "tools/call requires a `name`")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            return rpc_error(id_, -32602, "`arguments` must be an object")
        try:
            text, is_error = self.call_tool(name, arguments)
        except UnknownTool:
            return rpc_error(id_, -32602, f"unknown tool `{name}`; list tools with tools/list")
        return rpc_result(id_, tool_result(text, is_error))

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
        if raw is None:
            answer = dumps(rpc_error(None, -32600, f"invalid request: a message may hold at most {max_line} bytes"))
        else:
            answer = server.handle_line(raw)
        if answer is not None:
            try:
                stdout.write(answer.encode("utf-8") + b"\n")
                stdout.flush()
            except BrokenPipeError:
                log.info("client closed the connection")
                return 0
    return 0
