"""Newline-delimited JSON-RPC 2.0: the framing every stdio server here shares.

Three servers read JSON-RPC from stdin one line at a time: the front of the
SDK-based servers (``memstrata mcp``, ``kura mcp``; :mod:`.stdio`), the
Strata-compatible server (:mod:`memstrata.strata.mcp`) and the
Stormbuffer-compatible adapter (:mod:`memstrata.stormbuffer.mcp`).  Whatever
they serve, a line has to be read without holding an endless one, decoded,
told apart as a message or a batch, and its envelope checked before the
server can look at its method; a malformed one is answered, never dropped.
Those rules live here once.

What does differ is wording and policy: each server answers in the words of
the product it stands in for (``"Parse error: ..."``, ``"parse error: ..."``,
a bare ``"Parse error"``), takes JSON-RPC's ids or only MCP's, and answers or
refuses batches.  A server states all of that in one :class:`Dialect`, which
also keeps clients' byte-for-byte expectations of each server in one place.

Not here, because the servers differ in substance: what a checked message
means (methods, params, a response from the client, cancellation), how an
answer is encoded (the engine's float format, ASCII or not) and what a
failed write means for the session.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


# -- reading --------------------------------------------------------------------------


class Oversized(bytes):
    """What :func:`read_lines` yields, with ``prefixes``, for a line over the limit: its first
    ``limit`` bytes (the rest was read and dropped)."""


def read_lines(stdin: BinaryIO, limit: int, prefixes: bool = False) -> Iterator[bytes | None]:
    """Each line of ``stdin`` (with its newline) up to end of input; ``None`` for a line over ``limit``
    bytes (with ``prefixes``, an :class:`Oversized` holding its first ``limit`` bytes instead).

    ``readline()`` without a limit keeps reading until it meets a newline, so
    one endless line from a client would grow a server's memory without
    bound.  This never holds more than ``limit + 1`` bytes of a line: the rest
    of a longer one is read and dropped in pieces of ``limit`` bytes, and the
    line after it is read as usual, so the session survives it.
    """
    while True:
        line = stdin.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # drop the rest of the oversized line
                more = stdin.readline(limit)
                if not more or more.endswith(b"\n"):
                    break
            yield Oversized(line[:limit]) if prefixes else None
            continue
        yield line


def leading_id(prefix: bytes) -> Any:
    """The top-level ``"id"`` of the JSON object whose text begins with ``prefix`` (a line too long to
    read whole), when it comes before anything the prefix cuts off -- clients write ``jsonrpc``,
    ``id`` and ``method`` before ``params`` -- else None."""
    text = prefix.decode("utf-8", "ignore")
    decoder = json.JSONDecoder()
    space = " \t\r\n"
    try:
        i = len(text) - len(text.lstrip(space))
        if text[i] != "{":
            return None
        i += 1
        while True:
            while text[i] in space:
                i += 1
            if text[i] != '"':
                return None
            key, i = decoder.raw_decode(text, i)
            while text[i] in space:
                i += 1
            if text[i] != ":":
                return None
            i += 1
            while text[i] in space:
                i += 1
            value, i = decoder.raw_decode(text, i)   # a value the prefix cuts off raises here
            if key == "id":
                return value
            while text[i] in space:
                i += 1
            if text[i] != ",":
                return None
            i += 1
    except (IndexError, ValueError):
        return None


# -- answers --------------------------------------------------------------------------


def result_response(id_: Any, result: Any) -> dict:
    """A success response; the key order is part of what clients compare byte for byte."""
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def error_response(id_: Any, code: int, message: str) -> dict:
    """An error response; the key order is part of what clients compare byte for byte."""
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def write_line(stream: BinaryIO, data: bytes) -> None:
    """Write one encoded answer as one line, flushed at once.

    A client waits for each answer, so nothing may sit in a buffer; an
    unbuffered stream may take only part of a write, so the rest is written
    until all of it is out.  Errors (the client gone) are left to the caller:
    each server decides what a broken pipe means for its session.
    """
    view = memoryview(data + b"\n")
    while view:
        written = stream.write(view)
        view = view[written or 0:]
    stream.flush()


# -- ids ------------------------------------------------------------------------------


def is_mcp_id(value: Any) -> bool:
    """MCP's ids: a string or an integer (MCP forbids JSON-RPC's null, and a fraction is no id)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def is_jsonrpc_id(value: Any) -> bool:
    """JSON-RPC 2.0's ids: a string, a number or null (of JSON's values, anything but true, false,
    an object or an array)."""
    return value is None or isinstance(value, (str, float)) or (isinstance(value, int) and not isinstance(value, bool))


