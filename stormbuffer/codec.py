"""Canonical Markdown records: TOML front matter between ``+++`` lines, then the body.

::

    +++
    format_version = 1
    id = "<uuid>"
    ...
    [[sources]]
    kind = "conversation"
    reference = "..."
    actor = "..."
    +++
    <blank line>
    <body, byte for byte>

Parsing is strict (every key required, unknown keys refused) and always ends
in :func:`records.validate`; rendering validates first, so an invalid record
is never written.  Messages never contain a path: callers name the file.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from .records import (
    FORMAT_VERSION, Record, RecordInvalid, Source, format_timestamp, parse_timestamp, parse_uuid, validate,
)

KEYS = ("format_version", "id", "title", "kind", "scope", "status", "access", "created_at", "updated_at",
        "tags", "aliases", "supersedes", "sources")
SOURCE_KEYS = ("kind", "reference", "actor")
_STRING_KEYS = ("title", "kind", "scope", "status", "access")


class CodecError(ValueError):
    """A file is not a canonical record; ``str()`` says why (no path)."""


def parse_record(data: bytes) -> Record:
    """Parse and validate one canonical record file.  Raises CodecError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CodecError("record file is not valid UTF-8") from None
    front, body = split_front_matter(text)
    table = canonical_table(front)
    if table is None:
        try:
            table = tomllib.loads(front)
        except tomllib.TOMLDecodeError as exc:
            raise CodecError(f"front matter is not valid TOML: {exc}") from None
    record = _record_from_table(table, body)
    try:
        validate(record)
    except RecordInvalid as exc:
        raise CodecError(str(exc)) from None
    return record


# Front matter laid out exactly as render_record writes it is read with one
# regular expression instead of tomllib (a full reindex parses every file, and
# tomllib dominated its time).  The grammar is a strict subset of TOML: fixed
# key order and spacing, basic strings whose only escapes are the ones the
# renderer emits.  Whatever it accepts tomllib reads identically; anything
# else (hand edits, other writers) goes through tomllib.
_STR = r'"((?:[^"\\\x00-\x1f\x7f]|\\[btnfr"\\]|\\u00[01][0-9A-F]|\\u007F)*)"'
_ITEM = _STR.replace("(", "(?:", 1)
_ARRAY = rf"\[((?:{_ITEM}(?:, {_ITEM})*)?)\]"
_SOURCE_TABLE = "\n\\[\\[sources\\]\\]\nkind = {0}\nreference = {0}\nactor = {0}\n"
_FRONT = re.compile(
    "format_version = 1\n"
    + "".join(f"{key} = {_STR}\n" for key in KEYS[1:9])
    + "".join(f"{key} = {_ARRAY}\n" for key in KEYS[9:12])
    + f"((?:{_SOURCE_TABLE.format(_ITEM)})*)")
_SOURCE = re.compile(_SOURCE_TABLE.format(_STR))
_ITEMS = re.compile(_STR)
_ESCAPED = re.compile(r'\\(u[0-9A-F]{4}|[btnfr"\\])')
_UNESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def _unescape_one(match: re.Match) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if len(code) == 5 else _UNESCAPES[code]


def _unescape(text: str) -> str:
    return _ESCAPED.sub(_unescape_one, text) if "\\" in text else text


def canonical_table(front: str) -> dict[str, Any] | None:
    """The table of front matter in the canonical layout; None for anything else."""
    m = _FRONT.fullmatch(front)
    if m is None:
        return None
    groups = m.groups()
    table: dict[str, Any] = {"format_version": 1}
    for key, value in zip(KEYS[1:9], groups[:8]):
        table[key] = _unescape(value)
    for key, value in zip(KEYS[9:12], groups[8:11]):
        table[key] = [_unescape(v) for v in _ITEMS.findall(value)]
    sources = [dict(zip(SOURCE_KEYS, map(_unescape, src))) for src in _SOURCE.findall(groups[11])]
    if sources:  # no [[sources]] table means no key at all, as tomllib reads it
        table["sources"] = sources
    return table


def split_front_matter(text: str) -> tuple[str, str]:
    """(front matter TOML, body).  The closing ``+++`` line must be followed by a blank line."""
    if text.startswith("+++\n"):
        pos = 4
    elif text.startswith("+++\r\n"):
        pos = 5
    else:
        raise CodecError("record must start with a `+++` line")
    start = pos
    while True:
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if line in ("+++", "+++\r"):
            if end < 0:
                break
            rest = end + 1
            if text.startswith("\n", rest):
                return text[start:pos], text[rest + 1:]
            if text.startswith("\r\n", rest):
                return text[start:pos], text[rest + 2:]
            break
        if end < 0:
            raise CodecError("front matter is not closed by a `+++` line")
        pos = end + 1
    raise CodecError("the closing `+++` line must be followed by a blank line")


