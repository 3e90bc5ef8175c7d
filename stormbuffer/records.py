"""The record model: fields, lifecycle, validation, identifiers and timestamps.

A record is what one canonical Markdown file holds (see :mod:`.codec` for the
file format).  :func:`validate` runs on every parse and render and again on
approval; its messages name the field and the rule, never a path, because
they reach agents as the message of an ``invalid`` outcome.
"""

from __future__ import annotations

import calendar
import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

KINDS = ("fact", "decision", "procedure", "checkpoint")
STATUSES = ("candidate", "active", "superseded", "archived")
ACCESS_CLASSES = ("agent", "human")
SOURCE_KINDS = ("conversation", "document", "issue", "url")
GLOBAL_SCOPE = "global"
FORMAT_VERSION = 1

# Allowed lifecycle moves; superseded is terminal.  A same-state move is a no-op.
TRANSITIONS = frozenset({
    ("candidate", "active"), ("candidate", "archived"), ("active", "superseded"),
    ("active", "archived"), ("archived", "active"),
})


@dataclass(slots=True, frozen=True)
class Source:
    kind: str
    reference: str
    actor: str


@dataclass(slots=True)
class Record:
    id: str
    title: str
    kind: str
    scope: str
    status: str
    access: str
    created_at: int  # ns since the epoch, UTC
    updated_at: int
    body: str
    sources: list[Source] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list)

    def evolve(self, **changes) -> "Record":
        return replace(self, **changes)


class RecordInvalid(ValueError):
    """A record breaks a validation rule; ``str()`` is the agent-facing message."""

    def __init__(self, field_name: str, reason: str, context: str = "record"):
        super().__init__(f"invalid record {context}: field `{field_name}` is invalid: {reason}")
        self.field = field_name
        self.reason = reason


# -- identifiers ------------------------------------------------------------------

_HEX = "[0-9a-fA-F]"
_HYPHENATED = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_UUID_FORMS = re.compile(
    rf"(?:(?P<h>{_HYPHENATED})|(?P<s>{_HEX}{{32}})|\{{(?P<b>{_HYPHENATED})\}}|urn:uuid:(?P<u>{_HYPHENATED}))")


