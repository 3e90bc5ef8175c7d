"""Strata's command wire: decoding a command object into checked arguments.

The real engine deserializes every command with serde (``deny_unknown_fields``)
and its error text is what clients are taught by, so this module reproduces
the same checks and the same sentences: fields are read in the order they
appear, an unknown or duplicate field or an ill-typed value fails at once,
then missing required fields are reported in declaration order.

Each command is a :class:`Spec`: its fields in the engine's declaration order
(which is also the order serde lists them in "expected one of ...").
"""

from __future__ import annotations

import binascii
import json
import re
from dataclasses import dataclass
from typing import Any, Callable


class WireError(Exception):
    """The command does not deserialize; the message is serde's sentence."""


def elements(n: int) -> str:
    """serde's count of a sequence's expected elements: "1 element", "3 elements"."""
    return "1 element" if n == 1 else f"{n} elements"


def positional(v: list, name: str, specs: tuple, defaulted: bool = False) -> dict:
    """A struct given as a sequence, read as serde reads one: each element in order, so an
    element's own error comes before a length error; too few is the struct's length error
    (a ``defaulted`` struct keeps its defaults instead), too many is the sequence's, after
    the struct's own elements are read."""
    out = dict.fromkeys(f.name for f in specs)
    for i, f in enumerate(specs):
        if i >= len(v):
            if defaulted:
                return out
            raise WireError(f"invalid length {len(v)}, expected struct {name} with {elements(len(specs))}")
        out[f.name] = None if v[i] is None and not f.required else f.decode(v[i])
    if len(v) > len(specs):
        raise WireError(f"invalid length {len(v)}, expected {elements(len(specs))} in sequence")
    return out


class NumberRangeError(Exception):
    """An integer outside i64/u64 somewhere in the command (the executor rejects it before decoding)."""


U64_MAX = 2**64 - 1
I64_MIN = -(2**63)


def check_number_range(value: Any) -> None:
    if isinstance(value, dict):
        # Most commands are flat strings and small ints: check those without a stack.
        nested = []
        for v in value.values():
            t = type(v)
            if t is int:
                if v > U64_MAX or v < I64_MIN:
                    raise NumberRangeError
            elif t is dict or t is list:
                nested.append(v)
        if not nested:
            return
        value = nested
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is int:
            if v > U64_MAX or v < I64_MIN:
                raise NumberRangeError
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


# -- how serde names an unexpected value ---------------------------------------


def unexpected(v: Any) -> str:
    if v is None:
        return "null"
    if v is True or v is False:
        return f"boolean `{'true' if v else 'false'}`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return f"floating point `{_float_text(v)}`"
    if isinstance(v, str):
        return f"string {json.dumps(v, ensure_ascii=False)}"
    if isinstance(v, list):
        return "sequence"
    return "map"


def _float_text(v: float) -> str:
    return repr(v)


def invalid_type(v: Any, expected: str) -> WireError:
    return WireError(f"invalid type: {unexpected(v)}, expected {expected}")


def expected_list(names: list[str] | tuple[str, ...]) -> str:
    quoted = [f"`{n}`" for n in names]
    if not quoted:
        return "there are no fields"
    if len(quoted) == 1:
        return f"expected {quoted[0]}"
    if len(quoted) == 2:
        return f"expected {quoted[0]} or {quoted[1]}"
    return "expected one of " + ", ".join(quoted)


def _variants(names: tuple[str, ...]) -> str:
    quoted = [f"`{n}`" for n in names]
    if len(quoted) == 1:
        return f"expected {quoted[0]}"
    if len(quoted) == 2:
        return f"expected {quoted[0]} or {quoted[1]}"
    return "expected one of " + ", ".join(quoted)


# -- value decoders ---------------------------------------------------------------

Decoder = Callable[[Any], Any]


def string(v: Any) -> str:
    if isinstance(v, str):
        return v
    raise invalid_type(v, "a string")


def u64(v: Any) -> int:
    if type(v) is int:
        if 0 <= v <= U64_MAX:
            return v
        raise WireError(f"invalid value: integer `{v}`, expected u64")
    raise invalid_type(v, "u64")


def u8(v: Any) -> int:
    if type(v) is int:
        if 0 <= v <= 255:
            return v
        raise WireError(f"invalid value: integer `{v}`, expected u8")
    raise invalid_type(v, "u8")


def f64(v: Any) -> float:
    if type(v) is int or type(v) is float:
        return float(v)
    raise invalid_type(v, "f64")


