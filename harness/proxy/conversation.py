"""What the proxy forwarded before, per conversation: the memory behind prefix stability.

A conversation is recognised by its system prompt and first message.  For
each message it has forwarded, the proxy keeps a :class:`Record`: a digest of
the message as the client sent it (``cache_control`` markers left out, since
clients move them every turn), its token count, and the pieces of code in it
with the form they were forwarded in.  Only replacement texts are stored (a
numbered read kept whole is one: its text without the padding before its line
numbers); a message forwarded unchanged costs a few numbers.

The next request of the conversation resends those messages; the proxy
matches the longest prefix of digests and forwards that prefix exactly as
before.  Diverging histories (an edited earlier turn, a retried branch) get
a branch of their own, a few per conversation.

Bounded: at most ``max_conversations`` conversations and ``max_bytes`` of
stored text, least recently used evicted first.  Safe under concurrency: the
store's own lock is held only to find or insert an entry; each conversation
has its own lock, so requests of different conversations never wait for
each other, and two requests of one conversation take turns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from .memo import SizedLRU

MAX_BRANCHES = 4


@dataclass(frozen=True)
class PieceState:
    slot: tuple               # where the piece's text sits in the message
    start: int
    end: int                  # char span of the code in that text
    kind: str                 # result | paste
    path: str                 # as shown in markers
    digest: int               # hash of the code as sent
    lines: tuple[int, int]    # file lines it covers
    tokens: int               # tokens of the code as sent
    tool_use_id: str | None
    asked: str                # the question when it arrived (kept in mind when compacting it later)
    language: str = ""
    is_test: bool = False
    numbered: bool = False    # cat -n style: every line carries its file line number
    form: str | None = None   # what replaces the code when forwarded; None = as sent
    status: str = "whole"     # whole | compressed | pointer
    form_tokens: int = 0
    kept: tuple = ()          # qualnames of the definitions a compressed form keeps
    pointed_at: tuple = ()    # a pointer form: the tool use ids of the earlier reads it points into
    since: int = 0            # a compaction at this many messages adopted this form ...
    before: "PieceState | None" = None  # ... replacing this one, still what a shorter request gets

    @property
    def forwarded_tokens(self) -> int:
        return self.tokens if self.form is None else self.form_tokens


@dataclass(frozen=True)
class Record:
    key: bytes                # digest of the message as sent, without cache_control
    role: str
    tokens: int               # tokens of the message as forwarded
    pieces: tuple[PieceState, ...] = ()
    said: str = ""            # assistant text and tool inputs; a user's real text
    real_user: bool = False   # a user message with the user's own words (starts a turn)
    tool_uses: tuple = ()     # ToolUse records of an assistant message

    @property
    def changed(self) -> bool:
        return any(p.form is not None for p in self.pieces)

    def size(self) -> int:
        total = 160 + len(self.said)
        for p in self.pieces:
            while p is not None:
                total += 96 + len(p.asked) + len(p.form or "")
                p = p.before
        return total


def as_of(records: tuple[Record, ...], count: int) -> tuple[Record, ...]:
    """The first ``count`` records as a request of ``count`` messages sees them: forms adopted by a
    compaction at a later point are rolled back, so every request's forms depend on its own
    messages only (a retried or concurrent shorter request gets what it got the first time)."""
    out = []
    for rec in records[:count]:
        pieces = []
        for p in rec.pieces:
            while p.since > count and p.before is not None:
                p = p.before
            pieces.append(p)
        if any(a is not b for a, b in zip(pieces, rec.pieces)):
            delta = sum(a.forwarded_tokens - b.forwarded_tokens for a, b in zip(rec.pieces, pieces))
            rec = dataclasses.replace(rec, pieces=tuple(pieces), tokens=rec.tokens - delta)
        out.append(rec)
    return tuple(out)


@dataclass
class Branch:
    records: tuple[Record, ...]
    used: float = field(default_factory=time.monotonic)

    def match(self, keys: list[bytes]) -> int:
        n = 0
        for rec, key in zip(self.records, keys):
            if rec.key != key:
                break
            n += 1
        return n


class Conversation:
    def __init__(self, cid: str):
        self.id = cid
        self.lock = threading.Lock()
        self.branches: list[Branch] = []
        self.bytes = 0

    def best(self, keys: list[bytes]) -> tuple[Branch | None, int]:
        best, n = None, 0
        for b in self.branches:
            m = b.match(keys)
            if best is None or m > n:
                best, n = b, m
        return best, n

    def save(self, base: Branch | None, matched: int, records: tuple[Record, ...]) -> None:
        """Store ``records``: extend ``base`` when they continue it, else start a branch."""
        if base is not None and matched >= len(base.records):
            base.records = records
            base.used = time.monotonic()
        elif base is not None and len(records) <= matched:
            base.used = time.monotonic()  # a shorter resend of a known prefix: nothing new
            return
        else:
            self.branches.append(Branch(records))
            if len(self.branches) > MAX_BRANCHES:
                self.branches.sort(key=lambda b: b.used)
                self.branches.pop(0)
        self.bytes = sum(r.size() for b in self.branches for r in b.records)


class ConversationStore:
    def __init__(self, max_conversations: int = 512, max_bytes: int = 64 * 1024 * 1024):
        self.max_conversations = max_conversations
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[str, Conversation] = OrderedDict()

    def get(self, cid: str) -> Conversation:
        with self._lock:
            conv = self._items.get(cid)
            if conv is None:
                conv = self._items[cid] = Conversation(cid)
            self._items.move_to_end(cid)
            return conv

    def trim(self) -> None:
        """Evict least recently used conversations until within bounds."""
        with self._lock:
            total = sum(c.bytes for c in self._items.values())
            while self._items and (len(self._items) > self.max_conversations or total > self.max_bytes):
                _, old = self._items.popitem(last=False)
                total -= old.bytes

    def __len__(self) -> int:
        return len(self._items)

    def total_bytes(self) -> int:
        with self._lock:
            return sum(c.bytes for c in self._items.values())


# -- digests ----------------------------------------------------------------------


def message_key(msg) -> bytes:
    """A digest of a message as sent, ignoring where ``cache_control`` markers sit.

    Remembered by the message's exact value less its markers (the digest leaves them out): an
    agent resends every earlier message on each turn, and looking a message up (its texts hashed
    once, compared on a hit) costs a fraction of writing it out and digesting it again.  Clients
    mark the newest message and unmark it on the next turn, so the marked and the unmarked copy
    of a large tool result are one entry, digested once."""
    try:
        size = [0, False]
        frozen = _frozen(msg, 0, size)
    except _Unfrozen:
        return _repr_digest(msg)
    key = _keys.get(frozen)
    if key is None:
        key = _key(msg, frozen, size)
        _keys.put(frozen, key, size[0])
    return key


def _digest(msg) -> bytes:
    """:func:`message_key` without the memo."""
    size = [0, False]
    try:
        frozen = _frozen(msg, 0, size)
    except _Unfrozen:
        return _repr_digest(msg)
    return _key(msg, frozen, size)


def _repr_digest(msg) -> bytes:
    """The digest of a message without a frozen form (an unusual type or nesting)."""
    text = repr(msg)  # walks the message in C; most messages carry no marker
    if "cache_control" in text:
        text = repr(_without_markers(msg))
    return _hash(text)


def _key(msg, frozen, size: list) -> bytes:
    """The digest of a message frozen whole (so whether a marker is there is known).

    A small message is written out by repr, in C.  A large one is digested from its frozen form:
    repr escapes every newline and tab of a tool result's text into a new string, where the
    frozen form's strings are hashed as they are (a file read of 20 KB: 70 -> 20 us).  Which of
    the two a message gets depends on its value alone, and the frozen form's encoding starts
    with a NUL that no repr holds, so equal values get equal digests and different values
    different ones, as with repr alone."""
    if size[0] >= FROZEN_DIGEST_CHARS:
        return _frozen_digest(frozen)
    return _hash(repr(_without_markers(msg)) if size[1] else repr(msg))


def _hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


FROZEN_DIGEST_CHARS = 4096


def _frozen_digest(frozen) -> bytes:
    """blake2b of a prefix-free encoding of a frozen value: each string by its length, each
    container by its size, each number by its repr, so no two frozen values encode alike."""
    h = hashlib.blake2b(b"\0F", digest_size=16)
    update = h.update
    stack = [frozen]
    while stack:
        v = stack.pop()
        if type(v) is str:
            data = v.encode("utf-8", "surrogatepass")
            update(b"s%d:" % len(data))
            update(data)
            continue
        tag = v[0]
        if tag == _DICT:
            update(b"{%d" % (len(v) - 1))
            for k, x in reversed(v[1:]):
                stack.append(x)
                stack.append(k)
        elif tag == _LIST:
            update(b"[%d" % (len(v) - 1))
            stack.extend(reversed(v[1:]))
        elif tag == _INT:
            update(b"i%d;" % v[1])
        elif tag == _FLOAT:
            update(b"f%s;" % v[1].encode())
        elif tag == _BOOL:
            update(b"T;" if v[1] else b"F;")
        else:
            update(b"N;")
    return h.digest()


MAX_KEYED_CHARS = 32_000_000   # text held by the digests remembered (evicted oldest first)
_keys = SizedLRU(None, MAX_KEYED_CHARS)   # frozen message -> digest, bounded by the text held
# Tags of the frozen form: distinct values freeze to distinct tuples, exactly as their reprs
# without markers differ (1, 1.0 and True are equal in Python, not in a message).  A str stands
# for itself.  ``cache_control`` entries are left out, as _without_markers leaves them out (at
# every depth it strips: deeper values have no frozen form).
_DICT, _LIST, _INT, _FLOAT, _BOOL, _NONE = range(6)


class _Unfrozen(Exception):
    """A value without a frozen form (an unusual type or nesting): digested without the memo."""


def _frozen(value, depth: int, size: list):
    t = type(value)
    if t is str:
        size[0] += len(value)
        return value
    if depth > 64:
        raise _Unfrozen
    if t is dict:
        items = [_DICT]
        for k, v in value.items():
            if type(k) is not str:
                raise _Unfrozen
            if k == "cache_control":
                size[1] = True   # a marker: the digest is of the message without it
                continue
            size[0] += len(k)
            items.append((k, _frozen(v, depth + 1, size)))
        return tuple(items)
    if t is list:
        return (_LIST, *[_frozen(v, depth + 1, size) for v in value])
    if t is int:
        return (_INT, value)
    if t is bool:
        return (_BOOL, value)
    if t is float:
        return (_FLOAT, repr(value))
    if value is None:
        return (_NONE,)
    raise _Unfrozen


def _without_markers(value, depth: int = 0):
    if depth > 64:  # the proxy refuses deeper bodies before this runs; stay finite regardless
        return value
    if isinstance(value, dict):
        return {k: _without_markers(v, depth + 1) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_markers(v, depth + 1) for v in value]
    return value


def _feed(h, value) -> None:
    # An explicit stack, so a deeply nested body cannot exhaust the interpreter's recursion.
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            h.update(b"s%d:" % len(v))
            h.update(v.encode("utf-8", "surrogatepass"))
        elif isinstance(v, dict):
            h.update(b"{")
            items = [(k, x) for k, x in v.items() if k != "cache_control"]
            h.update(b"%d" % len(items))
            for k, x in reversed(items):
                stack.append(x)
                stack.append(str(k))
        elif isinstance(v, list):
            h.update(b"[%d" % len(v))
            stack.extend(reversed(v))
        else:
            h.update(repr(v).encode())
            h.update(b";")


def conversation_id(api: str, system, first_message) -> str:
    """Stable for the whole conversation: the API, the system prompt and the first message."""
    h = hashlib.blake2b(digest_size=12)
    h.update(api.encode())
    _feed(h, system if system is not None else "")
    _feed(h, first_message if first_message is not None else "")
    return h.hexdigest()