def parse_uuid(text: str) -> str | None:
    """The canonical (lower-case, hyphenated) form of a non-nil UUID written in
    any of the hyphenated, simple, braced or URN forms; None otherwise."""
    m = _UUID_FORMS.fullmatch(text)
    if not m:
        return None
    digits = next(g for g in m.groups() if g).replace("-", "").lower()
    if digits == "0" * 32:
        return None
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class _UuidV7:
    """Time-ordered UUIDv7 with a 12-bit counter, so ids made in one
    millisecond by this process still sort in creation order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def __call__(self) -> str:
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms > self._last_ms:
                self._last_ms = ms
                self._counter = int.from_bytes(os.urandom(2), "big") & 0x3FF  # headroom to count up
            else:
                ms = self._last_ms
                self._counter += 1
                if self._counter > 0xFFF:  # counter spent: borrow the next millisecond
                    self._last_ms = ms = ms + 1
                    self._counter = 0
            rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
            value = (ms << 80) | (0x7 << 76) | (self._counter << 64) | (0b10 << 62) | rand_b
        digits = f"{value:032x}"
        return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


new_id = _UuidV7()


# -- timestamps -------------------------------------------------------------------

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))")


def now_ns() -> int:
    return time.time_ns()


def parse_timestamp(text: str) -> int | None:
    """RFC 3339 -> ns since the epoch (UTC); None when malformed."""
    m = _RFC3339.fullmatch(text)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None
    frac = (m.group(7) or "")[:9].ljust(9, "0")
    secs = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if not m.group(8):
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        if int(m.group(10)) > 23 or int(m.group(11)) > 59:
            return None
        secs -= offset if m.group(9) == "+" else -offset
    return secs * 1_000_000_000 + int(frac)


def format_timestamp(ns: int) -> str:
    """RFC 3339 UTC with trailing zeros of the fraction trimmed: 2026-08-13T00:47:39.61394Z."""
    secs, frac = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


# -- scopes -----------------------------------------------------------------------


def parse_scope(text: str) -> str | None:
    """``global`` or ``project:<name>`` (name: no whitespace, control characters or ':')."""
    if text == GLOBAL_SCOPE:
        return text
    if not text.startswith("project:"):
        return None
    name = text[len("project:"):]
    if not name or any(c.isspace() or c == ":" or _is_control(c) for c in name):
        return None
    return text


def project_name(folder_name: str) -> str:
    """The scope name of a project folder: whitespace, ':' and controls become '-'."""
    name = "".join("-" if (c.isspace() or c == ":" or _is_control(c)) else c for c in folder_name)
    return name or "local"


# -- text rules -------------------------------------------------------------------


# Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _is_control(c: str) -> bool:
    return _CONTROL.match(c) is not None


def text_problem(value: str) -> str | None:
    """Why ``value`` is not acceptable as a title, tag, alias, source reference or actor."""
    if not value:
        return "must not be empty"
    if value != value.strip():
        return "must not start or end with whitespace"
    if _CONTROL.search(value):
        return "must not contain control characters"
    return None


def normalize_text(text: str) -> str:
    """Whitespace runs folded to one space, ASCII lower-cased (duplicate checks)."""
    folded = " ".join(text.split())
    return folded.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def body_digest(body: str) -> str:
    return hashlib.blake2b(normalize_text(body).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# -- validation -------------------------------------------------------------------


def validate(record: Record, context: str = "record") -> None:
    """Raise :class:`RecordInvalid` when ``record`` breaks a rule of the format."""

    def fail(name: str, reason: str) -> None:
        raise RecordInvalid(name, reason, context)

    if parse_uuid(record.id) != record.id:
        fail("id", "must be a non-nil UUID in lower-case hyphenated form")
    problem = text_problem(record.title)
    if problem:
        fail("title", problem)
    if record.kind not in KINDS:
        fail("kind", "must be one of " + ", ".join(KINDS))
    if parse_scope(record.scope) is None:
        fail("scope", "must be `global` or `project:<name>`")
    if record.status not in STATUSES:
        fail("status", "must be one of " + ", ".join(STATUSES))
    if record.access not in ACCESS_CLASSES:
        fail("access", "must be `agent` or `human`")
    if record.updated_at < record.created_at:
        fail("updated_at", "must not be earlier than `created_at`")
    for name, values in (("tags", record.tags), ("aliases", record.aliases)):
        for value in values:
            problem = text_problem(value)
            if problem:
                fail(name, f"every entry {problem}")
    seen: set[str] = set()
    for sid in record.supersedes:
        if parse_uuid(sid) != sid:
            fail("supersedes", "entries must be record identifiers")
        if sid == record.id:
            fail("supersedes", "must not contain the record's own id")
        if sid in seen:
            fail("supersedes", "must not contain duplicates")
        seen.add(sid)
    if not record.sources:
        fail("sources", "must contain at least one source")
    for source in record.sources:
        if source.kind not in SOURCE_KINDS:
            fail("sources", "kind must be one of " + ", ".join(SOURCE_KINDS))
        for part in ("reference", "actor"):
            problem = text_problem(getattr(source, part))
            if problem:
                fail("sources", f"{part} {problem}")
    if not record.body.strip():
        fail("body", "must contain non-whitespace text")
    if "\x00" in record.body:
        fail("body", "must not contain NUL characters")


def check_provenance(record: Record, context: str = "record") -> None:
    """Proposals and approvals must cite where a memory came from, not an inference."""
    for source in record.sources:
        ref = source.reference
        if source.actor.lower() == "inference" or ref.startswith(("inference:", "inference://")):
            raise RecordInvalid("sources", "must cite an attributable source, not an inference", context)


__all__ = [
    "KINDS", "STATUSES", "ACCESS_CLASSES", "SOURCE_KINDS", "GLOBAL_SCOPE", "FORMAT_VERSION",
    "TRANSITIONS", "Source", "Record", "RecordInvalid", "parse_uuid", "new_id", "now_ns",
    "parse_timestamp", "format_timestamp", "parse_scope", "project_name", "text_problem",
    "normalize_text", "body_digest", "validate", "check_provenance",
]