# -- what one line holds ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer decided here (a parse error, an empty or refused batch): the server never sees the line."""

    payload: dict | list


@dataclass(frozen=True, slots=True)
class Message:
    """One JSON value sent as a message, its envelope not checked yet.

    The server checks it (:meth:`Dialect.check_envelope`) when it answers, so
    that it can act on the line before then: Stormbuffer's reader notes a
    cancellation as soon as it is read, malformed or not.
    """

    value: Any

    @property
    def messages(self) -> list[Any]:
        return [self.value]


@dataclass(frozen=True, slots=True)
class Batch:
    """A non-empty batch whose elements the server answers, each as if it came on a line of its own."""

    value: list[Any]

    @property
    def messages(self) -> list[Any]:
        return self.value


Incoming = Reply | Message | Batch | None  # None: a blank line, which is not a message


def reply_to(incoming: Incoming, answer: Callable[[Any], dict | None]) -> dict | list | None:
    """What one line is owed, given ``answer`` for one message (None: nothing, a notification's due).

    A batch gets its elements' answers in one array, in order, and nothing at
    all when none was owed one (JSON-RPC 2.0, section 6).
    """
    if incoming is None:
        return None
    if isinstance(incoming, Reply):
        return incoming.payload
    if isinstance(incoming, Batch):
        return [a for a in map(answer, incoming.value) if a is not None] or None
    return answer(incoming.value)