def _record_from_table(table: dict[str, Any], body: str) -> Record:
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise CodecError(f"unknown field `{unknown[0]}`")
    for key in KEYS:
        if key not in table:
            raise CodecError(f"missing field `{key}`")
    version = table["format_version"]
    if type(version) is not int or version != FORMAT_VERSION:
        raise CodecError(f"field `format_version` must be {FORMAT_VERSION}")
    for key in ("id", *_STRING_KEYS, "created_at", "updated_at"):
        if not isinstance(table[key], str):
            raise CodecError(f"field `{key}` must be a string")
    rid = parse_uuid(table["id"])
    if rid is None:
        raise CodecError("field `id` must be a non-nil UUID")
    stamps = {}
    for key in ("created_at", "updated_at"):
        stamps[key] = parse_timestamp(table[key])
        if stamps[key] is None:
            raise CodecError(f"field `{key}` must be an RFC 3339 timestamp")
    lists = {}
    for key in ("tags", "aliases", "supersedes"):
        value = table[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CodecError(f"field `{key}` must be an array of strings")
        lists[key] = value
    supersedes = []
    for sid in lists["supersedes"]:
        canonical = parse_uuid(sid)
        if canonical is None:
            raise CodecError("field `supersedes` must hold record identifiers")
        supersedes.append(canonical)
    return Record(
        id=rid, title=table["title"], kind=table["kind"], scope=table["scope"], status=table["status"],
        access=table["access"], created_at=stamps["created_at"], updated_at=stamps["updated_at"],
        body=body, sources=_sources(table["sources"]), tags=lists["tags"], aliases=lists["aliases"],
        supersedes=supersedes)


def _sources(value: Any) -> list[Source]:
    if not isinstance(value, list):
        raise CodecError("field `sources` must be an array of tables")
    sources = []
    for entry in value:
        if not isinstance(entry, dict):
            raise CodecError("field `sources` must be an array of tables")
        unknown = sorted(set(entry) - set(SOURCE_KEYS))
        if unknown:
            raise CodecError(f"unknown field `{unknown[0]}` in a source")
        for key in SOURCE_KEYS:
            if not isinstance(entry.get(key), str):
                raise CodecError(f"source field `{key}` must be a string")
        sources.append(Source(entry["kind"], entry["reference"], entry["actor"]))
    return sources


# -- rendering ----------------------------------------------------------------------


def render_record(record: Record, *, check: bool = True) -> bytes:
    """The canonical file bytes of a valid record.  Raises RecordInvalid.

    ``check=False`` renders a draft for the editor, which may still be incomplete.
    """
    if check:
        validate(record)
    table = {
        "format_version": FORMAT_VERSION, "id": record.id, "title": record.title, "kind": record.kind,
        "scope": record.scope, "status": record.status, "access": record.access,
        "created_at": format_timestamp(record.created_at), "updated_at": format_timestamp(record.updated_at),
        "tags": record.tags, "aliases": record.aliases, "supersedes": record.supersedes,
        "sources": [{"kind": s.kind, "reference": s.reference, "actor": s.actor} for s in record.sources],
    }
    return ("+++\n" + render_front(table) + "+++\n\n" + record.body).encode("utf-8")


def render_front(table: dict[str, Any]) -> str:
    """The front matter (the text between the ``+++`` lines) of a record table, keys in order."""
    if set(table) - set(KEYS) or any(set(s) != set(SOURCE_KEYS) for s in table.get("sources", [])):
        raise KeyError("unexpected key")
    lines = [f"format_version = {table['format_version']}"]
    for key in KEYS[1:-1]:
        value = table[key]
        lines.append(f"{key} = {toml_array(value) if isinstance(value, list) else toml_string(value)}")
    for source in table.get("sources", []):
        lines += ["", "[[sources]]", *(f"{key} = {toml_string(source[key])}" for key in SOURCE_KEYS)]
    return "\n".join(lines) + "\n"


_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')


def _escape_one(match: re.Match) -> str:
    c = match.group(0)
    return _ESCAPES.get(c) or f"\\u{ord(c):04X}"


def toml_string(value: str) -> str:
    """A TOML basic string (quotes, backslashes and control characters escaped)."""
    return '"' + _NEEDS_ESCAPE.sub(_escape_one, value) + '"'


def toml_array(values: list[str]) -> str:
    return "[" + ", ".join(toml_string(v) for v in values) + "]"


__all__ = ["CodecError", "parse_record", "render_record", "render_front", "canonical_table", "split_front_matter", "toml_string", "toml_array"]