def boolean(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise invalid_type(v, "a boolean")


def any_json(v: Any) -> Any:
    return v


def f32_list(v: Any) -> list[float]:
    if not isinstance(v, list):
        raise invalid_type(v, "a sequence")
    return [f64(x) for x in v]


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_INDEX = {c: i for i, c in enumerate(_B64.encode("ascii"))}  # by byte value
_NOT_B64 = re.compile(rb"[^A-Za-z0-9+/]")
_PAD = ord("=")


def byte_string(v: Any) -> bytes:
    """A ``Bytes`` field: standard padded base64 text, or an array of byte values."""
    if isinstance(v, str):
        return decode_base64(v)
    if isinstance(v, list):
        return bytes(u8(x) for x in v)
    raise invalid_type(v, "a base64 string or an array of byte values")


def decode_base64(text: str) -> bytes:
    try:
        raw = text.encode("ascii")
        data = binascii.a2b_base64(raw, strict_mode=True)
    except (binascii.Error, ValueError):
        pass
    else:
        # Canonical only: padding present and unused trailing bits zero.
        if binascii.b2a_base64(data, newline=False) == raw:
            return data
    raise WireError(f"invalid base64 bytes: {_base64_problem(text)}")


def _base64_problem(text: str) -> str:
    """The base64 crate's sentence for text that is no canonical padded base64.

    It reads the UTF-8 bytes: a lone last byte that is neither a symbol nor `=` first (a trailing
    newline, or the last byte of a multi-byte character), then every quad but the last, where `=`
    is no symbol, then the last quad, where `=` may not stand in the first two places nor before a
    symbol; then that quad's length, its padding and the unused bits of its last symbol.
    """
    data = text.encode("utf-8", "surrogatepass")
    size, rem = len(data), len(data) % 4
    if rem == 1 and data[-1] != _PAD and data[-1] not in _B64_INDEX:
        return _bad_symbol(data[-1], size - 1)
    start = max(size - rem - (4 if rem == 0 else 0), 0)  # the last quad, complete or not
    bad = _NOT_B64.search(data, 0, start)
    if bad:
        return _bad_symbol(data[bad.start()], bad.start())
    symbols, pads, first_pad = [], 0, 0
    for offset, byte in enumerate(data[start:], start):
        if byte == _PAD:
            if offset - start < 2:
                return _bad_symbol(byte, offset)
            first_pad = first_pad or offset
            pads += 1
        elif pads:
            return _bad_symbol(_PAD, first_pad)
        elif byte not in _B64_INDEX:
            return _bad_symbol(byte, offset)
        else:
            symbols.append(byte)
    if len(symbols) < 2:
        return f"Invalid input length: {start + len(symbols)}"
    if (pads + len(symbols)) % 4:
        return "Invalid padding"
    unused = len(symbols) * 6 % 8
    last = symbols[-1]
    if _B64_INDEX[last] & ((1 << unused) - 1):
        return f"Invalid last symbol {last}, offset {start + len(symbols) - 1}."
    return "Invalid padding"  # not reached: such text decodes


def _bad_symbol(byte: int, offset: int) -> str:
    return f"Invalid symbol {byte}, offset {offset}."


def enum(*names: str) -> Decoder:
    def decode(v: Any) -> str:
        if isinstance(v, str):
            if v in names:
                return v
            raise WireError(f"unknown variant `{v}`, {_variants(names)}")
        if isinstance(v, dict):
            if len(v) != 1:
                raise WireError("invalid value: map, expected map with a single key")
            (name,) = v
            if name in names:
                return name
            raise WireError(f"unknown variant `{name}`, {_variants(names)}")
        raise invalid_type(v, "string or map")
    return decode


metric = enum("cosine", "euclidean", "dot_product")
direction = enum("outgoing", "incoming", "both")


@dataclass(slots=True, frozen=True)
class Condition:
    field: str
    kind: str  # null | bool | number | string
    value: Any


_SCALARS = ("null", "bool", "number", "string")


def _scalar_tag(tag: Any) -> str:
    # A sequence's tag may be the variant's index, as serde reads enum tags.
    if isinstance(tag, int) and not isinstance(tag, bool):
        if 0 <= tag < len(_SCALARS):
            return _SCALARS[tag]
        raise WireError(f"invalid value: integer `{tag}`, expected variant index 0 <= i < {len(_SCALARS)}")
    if not isinstance(tag, str):
        raise invalid_type(tag, "variant identifier")
    if tag not in _SCALARS:
        raise WireError(f"unknown variant `{tag}`, {_variants(_SCALARS)}")
    return tag


def _scalar(v: Any) -> tuple[str, Any]:
    if isinstance(v, list):
        # The sequence form of an adjacently tagged enum: [tag, content].
        if len(v) < 2:
            raise WireError(f"invalid length {len(v)}, expected adjacently tagged enum VectorScalar")
        tag = _scalar_tag(v[0])
        if tag == "null":
            if v[1] is not None:
                raise invalid_type(v[1], "unit variant VectorScalar::Null")
            out = (tag, None)
        else:
            out = (tag, {"bool": boolean, "number": f64, "string": string}[tag](v[1]))
        if len(v) > 2:
            raise WireError(f"invalid length {len(v)}, expected 2 elements in sequence")
        return out
    if not isinstance(v, dict):
        raise invalid_type(v, "adjacently tagged enum VectorScalar")
    if "type" not in v:
        raise WireError("missing field `type`")
    tag = v["type"]
    if not isinstance(tag, str):
        raise invalid_type(tag, "variant identifier")
    if tag not in _SCALARS:
        raise WireError(f"unknown variant `{tag}`, {_variants(_SCALARS)}")
    if tag == "null":
        return tag, None
    if "value" not in v:
        raise WireError("missing field `value`")
    decode = {"bool": boolean, "number": f64, "string": string}[tag]
    return tag, decode(v["value"])


def _condition(v: Any) -> Condition:
    if isinstance(v, list):
        c = positional(v, "VectorFilterCondition", _CONDITION)
        return Condition(c["field"], c["value"][0], c["value"][1])
    if not isinstance(v, dict):
        raise invalid_type(v, "struct VectorFilterCondition")
    field = op = value = None
    seen = set()
    for name, item in v.items():
        if name == "field":
            field = string(item)
        elif name == "op":
            op = enum("eq")(item)
        elif name == "value":
            value = _scalar(item)
        else:
            continue  # the engine ignores extra keys inside a condition
        seen.add(name)
    for name in ("field", "op", "value"):
        if name not in seen:
            raise WireError(f"missing field `{name}`")
    return Condition(field, value[0], value[1])


def vector_filter(v: Any) -> list[Condition]:
    if isinstance(v, list):
        if not v:
            raise WireError("invalid length 0, expected struct VectorMetadataFilter with 1 element")
        conditions = v[0]
        if not isinstance(conditions, list):
            raise invalid_type(conditions, "a sequence")
        found = [_condition(c) for c in conditions]
        if len(v) > 1:
            raise WireError(f"invalid length {len(v)}, expected 1 element in sequence")
        return found
    elif isinstance(v, dict):
        if "conditions" not in v:
            raise WireError("missing field `conditions`")
        conditions = v["conditions"]
    else:
        raise invalid_type(v, "struct VectorMetadataFilter")
    if not isinstance(conditions, list):
        raise invalid_type(conditions, "a sequence")
    return [_condition(c) for c in conditions]


# -- command specs ------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Field:
    name: str
    decode: Decoder
    required: bool = False
    # An optional field is an Option in the engine (null reads as absent) unless it is a
    # defaulted plain value (DEFAULTED): then null is serde's type error, as for a required one.
    nullable: bool = True


# A vector filter condition given as a sequence: [field, op, value].
_CONDITION = (Field("field", string, True), Field("op", enum("eq"), True), Field("value", _scalar, True))


class Spec:
    __slots__ = ("wire", "fields", "by_name", "expected", "defaults", "required", "aliases")

    def __init__(self, wire: str, fields: tuple[Field, ...], aliases: dict[str, str] | None = None):
        self.wire = wire
        # serde aliases: another name for a field (listed among the expected names), which may
        # not be given next to the field itself, even as null.
        self.aliases = aliases or {}
        self.fields = fields
        self.by_name = {f.name: (f.decode, f.required, f.nullable) for f in fields}
        self.expected = expected_list([f.name for f in fields])
        self.defaults = {f.name: None for f in fields if not f.required}
        self.required = tuple(f.name for f in fields if f.required)

    def decode(self, command: dict) -> dict[str, Any]:
        """Checked arguments (absent and null optional fields are None), or WireError."""
        by_name = self.by_name
        out = self.defaults.copy()
        seen = 0
        aliased: set[str] = set()
        for name, value in command.items():
            if self.aliases:
                field_name = self.aliases.get(name, name)
                if field_name in self.aliases.values():
                    if field_name in aliased:
                        raise WireError(f"duplicate field `{field_name}`")
                    aliased.add(field_name)
            known = by_name.get(name)
            if known is None:
                if name == "type":
                    continue
                raise WireError(f"unknown field `{name}`, {self.expected}")
            decode, required, nullable = known
            if required:
                seen += 1
            elif value is None and nullable:
                continue
            out[name] = decode(value)
        if seen < len(self.required):
            for name in self.required:
                if name not in out:
                    raise WireError(f"missing field `{name}`")
        return out


R = True
DEFAULTED = "defaulted"  # optional, but not an Option: null is refused (see Field.nullable)


def _field(name: str, decode: Decoder, kind: bool | str = False) -> Field:
    return Field(name, decode, kind is R, kind != DEFAULTED)


def _spec(wire: str, *fields: tuple) -> Spec:
    return Spec(wire, tuple(_field(*f) for f in fields))


BRANCH = ("branch", string)
SPACE = ("space", string)
AS_OF = ("as_of", u64)
AS_OF_TIME = ("as_of_time", u64)
SCOPE = (BRANCH, SPACE)

SPECS: dict[str, Spec] = {s.wire: s for s in (
    _spec("ping"),
    _spec("kv_put", *SCOPE, ("key", byte_string, R), ("value", byte_string, R)),
    _spec("kv_get", *SCOPE, ("key", byte_string, R), AS_OF, AS_OF_TIME),
    _spec("kv_delete", *SCOPE, ("key", byte_string, R)),
    _spec("kv_exists", *SCOPE, ("key", byte_string, R)),
    _spec("kv_history", *SCOPE, ("key", byte_string, R)),
    _spec("kv_list", *SCOPE, ("prefix", byte_string), ("cursor", byte_string), ("limit", u64), AS_OF, AS_OF_TIME),
    _spec("kv_count", *SCOPE, ("prefix", byte_string), AS_OF, AS_OF_TIME),
    _spec("kv_scan", *SCOPE, ("start", byte_string), ("limit", u64)),
    _spec("json_set", *SCOPE, ("key", string, R), ("path", string, R), ("value", any_json, R)),
    _spec("json_get", *SCOPE, ("key", string, R), ("path", string, R), AS_OF, AS_OF_TIME),
    _spec("json_delete", *SCOPE, ("key", string, R), ("path", string, R)),
    _spec("json_exists", *SCOPE, ("key", string, R)),
    _spec("json_list", *SCOPE, ("prefix", string), ("cursor", string), ("limit", u64), AS_OF, AS_OF_TIME),
    _spec("json_count", *SCOPE, ("prefix", string), AS_OF, AS_OF_TIME),
    _spec("json_history", *SCOPE, ("key", string, R)),
    _spec("vector_create_collection", *SCOPE, ("collection", string, R), ("dimension", u64, R),
          ("metric", metric, R), ("embedding_model", string)),
    _spec("vector_upsert", *SCOPE, ("collection", string, R), ("key", string, R), ("vector", f32_list, DEFAULTED),
          ("text", string), ("metadata", any_json)),
    _spec("vector_query", *SCOPE, ("collection", string, R), ("query", f32_list, DEFAULTED), ("text", string),
          ("k", u64, R), ("filter", vector_filter), AS_OF, AS_OF_TIME),
    _spec("vector_get", *SCOPE, ("collection", string, R), ("key", string, R), AS_OF, AS_OF_TIME),
    _spec("vector_delete", *SCOPE, ("collection", string, R), ("key", string, R)),
    _spec("vector_exists", *SCOPE, ("collection", string, R), ("key", string, R)),
    _spec("vector_count", *SCOPE, ("collection", string, R), AS_OF, AS_OF_TIME),
    _spec("vector_list_collections", *SCOPE),
    _spec("vector_delete_collection", *SCOPE, ("collection", string, R), ("force", boolean, DEFAULTED)),
    _spec("event_append", *SCOPE, ("event_type", string, R), ("payload", any_json, R)),
    Spec("event_list", tuple(_field(*f) for f in (*SCOPE, ("event_type", string), ("limit", u64),
                                                   ("after_sequence", u64), ("cursor", u64), AS_OF, AS_OF_TIME)),
         aliases={"cursor": "after_sequence"}),
    _spec("event_get", *SCOPE, ("sequence", u64, R), AS_OF, AS_OF_TIME),
    _spec("event_count", *SCOPE, AS_OF, AS_OF_TIME),
    _spec("event_verify_chain", *SCOPE),
    _spec("graph_create", *SCOPE, ("graph", string, R)),
    _spec("graph_delete", *SCOPE, ("graph", string, R), ("force", boolean, DEFAULTED)),
    _spec("graph_list", *SCOPE, ("cursor", string), ("limit", u64), AS_OF, AS_OF_TIME),
    _spec("graph_get_meta", *SCOPE, ("graph", string, R), AS_OF, AS_OF_TIME),
    _spec("graph_add_node", *SCOPE, ("graph", string, R), ("node_id", string, R), ("properties", any_json),
          ("binding", any_json), ("object_type", string)),
    _spec("graph_get_node", *SCOPE, ("graph", string, R), ("node_id", string, R), AS_OF, AS_OF_TIME),
    _spec("graph_remove_node", *SCOPE, ("graph", string, R), ("node_id", string, R)),
    _spec("graph_add_edge", *SCOPE, ("graph", string, R), ("src", string, R), ("edge_type", string, R),
          ("dst", string, R), ("weight", f64), ("properties", any_json)),
    _spec("graph_get_edge", *SCOPE, ("graph", string, R), ("src", string, R), ("edge_type", string, R),
          ("dst", string, R), AS_OF, AS_OF_TIME),
    _spec("graph_remove_edge", *SCOPE, ("graph", string, R), ("src", string, R), ("edge_type", string, R),
          ("dst", string, R)),
    _spec("graph_neighbors", *SCOPE, ("graph", string, R), ("node_id", string, R), ("direction", direction, R),
          ("edge_type", string), ("cursor", string), ("limit", u64), AS_OF, AS_OF_TIME),
    _spec("branch_list"),
    _spec("branch_get", ("branch", string, R)),
    _spec("branch_create", ("branch", string, R)),
    _spec("branch_delete", ("branch", string, R)),
    _spec("branch_fork_current", ("source", string, R), ("branch", string, R)),
    _spec("branch_fork_at_version", ("source", string, R), ("branch", string, R), ("version", u64, R)),
    _spec("branch_fork_at_timestamp", ("source", string, R), ("branch", string, R), ("timestamp", u64, R)),
    _spec("space_list", BRANCH),
    _spec("space_exists", *SCOPE[:1], ("space", string, R)),
    _spec("space_create", *SCOPE[:1], ("space", string, R)),
)}



# -- batch entries, and the commands past the curated tools ------------------------------


def seq_of(item: Decoder) -> Decoder:
    def decode(v: Any) -> list:
        if not isinstance(v, list):
            raise invalid_type(v, "a sequence")
        return [item(x) for x in v]
    return decode


def struct(name: str, *fields: tuple) -> Decoder:
    """A batch entry: a map (unknown keys ignored, as the engine's entries are not strict) or a sequence."""
    specs = tuple(Field(*f) for f in fields)

    def decode(v: Any) -> dict:
        out: dict[str, Any] = {}
        if isinstance(v, dict):
            for f in specs:
                if f.name in v and (f.required or v[f.name] is not None):
                    out[f.name] = f.decode(v[f.name])
                elif f.required:
                    raise WireError(f"missing field `{f.name}`")
                else:
                    out[f.name] = None
            return out
        if isinstance(v, list):
            return positional(v, name, specs)
        raise invalid_type(v, f"struct {name}")
    return decode


event_direction = enum("forward", "reverse")
json_index_type = enum("numeric", "tag", "text")
KV_ENTRY = struct("BatchKvEntry", ("key", byte_string, R), ("value", byte_string, R))
JSON_ENTRY = struct("BatchJsonEntry", ("key", string, R), ("path", string, R), ("value", any_json, R))
JSON_GET_ENTRY = struct("BatchJsonGetEntry", ("key", string, R), ("path", string, R))
JSON_DELETE_ENTRY = struct("BatchJsonDeleteEntry", ("key", string, R), ("path", string, R))
VECTOR_ENTRY = struct("BatchVectorEntry", ("key", string, R), ("vector", f32_list, R), ("metadata", any_json))
EVENT_ENTRY = struct("BatchEventEntry", ("event_type", string, R), ("payload", any_json, R))
COLLECTION = ("collection", string, R)

SPECS.update({s.wire: s for s in (
    _spec("info", BRANCH),
    _spec("health", BRANCH),
    _spec("metrics", BRANCH),
    _spec("storage", BRANCH, ("audit", boolean, DEFAULTED)),
    _spec("describe", *SCOPE),
    _spec("config_get"),
    _spec("space_delete", *SCOPE[:1], ("space", string, R), ("force", boolean, DEFAULTED)),
    _spec("kv_batch_put", *SCOPE, ("entries", seq_of(KV_ENTRY), R)),
    _spec("kv_batch_get", *SCOPE, ("keys", seq_of(byte_string), R)),
    _spec("kv_batch_delete", *SCOPE, ("keys", seq_of(byte_string), R)),
    _spec("kv_batch_exists", *SCOPE, ("keys", seq_of(byte_string), R)),
    _spec("kv_sample", *SCOPE, ("prefix", byte_string), ("count", u64)),
    _spec("json_batch_exists", *SCOPE, ("keys", seq_of(string), R)),
    _spec("json_batch_set", *SCOPE, ("entries", seq_of(JSON_ENTRY), R)),
    _spec("json_batch_get", *SCOPE, ("entries", seq_of(JSON_GET_ENTRY), R), AS_OF, AS_OF_TIME),
    _spec("json_batch_delete", *SCOPE, ("entries", seq_of(JSON_DELETE_ENTRY), R)),
    _spec("json_scan", *SCOPE, ("start", string), ("limit", u64)),
    _spec("json_sample", *SCOPE, ("prefix", string), ("count", u64)),
    _spec("json_create_index", *SCOPE, ("name", string, R), ("field_path", string, R),
          ("index_type", json_index_type, R)),
    _spec("json_drop_index", *SCOPE, ("name", string, R)),
    _spec("json_list_indexes", *SCOPE),
    _spec("vector_collection_stats", *SCOPE, COLLECTION),
    _spec("vector_sample", *SCOPE, COLLECTION, ("count", u64)),
    _spec("vector_history", *SCOPE, COLLECTION, ("key", string, R)),
    _spec("vector_batch_exists", *SCOPE, COLLECTION, ("keys", seq_of(string), R)),
    _spec("vector_list_keys", *SCOPE, COLLECTION, ("prefix", string), ("cursor", string), ("limit", u64),
          AS_OF, AS_OF_TIME),
    _spec("vector_scan", *SCOPE, COLLECTION, ("start", string), ("limit", u64)),
    _spec("vector_update_metadata", *SCOPE, COLLECTION, ("key", string, R), ("patch", any_json, R)),
    _spec("vector_update_embedding", *SCOPE, COLLECTION, ("key", string, R), ("vector", f32_list, DEFAULTED),
          ("text", string)),
    _spec("vector_delete_by_filter", *SCOPE, COLLECTION, ("filter", vector_filter, R)),
    _spec("vector_delete_all", *SCOPE, COLLECTION),
    _spec("vector_index_query", *SCOPE, COLLECTION, ("query", f32_list, R), ("k", u64, R),
          ("filter", vector_filter), AS_OF, AS_OF_TIME),
    _spec("vector_batch_upsert", *SCOPE, COLLECTION, ("entries", seq_of(VECTOR_ENTRY), R)),
    _spec("vector_batch_get", *SCOPE, COLLECTION, ("keys", seq_of(string), R)),
    _spec("vector_batch_delete", *SCOPE, COLLECTION, ("keys", seq_of(string), R)),
    _spec("event_batch_append", *SCOPE, ("entries", seq_of(EVENT_ENTRY), R)),
    _spec("event_exists", *SCOPE, ("sequence", u64, R)),
    _spec("event_range", *SCOPE, ("start_seq", u64, R), ("end_seq", u64), ("limit", u64),
          ("direction", event_direction, R), ("event_type", string)),
    _spec("event_range_by_time", *SCOPE, ("start_ts", u64, R), ("end_ts", u64), ("limit", u64),
          ("direction", event_direction, R), ("event_type", string)),
    _spec("event_list_types", *SCOPE, AS_OF, AS_OF_TIME),
)})

def command_type(command: Any, known: frozenset[str], all_types: tuple[str, ...]) -> str:
    """The command's ``type`` tag, checked the way the engine's internally tagged enum checks it."""
    if isinstance(command, list):
        if not command:
            raise WireError("missing field `type`")
        tag = command[0]
    elif isinstance(command, dict):
        if "type" not in command:
            raise WireError("missing field `type`")
        tag = command["type"]
    else:
        raise invalid_type(command, "internally tagged enum Command")
    if not isinstance(tag, str):
        raise invalid_type(tag, "variant identifier")
    if tag not in known:
        raise WireError(f"unknown variant `{tag}`, {_variants(all_types)}")
    if not isinstance(command, dict):
        raise invalid_type(command, "internally tagged enum Command")
    return tag


# -- graph analytics -------------------------------------------------------------------


def strict_struct(name: str, *fields: tuple, defaulted: bool = False) -> Decoder:
    """A nested struct the engine decodes strictly: unknown keys refused, a sequence read positionally.

    A ``defaulted`` struct (serde's default on the whole struct) takes a shorter sequence too:
    the fields it leaves out keep their defaults.
    """
    specs = tuple(Field(*f) for f in fields)
    inner = Spec(name, specs)

    def decode(v: Any) -> dict:
        if isinstance(v, dict):
            return inner.decode(v)
        if isinstance(v, list):
            return positional(v, name, specs, defaulted)
        raise invalid_type(v, f"struct {name}")
    return decode


def f64_map(v: Any) -> dict[str, float]:
    if not isinstance(v, dict):
        raise invalid_type(v, "a map")
    return {k: f64(x) for k, x in v.items()}


def string_list(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise invalid_type(v, "a sequence")
    return [string(x) for x in v]


BUDGET = ("budget", strict_struct("GraphAnalyticsBudget", ("max_nodes", u64), ("max_edges", u64), defaulted=True))
GRAPH_ARG = ("graph", string, R)
AT = (BUDGET, AS_OF, AS_OF_TIME)

SPECS.update({s.wire: s for s in (
    _spec("graph_bfs", *SCOPE, GRAPH_ARG, ("start", string, R), ("max_depth", u64), ("max_nodes", u64),
          ("edge_types", string_list), ("direction", direction), *AT),
    _spec("graph_wcc", *SCOPE, GRAPH_ARG, *AT),
    _spec("graph_lcc", *SCOPE, GRAPH_ARG, *AT),
    _spec("graph_sssp", *SCOPE, GRAPH_ARG, ("source", string, R), ("direction", direction),
          ("edge_types", string_list), *AT),
    _spec("graph_pagerank", *SCOPE, GRAPH_ARG, ("damping", f64), ("max_iterations", u64), ("tolerance", f64),
          ("personalization", f64_map), *AT),
    _spec("graph_cdlp", *SCOPE, GRAPH_ARG, ("max_iterations", u64), ("direction", direction), *AT),
)})


# -- graph batches ---------------------------------------------------------------------


def loose_struct(name: str, *fields: tuple) -> Decoder:
    """A nested struct whose unknown keys the engine ignores (a map only; null is refused)."""
    specs = tuple(Field(*f) for f in fields)

    def decode(v: Any) -> dict:
        if not isinstance(v, dict):
            raise invalid_type(v, f"struct {name}")
        return {f.name: None if v.get(f.name) is None else f.decode(v[f.name]) for f in specs}
    return decode


_BATCH_OPS = {s.wire: s for s in (
    _spec("upsert_node", ("node_id", string, R),
          ("data", loose_struct("GraphNodeData", ("properties", any_json), ("object_type", string),
                                ("binding", any_json)), R)),
    _spec("delete_node", ("node_id", string, R)),
    _spec("upsert_edge", ("src", string, R), ("edge_type", string, R), ("dst", string, R),
          ("data", loose_struct("GraphEdgeData", ("weight", f64), ("properties", any_json)), R)),
    _spec("delete_edge", ("src", string, R), ("edge_type", string, R), ("dst", string, R)),
)}
_BATCH_OP_NAMES = tuple(_BATCH_OPS)


def graph_batch_operation(v: Any) -> dict:
    if not isinstance(v, dict):
        raise invalid_type(v, "internally tagged enum GraphBatchOperation")
    if "type" not in v:
        raise WireError("missing field `type`")
    tag = v["type"]
    if not isinstance(tag, str):
        raise invalid_type(tag, "variant identifier")
    if tag not in _BATCH_OPS:
        raise WireError(f"unknown variant `{tag}`, {_variants(_BATCH_OP_NAMES)}")
    return {"type": tag, **_BATCH_OPS[tag].decode(v)}


BULK_NODE = strict_struct("GraphBulkNode", ("node_id", string, R), ("properties", any_json), ("binding", any_json),
                          ("object_type", string))
BULK_EDGE = strict_struct("GraphBulkEdge", ("src", string, R), ("edge_type", string, R), ("dst", string, R),
                          ("weight", f64), ("properties", any_json))

SPECS.update({s.wire: s for s in (
    _spec("graph_batch_write", *SCOPE, GRAPH_ARG, ("operations", seq_of(graph_batch_operation), R)),
    _spec("graph_bulk_insert", *SCOPE, GRAPH_ARG, ("nodes", seq_of(BULK_NODE), DEFAULTED), ("edges", seq_of(BULK_EDGE), DEFAULTED),
          ("chunk_size", u64)),
)})

SPECS.update({s.wire: s for s in (
    _spec("graph_list_nodes", *SCOPE, GRAPH_ARG, ("prefix", string), ("cursor", string), ("limit", u64),
          AS_OF, AS_OF_TIME),
    _spec("graph_sample", *SCOPE, GRAPH_ARG, ("count", u64)),
)})


# -- graph ontologies and entity bindings (issue 23) ---------------------------------------

BINDING_TARGET = struct("GraphBindingTarget", ("primitive", enum("kv", "json", "vector", "event", "graph"), R),
                        ("branch", string), ("space", string, R), ("key", string, R))
BINDING = struct("GraphEntityBinding", ("target", BINDING_TARGET, R))


def _property_def(v: Any) -> dict:
    """GraphPropertyDef: an optional value-type hint and ``required`` (default false, never null)."""
    if isinstance(v, list):
        if len(v) > 2:
            raise WireError(f"invalid length {len(v)}, expected 2 elements in sequence")
        if not v:
            raise WireError("invalid length 0, expected struct GraphPropertyDef with 2 elements")
        v = dict(zip(("value_type", "required"), v))
    elif not isinstance(v, dict):
        raise invalid_type(v, "struct GraphPropertyDef")
    out = {"value_type": None, "required": False}
    if v.get("value_type") is not None:
        out["value_type"] = string(v["value_type"])
    if "required" in v:
        out["required"] = boolean(v["required"])
    return out


def property_defs(v: Any) -> dict:
    if not isinstance(v, dict):
        raise invalid_type(v, "a map")
    return {k: _property_def(x) for k, x in v.items()}


SPECS.update({s.wire: s for s in (
    _spec("graph_add_node", *SCOPE, ("graph", string, R), ("node_id", string, R), ("properties", any_json),
          ("binding", BINDING), ("object_type", string)),
    _spec("graph_define_object_type", *SCOPE, GRAPH_ARG, ("name", string, R), ("properties", property_defs, DEFAULTED)),
    _spec("graph_define_link_type", *SCOPE, GRAPH_ARG, ("name", string, R), ("source", string, R),
          ("target", string, R), ("cardinality", string), ("properties", property_defs, DEFAULTED)),
    _spec("graph_delete_object_type", *SCOPE, GRAPH_ARG, ("name", string, R)),
    _spec("graph_delete_link_type", *SCOPE, GRAPH_ARG, ("name", string, R)),
    _spec("graph_freeze_ontology", *SCOPE, GRAPH_ARG),
    _spec("graph_get_ontology", *SCOPE, GRAPH_ARG, AS_OF, AS_OF_TIME),
    _spec("graph_ontology_summary", *SCOPE, GRAPH_ARG, AS_OF, AS_OF_TIME),
    _spec("graph_nodes_by_type", *SCOPE, GRAPH_ARG, ("object_type", string, R), ("cursor", string),
          ("limit", u64), AS_OF, AS_OF_TIME),
    _spec("graph_bindings_for_entity", *SCOPE, ("target", BINDING_TARGET, R), ("cursor", string), ("limit", u64),
          AS_OF, AS_OF_TIME),
    _spec("graph_apply_delete_policy", *SCOPE, ("target", BINDING_TARGET, R),
          ("policy", enum("cascade", "detach", "keep_dangling"), R)),
)})
# Node rows of batches and bulk inserts carry the same binding.
_BATCH_OPS["upsert_node"] = _spec(
    "upsert_node", ("node_id", string, R),
    ("data", loose_struct("GraphNodeData", ("properties", any_json), ("object_type", string), ("binding", BINDING)), R))
BULK_NODE = strict_struct("GraphBulkNode", ("node_id", string, R), ("properties", any_json), ("binding", BINDING),
                          ("object_type", string))
SPECS["graph_bulk_insert"] = _spec("graph_bulk_insert", *SCOPE, GRAPH_ARG, ("nodes", seq_of(BULK_NODE), DEFAULTED),
                                   ("edges", seq_of(BULK_EDGE), DEFAULTED), ("chunk_size", u64))


# -- branch comparison and promotion (issue 23) ----------------------------------------------

_STRATEGY = ("strategy", enum("strict", "source_wins"), DEFAULTED)
SPECS.update({s.wire: s for s in (
    _spec("branch_diff", ("branch_a", string, R), ("branch_b", string, R), ("at_timestamp", u64)),
    _spec("branch_merge", ("source", string, R), ("target", string, R), _STRATEGY),
    _spec("branch_preview", ("source", string, R), ("target", string, R), _STRATEGY),
)})