# -- per server -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    """What a server does with a batch (a JSON array of messages on one line).

    JSON-RPC 2.0 answers a batch element by element; MCP dropped batches in
    its 2025-06-18 revision, so a server may refuse them instead.  Either way
    an empty batch is -32600 and a notification inside one is owed nothing.
    """

    refusal: str | None  # None: answered; else the -32600 message of each element owed an answer

    @classmethod
    def answered(cls) -> BatchPolicy:
        return cls(None)

    @classmethod
    def refused(cls, message: str) -> BatchPolicy:
        return cls(message)


class _Constant(ValueError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _refuse_constant(name: str) -> Any:
    # Python's json takes NaN, Infinity and -Infinity; JSON does not.
    raise _Constant(name)


# The literal -0 (not -0.5, -0e1 or -01, which is no JSON).
_MINUS_ZERO = re.compile(r"-0(?![.\deE])")


_NUMBERS = frozenset((int, float, bool))


def _walk(value: Any, depth_limit: int | None) -> tuple[bool, bool]:
    """(whether ``value`` nests more than ``depth_limit`` containers deep, whether it holds an
    infinite float: a number literal past the double range, which Python's json reads as
    infinity).  Level by level; ``map`` runs in C, so a batch of long vectors costs little."""
    level, infinite = 0, isinstance(value, float) and math.isinf(value)
    frontier = [value] if isinstance(value, (dict, list)) else []
    while frontier:
        level += 1
        if depth_limit is not None and level > depth_limit:
            return True, infinite
        deeper = []
        for item in frontier:
            children = item.values() if type(item) is dict else item
            kinds = set(map(type, children))
            if float in kinds and not infinite:
                infinite = (any(map(math.isinf, children)) if kinds <= _NUMBERS else
                            any(math.isinf(child) for child in children if type(child) is float))
            if list in kinds or dict in kinds:
                deeper.extend(child for child in children if type(child) in (list, dict))
        frontier = deeper
    return False, infinite


def _past_depth(text: str, limit: int) -> int | None:
    """The 1-based byte column where the first container deeper than ``limit`` opens in a JSON
    text (strings skipped), or None when none does."""
    depth, in_string, escaped = 0, False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return len(text[:index].encode("utf-8")) + 1
        elif char in "]}":
            depth -= 1
    return None


def _int_or_minus_zero(literal: str) -> int | float:
    return -0.0 if literal == "-0" else int(literal)


def minus_zero_hook(text: str) -> Callable[[str], int | float] | None:
    """``json.loads``' ``parse_int`` reading the literal -0 as the float -0.0, as serde_json reads
    it (zero has no negative integer); None, Python's own int, where ``text`` holds no -0: the
    hook costs a Python call per integer."""
    return _int_or_minus_zero if _MINUS_ZERO.search(text) is not None else None


@dataclass(frozen=True, slots=True)
class Dialect:
    """One server's JSON-RPC: the ids it takes, its batch policy and the words of every error found here.

    The messages are ``str.format`` templates where a field is named.  All
    parse errors are -32700 with id null; all the rest -32600.
    """

    valid_id: Callable[[Any], bool]
    batches: BatchPolicy
    # -32700
    not_utf8: str                # {byte}: the offset of the first byte that is not UTF-8
    not_json: str                # {msg}, {line}, {column}: the decoder's own account
    constant: str                # {name}: NaN, Infinity or -Infinity
    bad_value: str               # {reason}: a value the decoder refuses (an integer over Python's digit limit)
    too_deep: str
    lone_surrogate: str | None   # None: a \uD800-style escape without its pair is let through
    # -32600
    # A message with a lone surrogate but a usable id of its own gets this, under that id, instead of
    # the -32700 above (None: every one gets the -32700): the JSON parsed, and its sender awaits an answer.
    surrogate_request: str | None
    too_long: str                # {limit}: the bound in bytes, {mib}: in whole MiB
    empty_batch: str
    not_an_object: str
    bad_id: str
    bad_version: str
    bad_method: str
    # A UTF-8 byte-order mark before a message (what some Windows tools write first) is skipped;
    # False where the engine a server mirrors refuses it.
    skip_bom: bool = False
    # -32700 for a number literal too large for a double (1e400), where the server mirrors a
    # decoder that refuses one; None takes it as infinity, as Python's json (and the SDK) do.
    out_of_range: str | None = None
    # The literal -0 read as the float -0.0 (serde_json's reading: zero has no negative
    # integer), where the server mirrors that decoder; False: the integer 0, as Python reads it.
    minus_zero_is_float: bool = False
    # The containers a line may nest, where the server mirrors a decoder with a recursion limit
    # (serde_json's: 127, the 128th refused), and the -32700 it then gets ({line}, {column}: where
    # the container past the limit opens, the column in bytes).  None: Python's own limit.
    max_depth: int | None = None
    too_deep_at: str = ""

    def parse(self, line: bytes) -> Incoming:
        """One line read -> a message or a batch for the server, or the answer it gets here."""
        if self.skip_bom and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if not line.strip():
            return None
        # json.loads is called right here, not in a helper, so that the nesting a
        # line may have before RecursionError stays where the servers had it.
        try:
            # Without its terminator: a message cut short is reported at its own line's end, not
            # at "line 2, column 1".
            text = line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            return self._unparsable(self.not_utf8.format(byte=exc.start))
        try:
            value = json.loads(text, parse_constant=_refuse_constant,
                               parse_int=minus_zero_hook(text) if self.minus_zero_is_float else None)
        except RecursionError:
            column = None if self.max_depth is None else _past_depth(text, self.max_depth)
            if column is not None:
                return self._unparsable(self.too_deep_at.format(line=1, column=column))
            return self._unparsable(self.too_deep)
        except _Constant as exc:
            return self._unparsable(self.constant.format(name=exc.name))
        except json.JSONDecodeError as exc:
            return self._unparsable(self.not_json.format(msg=exc.msg, line=exc.lineno, column=exc.colno))
        except ValueError as exc:
            return self._unparsable(self.bad_value.format(reason=exc))
        if self.out_of_range is not None or self.max_depth is not None:
            deep, infinite = _walk(value, self.max_depth)
            if infinite and self.out_of_range is not None:
                return self._unparsable(self.out_of_range)
            column = _past_depth(text, self.max_depth) if deep and self.max_depth is not None else None
            if column is not None:
                return self._unparsable(self.too_deep_at.format(line=1, column=column))
        if self.lone_surrogate is not None and "\\u" in text:
            # Valid to Python, not to JSON, and it could not be written back as UTF-8.
            try:
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                ident = value.get("id") if isinstance(value, dict) else None
                if self.surrogate_request is not None and self.valid_id(ident) and _encodable(ident):
                    return Reply(error_response(ident, INVALID_REQUEST, self.surrogate_request))
                return self._unparsable(self.lone_surrogate)
            except RecursionError:
                return self._unparsable(self.too_deep)
        if not isinstance(value, list):
            return Message(value)
        if not value:
            return Reply(error_response(None, INVALID_REQUEST, self.empty_batch))
        if self.batches.refusal is None:
            return Batch(value)
        # One refusal per element owed an answer, that is, per element but a notification.
        refusals = [error_response(el.get("id") if isinstance(el, dict) and self.valid_id(el.get("id")) else None,
                                   INVALID_REQUEST, self.batches.refusal)
                    for el in value if not (isinstance(el, dict) and "id" not in el and "method" in el)]
        return Reply(refusals) if refusals else None

    def check_envelope(self, obj: Any) -> dict | None:
        """The -32600 answer when ``obj`` is not a JSON-RPC 2.0 message, else None.

        Checked: an object, an id this server takes, ``"jsonrpc": "2.0"`` and
        a method that is a string when there is one; in that order, since the
        order decides which id an answer carries.  A message without a method
        passes: whether a server takes responses is its own affair.
        """
        if not isinstance(obj, dict):
            return error_response(None, INVALID_REQUEST, self.not_an_object)
        if "id" in obj and not self.valid_id(obj["id"]):
            return error_response(None, INVALID_REQUEST, self.bad_id)  # an id unfit to answer with
        if obj.get("jsonrpc") != "2.0":
            return error_response(obj.get("id"), INVALID_REQUEST, self.bad_version)
        if "method" in obj and not isinstance(obj["method"], str):
            return error_response(obj.get("id"), INVALID_REQUEST, self.bad_method)
        return None

    def oversized(self, limit: int, prefix: bytes | None = None) -> dict:
        """The answer to a line over ``limit`` bytes: under the id its ``prefix`` (what
        :func:`read_lines` kept of it) shows, when it shows a usable one, else null."""
        ident = leading_id(prefix) if prefix is not None else None
        if not (self.valid_id(ident) and _encodable(ident)):
            ident = None
        return error_response(ident, INVALID_REQUEST, self.too_long.format(limit=limit, mib=limit // (1024 * 1024)))

    @staticmethod
    def _unparsable(message: str) -> Reply:
        return Reply(error_response(None, PARSE_ERROR, message))


def _encodable(value: Any) -> bool:
    """Whether ``value`` can be written back as UTF-8 JSON (a string id may hold a lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError):
        return False
    return True


__all__ = ["PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS", "INTERNAL_ERROR",
           "read_lines", "Oversized", "leading_id", "result_response", "error_response", "write_line", "is_mcp_id", "is_jsonrpc_id",
           "Reply", "Message", "Batch", "Incoming", "reply_to", "BatchPolicy", "Dialect"]
