"""The version-1 JSON protocol of ``sbuf invoke`` (and, through it, of MCP).

A request is one JSON object on stdin; the answer is one envelope line on
stdout::

    {"version":1,"operation":"<op>","ok":true,"result":...}
    {"version":1,"operation":"<op>","ok":false,"error":{"code":"...","message":"..."}}

Checks run in a fixed order (:func:`check_request`): the version, the
operation name, the key allow-list (path-like keys get ``path_denied``), then
each operation's fields with the helpers below.  Keys come out sorted and
every message is a fixed, sanitised sentence.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

from memstrata.mcp_server.jsonrpc import minus_zero_hook

from . import errors
from .errors import SbufError, invalid_request
from .records import KINDS, SOURCE_KINDS, Source, parse_scope, parse_timestamp, parse_uuid

log = logging.getLogger(__name__)

VERSION = 1
MAX_INPUT_BYTES = 262_144
MAX_OUTPUT_BYTES = 262_144
MAX_QUERY_BYTES = 2_048
MAX_STRING_BYTES = 65_536
DEFAULT_LIMIT, MAX_LIMIT = 20, 100
DEFAULT_BUDGET, MAX_BUDGET = 512, 4_096
MAX_SCOPES = 16
MAX_COLLECTION, MAX_COLLECTION_ITEM_BYTES = 128, 512
MAX_SOURCES = 32
MAX_REFERENCE_BYTES, MAX_ACTOR_BYTES = 2_048, 256
MAX_U64 = 2**64 - 1

OPERATIONS = ("search", "context", "get", "remember", "update", "propose", "supersede", "archive")
_RECORD_FIELDS = frozenset({"id", "title", "kind", "scope", "status", "access", "created_at", "updated_at",
                            "tags", "aliases", "supersedes", "sources", "body"})
ALLOWED_KEYS: dict[str, frozenset[str]] = {
    "search": frozenset({"query", "limit", "scope", "scopes", "access"}),
    "context": frozenset({"query", "limit", "budget", "scope", "scopes", "access"}),
    "get": frozenset({"id", "scope", "scopes", "access"}),
    "remember": frozenset({"actor", "approved", "title", "kind", "scope", "tags", "aliases", "source", "body"}),
    "update": frozenset({"actor", "approved", "id", "scope", "scopes", "title", "kind", "tags", "aliases",
                         "source", "body"}),
    "archive": frozenset({"id", "scope", "scopes", "access"}),
    "propose": _RECORD_FIELDS | {"actor", "approved", "record"},
    "supersede": (_RECORD_FIELDS - {"id"}) | {"id", "replacement"},
}
RECORD_FIELDS = _RECORD_FIELDS


# -- envelopes ---------------------------------------------------------------------


def success(operation: str, result: Any) -> dict:
    return {"version": VERSION, "operation": operation, "ok": True, "result": result}


def failure(operation: str, code: str, message: str) -> dict:
    return {"version": VERSION, "operation": operation, "ok": False, "error": {"code": code, "message": message}}


def encode(envelope: dict) -> bytes:
    """Compact JSON, keys sorted, UTF-8 kept (no escaping of non-ASCII)."""
    return json.dumps(envelope, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def guarded(operation: str, run: Callable[[], Any]) -> dict:
    """The envelope of ``run()``: its result, its SbufError, or a sanitised internal_error."""
    try:
        return success(operation, run())
    except SbufError as exc:
        return failure(operation, exc.code, exc.message)
    except Exception as exc:  # never a traceback or an OS message on the wire
        log.warning("stormbuffer %s failed: %s", operation, type(exc).__name__)
        return failure(operation, "internal_error", errors.STORE_FAILED)


def answer_stdin(operation: str, data: bytes, handle: Callable[[str, Any], dict]) -> tuple[bytes, bool]:
    """One ``sbuf invoke`` exchange: (the stdout line, ok)."""
    if len(data) > MAX_INPUT_BYTES:
        envelope = failure(operation, "input_too_large", errors.INPUT_TOO_LARGE)
    else:
        try:
            request = parse_json(data)
        except ValueError:
            envelope = failure(operation, "invalid_json", errors.INVALID_JSON)
        else:
            envelope = handle(operation, request)
    line = encode(envelope) + b"\n"
    if len(line) > MAX_OUTPUT_BYTES:
        envelope = failure(operation, "output_too_large", errors.OUTPUT_TOO_LARGE)
        line = encode(envelope) + b"\n"
    return line, bool(envelope["ok"])


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# serde_json, which reads Stormbuffer's requests, refuses a container nested past this depth.
MAX_JSON_DEPTH = 127


def parse_json(data: bytes) -> Any:
    """Exactly one strict JSON value as serde_json reads it (no NaN, no lone surrogates, no
    number past f64's range, at most 127 containers deep; -0 is a float).  Raises ValueError."""
    try:
        text = data.decode("utf-8")
        # -0 is a float to serde_json (so a `limit` of -0 is no integer).
        value = json.loads(text, parse_constant=_reject_constant, parse_int=minus_zero_hook(text))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError("not one JSON value") from exc
    _check_values(value)
    return value


def _check_values(value: Any) -> None:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _utf8(item)
        elif isinstance(item, float) and math.isinf(item):
            # A literal past f64's range, which Python reads as infinity: serde_json refuses it.
            raise ValueError("number out of range")
        elif isinstance(item, (list, dict)):
            if depth == MAX_JSON_DEPTH:
                raise ValueError("recursion limit exceeded")
            if isinstance(item, list):
                stack.extend((child, depth + 1) for child in item)
            else:
                for key, child in item.items():
                    _utf8(key)
                    stack.append((child, depth + 1))


def _utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("lone surrogate in a string") from exc


# -- the request map ---------------------------------------------------------------


def check_request(operation: str, request: Any) -> dict:
    """Checks 1-4 of the protocol; returns the request object.  Raises SbufError."""
    if not isinstance(request, dict):
        raise invalid_request(errors.NOT_AN_OBJECT)
    version = request.get("version")
    if type(version) is not int or not 0 <= version <= MAX_U64:
        raise invalid_request(errors.BAD_VERSION)
    if version != VERSION:
        raise SbufError("unsupported_version", errors.UNSUPPORTED_VERSION)
    if "operation" in request and request["operation"] != operation:
        raise invalid_request(errors.OPERATION_MISMATCH)
    if operation not in OPERATIONS:
        raise SbufError("unknown_operation", errors.UNKNOWN_OPERATION)
    ensure_keys(request, ALLOWED_KEYS[operation] | {"version", "operation"})
    return request


def is_path_like(key: str) -> bool:
    # As written, not case-folded: Stormbuffer's ensure_keys compares bytes, so
    # ``Path`` or ``Filename`` is an unknown field rather than a path.
    return key in ("path", "root", "store") or key.endswith("_path") or "file" in key


def ensure_keys(obj: dict, allowed: frozenset[str] | set[str]) -> None:
    for key in sorted(obj):
        if key not in allowed:
            if is_path_like(key):
                raise SbufError("path_denied", errors.PATH_DENIED)
            raise invalid_request(errors.UNKNOWN_FIELD)


# -- field helpers -----------------------------------------------------------------

_MISSING = object()


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _is_bounded(value: Any, limit: int = MAX_STRING_BYTES) -> bool:
    return isinstance(value, str) and 1 <= utf8_len(value) <= limit


def bounded(m: dict, key: str, *, required: bool = True) -> str | None:
    """A record field: missing and required is "field `x` is required"."""
    value = m.get(key, _MISSING)
    if value is _MISSING:
        if required:
            raise invalid_request(f"field `{key}` is required")
        return None
    if not _is_bounded(value):
        raise invalid_request(f"field `{key}` must be a bounded string")
    return value


def request_string(m: dict, key: str) -> str:
    """A request-level string (``query``, ``id``): Stormbuffer reads these with
    one check, so a missing value gets the same sentence as a wrong type."""
    value = m.get(key)
    if not _is_bounded(value):
        raise invalid_request(f"field `{key}` must be a bounded string")
    return value


def query_field(m: dict) -> str:
    query = request_string(m, "query")
    if utf8_len(query) > MAX_QUERY_BYTES:
        raise invalid_request("query is too long")
    return query


def integer_field(m: dict, key: str, default: int, maximum: int) -> int:
    value = m.get(key, _MISSING)
    if value is _MISSING:
        return default
    if type(value) is not int or not 0 <= value <= MAX_U64:
        raise invalid_request(f"field `{key}` must be an integer")
    return min(max(value, 1), maximum)


def id_field(m: dict, key: str = "id", *, required: bool = True) -> str | None:
    if not required and key not in m:
        return None
    value = request_string(m, key)
    canonical = parse_uuid(value)
    if canonical is None:
        raise invalid_request("id must be a valid record identifier")
    return canonical


def scope_filter(m: dict, defaults: list[str]) -> list[str]:
    """The allowed scopes of a read or lookup, narrowed by ``scope`` or ``scopes``."""
    has_one, has_many = "scope" in m, "scopes" in m
    if has_one and has_many:
        raise invalid_request("use either scope or scopes, not both")
    if has_one:
        if not isinstance(m["scope"], str):
            raise invalid_request("scope must be a string")
        requested = [m["scope"]]
    elif has_many:
        value = m["scopes"]
        if not isinstance(value, list):
            raise invalid_request("field `scopes` must be an array")
        if not 1 <= len(value) <= MAX_SCOPES:
            raise invalid_request("scope filter is out of bounds")
        if not all(isinstance(s, str) for s in value):
            raise invalid_request("field `scopes` must hold scope strings")
        requested = value
    else:
        return list(defaults)
    for scope in requested:
        if parse_scope(scope) is None or scope not in defaults:
            raise SbufError("scope_denied", errors.SCOPE_OUTSIDE_STORE)
    return [scope for scope in defaults if scope in requested]


def access_field(m: dict, human_message: str = errors.HUMAN_ACCESS) -> None:
    """Only agent access is served; a non-string value is ignored (treated as agent)."""
    value = m.get("access")
    if not isinstance(value, str):
        return
    if value == "human":
        raise SbufError("permission_denied", human_message)
    if value != "agent":
        raise invalid_request("access must be `agent` or `human`")


def write_guard(m: dict) -> None:
    """Agent writes never claim a human actor or an approval."""
    if ("actor" in m and m["actor"] != "agent") or "approved" in m:
        raise SbufError("permission_denied", errors.AGENT_APPROVAL)


def kind_field(m: dict, *, required: bool) -> str | None:
    value = m.get("kind", _MISSING)
    if value is _MISSING:
        if required:
            raise invalid_request("field `kind` is required")
        return None
    if value not in KINDS:
        raise invalid_request("kind is invalid")
    return value


def record_scope_field(m: dict, default: str) -> str:
    value = m.get("scope", _MISSING)
    if value is _MISSING:
        return default
    if not _is_bounded(value) or parse_scope(value) is None:
        raise invalid_request("scope is invalid")
    return value


def string_list(m: dict, key: str) -> list[str] | None:
    value = m.get(key, _MISSING)
    if value is _MISSING:
        return None
    if not isinstance(value, list):
        raise invalid_request(f"field `{key}` must be an array")
    if len(value) > MAX_COLLECTION:
        raise invalid_request("record collection is too large")
    if not all(_is_bounded(v, MAX_COLLECTION_ITEM_BYTES) for v in value):
        raise invalid_request("record collection contains an invalid string")
    return list(value)


def source_object(m: dict) -> dict | None:
    value = m.get("source", _MISSING)
    if value is _MISSING:
        return None
    if not isinstance(value, dict):
        raise invalid_request("source must be an object")
    return value


def parse_source(value: dict) -> Source:
    ensure_keys(value, {"kind", "reference", "actor"})
    if "kind" not in value:
        raise invalid_request("source kind is required")
    if value["kind"] not in SOURCE_KINDS:
        raise invalid_request("source kind is invalid")
    if not _is_bounded(value.get("reference"), MAX_REFERENCE_BYTES):
        raise invalid_request("source reference is invalid")
    if not _is_bounded(value.get("actor"), MAX_ACTOR_BYTES):
        raise invalid_request("source actor is invalid")
    return Source(value["kind"], value["reference"], value["actor"])


def sources_field(m: dict) -> list[Source] | None:
    value = m.get("sources", _MISSING)
    if value is _MISSING:
        return None
    if not isinstance(value, list):
        raise invalid_request("field `sources` must be an array")
    if len(value) > MAX_SOURCES:
        raise invalid_request("record collection is too large")
    out = []
    for entry in value:
        if not isinstance(entry, dict):
            raise invalid_request("source must be an object")
        out.append(parse_source(entry))
    return out


def ids_field(m: dict, key: str) -> list[str] | None:
    value = string_list(m, key)
    if value is None:
        return None
    ids = [parse_uuid(v) for v in value]
    if any(i is None for i in ids):
        raise invalid_request("id must be a valid record identifier")
    return ids  # type: ignore[return-value]


def timestamp_field(m: dict, key: str) -> int | None:
    value = bounded(m, key, required=False)
    if value is None:
        return None
    stamp = parse_timestamp(value)
    if stamp is None:
        raise invalid_request(f"field `{key}` must be an RFC 3339 timestamp")
    return stamp


def nested_fields(m: dict, key: str, allowed: frozenset[str]) -> dict:
    """The record fields of a propose/supersede request: a nested object, or the request itself."""
    if key not in m:
        return m
    value = m[key]
    if not isinstance(value, dict):
        raise invalid_request(f"field `{key}` must be an object")
    ensure_keys(value, allowed)
    return value


__all__ = [
    "VERSION", "OPERATIONS", "ALLOWED_KEYS", "RECORD_FIELDS", "MAX_INPUT_BYTES", "MAX_OUTPUT_BYTES",
    "MAX_QUERY_BYTES", "MAX_STRING_BYTES", "DEFAULT_LIMIT", "MAX_LIMIT", "DEFAULT_BUDGET", "MAX_BUDGET",
    "success", "failure", "encode", "guarded", "answer_stdin", "parse_json", "check_request", "ensure_keys",
    "is_path_like", "bounded", "request_string", "query_field", "integer_field", "id_field", "scope_filter", "access_field",
    "write_guard", "kind_field", "record_scope_field", "string_list", "source_object", "parse_source",
    "sources_field", "ids_field", "timestamp_field", "nested_fields", "utf8_len",
]
