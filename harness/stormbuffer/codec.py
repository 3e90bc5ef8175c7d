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
    lines = [
        f"format_version = {FORMAT_VERSION}",
        f"id = {toml_string(record.id)}",
        f"title = {toml_string(record.title)}",
        f"kind = {toml_string(record.kind)}",
        f"scope = {toml_string(record.scope)}",
        f"status = {toml_string(record.status)}",
        f"access = {toml_string(record.access)}",
        f"created_at = {toml_string(format_timestamp(record.created_at))}",
        f"updated_at = {toml_string(format_timestamp(record.updated_at))}",
        f"tags = {toml_array(record.tags)}",
        f"aliases = {toml_array(record.aliases)}",
        f"supersedes = {toml_array(record.supersedes)}",
    ]
    for source in record.sources:
        lines += ["", "[[sources]]", f"kind = {toml_string(source.kind)}",
                  f"reference = {toml_string(source.reference)}", f"actor = {toml_string(source.actor)}"]
    return ("+++\n" + "\n".join(lines) + "\n+++\n\n" + record.body).encode("utf-8")


_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(value: str) -> str:
    """A TOML basic string (control characters escaped)."""
    out = []
    for c in value:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_array(values: list[str]) -> str:
    return "[" + ", ".join(toml_string(v) for v in values) + "]"


__all__ = ["CodecError", "parse_record", "render_record", "split_front_matter", "toml_string", "toml_array"]
