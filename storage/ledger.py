"""The savings ledger: one row per proxied model request, in the project's store.

Rows hold counts and names only (model, endpoint, token counts, the slice's
source paths) — never headers, keys or message bodies.  Reads aggregate by
(provider, model) so that callers can price each model at its own rate.

A row is written in two steps so that a crash loses nothing the client has
seen: :func:`insert` at the moment the response completes (with whatever is
known then; ``counted = 0`` while the token counts are pending), then
:func:`complete` once the counts are in.  Sessions are ``memstrata serve``
processes; each holds a lock while it runs (a byte-range lock beside a SQLite
index, :class:`SessionLocks`; a named advisory lock of its connection on
PostgreSQL, :class:`ServerSessionLocks`), so a later start can tell a crashed
session from a running one and close it.

Each row and session carries a user and a host label, so that one ledger
shared by a team (``serve --store postgresql://...``) can be read per person
and per machine.  The labels are what the serve process was told (or its OS
user and host name), never anything taken from a request.

The SQL is portable between SQLite and PostgreSQL (booleans are stored and
compared as 0/1 integers); where the engines differ (a day from a Unix time,
a JSON array's elements, ``greatest``, the new row's id) the branch is chosen
by ``store.dialect`` here.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

from .db import Store

SESSION_LOCK_FILE = "sessions.lock"


@dataclass
class LedgerEntry:
    time: float
    endpoint: str
    tokens_original: int
    tokens_forwarded: int
    provider: str | None = None
    model: str | None = None
    stream: bool = False
    status: int | None = None
    error: str | None = None
    compressed: bool = False
    input_tokens: int | None = None       # billed at the full input rate, as the provider reported
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    # Of cache_write_tokens, those written to Anthropic's 1-hour cache (billed 2x input, not 1.25x);
    # None: the provider reported no split (every write a 5-minute one).
    cache_write_1h_tokens: int | None = None
    sources: list[str] = field(default_factory=list)
    slice_symbols: int | None = None
    answer_symbols: int | None = None
    symbol_hits: int | None = None
    duration_ms: float | None = None
    session_id: int | None = None
    mode: str | None = None
    conversation: str | None = None
    compaction: bool = False
    prefix_invalidated_tokens: int = 0
    miss_write_tokens: int = 0   # re-billed as cache writes because the proxy changed the prefix
    miss_input_tokens: int = 0   # re-billed at the full input rate for the same reason
    # The counterfactual: how the provider would have billed the unmodified request's prompt.
    cf_input_tokens: int | None = None
    cf_cache_read_tokens: int | None = None
    cf_cache_write_tokens: int | None = None
    cf_cache_write_1h_tokens: int | None = None   # ... of those writes, the 1-hour ones
    counted: bool = True
    user_label: str | None = None   # who ran the serve process that recorded the row (never a key)
    host_label: str | None = None   # ... and on which machine
    id: int | None = None

    @property
    def tokens_saved(self) -> int:
        return self.tokens_original - self.tokens_forwarded

    @property
    def prompt_tokens_reported(self) -> int | None:
        """Every prompt token the provider billed: full-rate input, cache reads and cache writes."""
        if self.input_tokens is None:
            return None
        return self.input_tokens + (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)


@dataclass
class ModelTotals:
    """Aggregates for one (provider, model) — and one UTC day when asked — over a window.

    Token sums cover requests the provider accepted (2xx); a refused request
    saved nothing because nothing was billed.  ``saved_fresh/_read/_write``
    split each request's tokens saved in the proportions the provider would
    have billed the request had the proxy not broken its cached prefix (the
    reported mix with the ``miss_*`` tokens moved back to cache reads), so
    that pricing them is a sum of rate × tokens.  The symbol sums cover
    requests whose answer was measured against a slice.  ``cf_*`` sum the rows
    priced against the counterfactual bill; ``est_*`` repeat the estimate's
    split for the rows that are not (written before it existed, or without
    reported usage).
    """

    provider: str | None
    model: str | None
    day: str | None = None
    label: str | None = None      # the group's user or host label when grouped by one
    requests: int = 0
    ok_requests: int = 0
    compressed_requests: int = 0
    tokens_original: int = 0
    tokens_forwarded: int = 0
    tokens_saved: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    usage_requests: int = 0
    saved_fresh: float = 0.0
    saved_read: float = 0.0
    saved_write: float = 0.0
    compactions: int = 0
    prefix_invalidated_tokens: int = 0
    miss_write_tokens: int = 0
    miss_input_tokens: int = 0
    cf_requests: int = 0          # 2xx rows priced against the counterfactual bill
    cf_input_tokens: int = 0      # ... the unmodified requests as the provider would have billed them
    cf_cache_read_tokens: int = 0
    cf_cache_write_tokens: int = 0
    cf_reported_input: int = 0    # ... and what it reported for the forwarded ones
    cf_reported_read: int = 0
    cf_reported_write: int = 0
    est_fresh: float = 0.0        # the per-request estimate, for rows without a counterfactual
    est_read: float = 0.0
    est_write: float = 0.0
    est_miss_write: int = 0
    est_miss_input: int = 0
    measured: int = 0
    slice_symbols: int = 0
    answer_symbols: int = 0
    symbol_hits: int = 0
    # The 1-hour part of each write figure above (Anthropic's 1-hour cache writes cost more than
    # 5-minute ones): of the reported writes, of saved_write, of the misses re-billed as writes
    # (in the proportion of the row's reported writes), of the counterfactual's writes, of the
    # reported writes of rows priced against it, and of the estimate's.
    cache_write_1h_tokens: int = 0
    saved_write_1h: float = 0.0
    miss_write_1h: float = 0.0
    cf_cache_write_1h_tokens: int = 0
    cf_reported_write_1h: int = 0
    est_write_1h: float = 0.0
    est_miss_write_1h: float = 0.0


# ModelTotals' sums that are shares of a row's tokens (fractional), not whole token counts.
_FRACTIONAL = frozenset({"saved_fresh", "saved_read", "saved_write", "est_fresh", "est_read", "est_write",
                         "saved_write_1h", "miss_write_1h", "est_write_1h", "est_miss_write_1h"})


@dataclass
class Session:
    id: int
    started: float
    ended: float | None
    pid: int | None
    kind: str = "serve"
    address: str | None = None
    crashed: bool = False
    user_label: str | None = None
    host_label: str | None = None

    @property
    def running(self) -> bool:
        return self.ended is None


_COLUMNS = (
    "session_id", "time", "endpoint", "provider", "model", "stream", "status", "error", "compressed",
    "tokens_original", "tokens_forwarded", "tokens_saved", "input_tokens", "output_tokens", "sources",
    "slice_symbols", "answer_symbols", "symbol_hits", "duration_ms", "cache_read_tokens", "cache_write_tokens",
    "mode", "conversation", "compaction", "prefix_invalidated_tokens", "miss_write_tokens", "miss_input_tokens",
    "counted", "cf_input_tokens", "cf_cache_read_tokens", "cf_cache_write_tokens", "user_label", "host_label",
    "cache_write_1h_tokens", "cf_cache_write_1h_tokens",
)
_BOOLS = ("stream", "compressed", "compaction", "counted")
# What complete() may fill in once the counts are known.
_COMPLETED = ("tokens_original", "tokens_forwarded", "tokens_saved", "sources", "slice_symbols",
              "answer_symbols", "symbol_hits", "counted", "cf_input_tokens", "cf_cache_read_tokens",
              "cf_cache_write_tokens", "cf_cache_write_1h_tokens")


def _value(e: LedgerEntry, col: str):
    if col == "tokens_saved":
        return e.tokens_saved
    v = getattr(e, col)
    if col in _BOOLS:
        return int(bool(v))
    if col == "sources":
        return json.dumps(v) if v else None
    return v


def _row(e: LedgerEntry) -> tuple:
    return tuple(_value(e, c) for c in _COLUMNS)


def _dialect(store_or_conn) -> str:
    return getattr(store_or_conn, "dialect", "sqlite")


def _insert_id(conn, sql: str, params: tuple) -> int:
    """Run an INSERT and return the new row's id (PostgreSQL has no ``lastrowid``)."""
    if _dialect(conn) == "sqlite":
        return int(conn.execute(sql, params).lastrowid)
    return int(conn.execute(sql + " RETURNING id", params).fetchone()[0])


def record(store: Store, entries: Iterable[LedgerEntry]) -> int:
    """Append complete entries in one transaction (setting their ``id``); returns how many."""
    entries = list(entries)
    if not entries:
        return 0
    sql = f"INSERT INTO ledger({','.join(_COLUMNS)}) VALUES ({','.join('?' * len(_COLUMNS))})"
    with store.write() as conn:
        for e in entries:
            e.id = _insert_id(conn, sql, _row(e))
    return len(entries)


def insert(store: Store, entry: LedgerEntry) -> int:
    """Write one entry now (its own transaction) and return its row id."""
    record(store, [entry])
    return entry.id


def complete(store: Store, entries: Iterable[LedgerEntry]) -> int:
    """Fill in the counts of rows written by :func:`insert` (entries carry their ``id``)."""
    rows = [(*(_value(e, c) for c in _COMPLETED), e.id) for e in entries if e.id is not None]
    if not rows:
        return 0
    sets = ", ".join(f"{c} = ?" for c in _COMPLETED)
    with store.write() as conn:
        conn.executemany(f"UPDATE ledger SET {sets} WHERE id = ?", rows)
    return len(rows)


# -- sessions -------------------------------------------------------------------------


class SessionLocks:
    """Which serve sessions are alive, told by POSIX record locks on one file.

    A running session holds the one-byte range at offset ``session id`` of
    ``.memstrata/sessions.lock``.  The kernel drops a process's record locks
    when it dies, however it dies, so "nobody holds byte N" means session N is
    gone.  Closing *any* descriptor of the file drops every lock the process
    holds on it, so each process keeps one descriptor per file for good.
    """

    _registry: dict[Path, "SessionLocks"] = {}
    _registry_lock = threading.Lock()

    def __new__(cls, path: Path):
        path = Path(path).resolve()
        with cls._registry_lock:
            inst = cls._registry.get(path)
            if inst is None:
                inst = super().__new__(cls)
                inst.path = path
                inst._fd = None
                inst._held = set()
                inst._lock = threading.Lock()
                cls._registry[path] = inst
            return inst

    @classmethod
    def for_store(cls, store: Store) -> SessionLocks | ServerSessionLocks:
        if _dialect(store) != "sqlite":
            return ServerSessionLocks.for_store(store)
        return cls(store.path.parent / SESSION_LOCK_FILE)

    def _descriptor(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except PermissionError:  # a reader without write access can still test the locks
                self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def hold(self, session_id: int) -> bool:
        with self._lock:
            try:
                fcntl.lockf(self._descriptor(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, session_id)
            except OSError:
                return False
            self._held.add(session_id)
            return True

    def release(self, session_id: int) -> None:
        with self._lock:
            if session_id in self._held and self._fd is not None:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, session_id)
                self._held.discard(session_id)

    def alive(self, session_id: int) -> bool:
        """True while the process that started the session still runs it."""
        with self._lock:
            if session_id in self._held:
                return True
            try:
                fd = self._descriptor()
            except OSError:
                return False  # no lock file and none can be made: nobody holds a lock in it
            try:
                # A shared lock conflicts with the holder's exclusive one and needs only read access.
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, session_id)
            except OSError as exc:
                return exc.errno in (errno.EAGAIN, errno.EACCES)
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, session_id)
            return False


class ServerSessionLocks:
    """The same as :class:`SessionLocks` for a store whose server keeps locks
    (PostgreSQL): session N is alive while some connection holds the named
    lock ``ledger-session-N``.  The server drops a connection's locks when the
    connection ends, however its process died, so a killed ``serve`` leaves
    none behind.  The locks are held by the connection of the store that
    started the session, which lives as long as the serve process.
    """

    _registry: weakref.WeakKeyDictionary[object, ServerSessionLocks] = weakref.WeakKeyDictionary()
    _registry_lock = threading.Lock()

    def __init__(self, store):
        self.store = store
        self._held: set[int] = set()
        self._lock = threading.Lock()

    @classmethod
    def for_store(cls, store) -> ServerSessionLocks:
        with cls._registry_lock:
            inst = cls._registry.get(store)
            if inst is None:
                inst = cls._registry[store] = cls(store)
            return inst

    @staticmethod
    def name(session_id: int) -> str:
        return f"ledger-session-{int(session_id)}"

    def hold(self, session_id: int) -> bool:
        with self._lock:
            if not self.store.try_lock(self.name(session_id)):
                return False
            self._held.add(session_id)
            return True

    def release(self, session_id: int) -> None:
        with self._lock:
            if session_id in self._held:
                self.store.unlock(self.name(session_id))
                self._held.discard(session_id)

    def alive(self, session_id: int) -> bool:
        with self._lock:
            if session_id in self._held:
                return True
        return self.store.locked_elsewhere(self.name(session_id))


def start_session(store: Store, started: float, pid: int | None = None, *, address: str | None = None,
                  kind: str = "serve", user_label: str | None = None, host_label: str | None = None) -> int:
    """Record a new session and hold its lock; first close sessions whose process died."""
    close_dead_sessions(store)
    locks = SessionLocks.for_store(store)
    session_id = None
    try:
        with store.write() as conn:
            session_id = _insert_id(
                conn, "INSERT INTO ledger_sessions(started, pid, kind, address, user_label, host_label) "
                "VALUES (?, ?, ?, ?, ?, ?)", (started, pid, kind, address, user_label, host_label))
            # Held before the row is committed: a process starting at the same moment
            # must never see this session unended and unlocked, and close it as dead.
            locks.hold(session_id)
    except BaseException:
        if session_id is not None:
            locks.release(session_id)
        raise
    return session_id


def end_session(store: Store, session_id: int, ended: float) -> None:
    with store.write() as conn:
        conn.execute("UPDATE ledger_sessions SET ended = ? WHERE id = ? AND ended IS NULL", (ended, session_id))
    SessionLocks.for_store(store).release(session_id)


def close_dead_sessions(store: Store) -> list[int]:
    """End every unended session whose process is gone, at its last recorded request.

    Returns the ids closed.  Their rows stay as they were written: a row whose
    counts were still pending keeps ``counted = 0``.
    """
    locks = SessionLocks.for_store(store)
    open_ids = [int(r[0]) for r in store.execute("SELECT id FROM ledger_sessions WHERE ended IS NULL")]
    dead = [sid for sid in open_ids if not locks.alive(sid)]
    if not dead or store.readonly:
        return []
    greatest = "max" if _dialect(store) == "sqlite" else "greatest"  # the two-argument maximum
    with store.write() as conn:
        for sid in dead:
            conn.execute(
                f"""UPDATE ledger_sessions
                   SET ended = {greatest}(started, coalesce((SELECT max(time) FROM ledger WHERE session_id = ?),
                                                           started)),
                       crashed = 1
                   WHERE id = ? AND ended IS NULL""", (sid, sid))
    return dead


def _session(r) -> Session:
    return Session(int(r[0]), float(r[1]), r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8])


_SESSION_SQL = "SELECT id, started, ended, pid, kind, address, crashed, user_label, host_label FROM ledger_sessions"


def sessions(store: Store, limit: int = 20) -> list[Session]:
    """The most recent sessions, newest first."""
    return [_session(r) for r in store.execute(f"{_SESSION_SQL} ORDER BY started DESC, id DESC LIMIT ?", (limit,))]


def session(store: Store, session_id: int) -> Session | None:
    rows = store.execute(f"{_SESSION_SQL} WHERE id = ?", (session_id,))
    return _session(rows[0]) if rows else None


def running_sessions(store: Store) -> list[Session]:
    """Sessions whose serve process is alive now, newest first."""
    locks = SessionLocks.for_store(store)
    rows = store.execute(f"{_SESSION_SQL} WHERE ended IS NULL ORDER BY started DESC, id DESC")
    return [s for s in map(_session, rows) if locks.alive(s.id)]


def latest_session(store: Store) -> tuple[int, float, float | None] | None:
    """(id, started, ended) of the most recent serve session, if any."""
    rows = store.execute("SELECT id, started, ended FROM ledger_sessions ORDER BY started DESC, id DESC LIMIT 1")
    return (int(rows[0][0]), float(rows[0][1]), rows[0][2]) if rows else None


# -- aggregates ---------------------------------------------------------------------


def _where(since: float | None, until: float | None, session_ids: Iterable[int] | None,
           row_ids: Iterable[int] | None = None) -> tuple[str, list]:
    clauses, params = [], []
    for column, ids in (("session_id", session_ids), ("id", row_ids)):
        if ids is not None:
            ids = [int(i) for i in ids]
            clauses.append(f"{column} IN ({','.join('?' * len(ids))})" if ids else "1 = 0")
            params.extend(ids)
    if since is not None:
        clauses.append("time >= ?")
        params.append(since)
    if until is not None:
        clauses.append("time < ?")
        params.append(until)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


# What totals() may group by besides (provider, model), as the column holding it.
LABELS = {"user": "user_label", "host": "host_label"}


def _day(store) -> str:
    """The UTC day (YYYY-MM-DD) of the row's Unix time."""
    if _dialect(store) == "sqlite":
        return "date(time, 'unixepoch')"
    return "to_char(to_timestamp(time) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


def totals(store: Store, since: float | None = None, until: float | None = None, *,
           session_ids: Iterable[int] | None = None, row_ids: Iterable[int] | None = None,
           by_day: bool = False, by_label: str | None = None) -> list[ModelTotals]:
    """Per-(provider, model) sums over rows with ``since <= time < until`` (and in
    ``session_ids`` / ``row_ids`` when given); with ``by_day``, per UTC day as well;
    with ``by_label`` (a key of :data:`LABELS`), per user or host label as well."""
    where, params = _where(since, until, session_ids, row_ids)
    day = _day(store) if by_day else "CAST(NULL AS TEXT)"
    if by_label is not None and by_label not in LABELS:
        raise ValueError(f"totals can group by {', '.join(LABELS)}, not {by_label!r}")
    label = LABELS[by_label] if by_label else "CAST(NULL AS TEXT)"
    sql = f"""
        SELECT provider, model, {day} AS day, {label} AS label,
               count(*),
               sum(ok),
               sum(CASE WHEN ok = 1 THEN compressed ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN tokens_original ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN tokens_forwarded ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN tokens_saved ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN coalesce(input_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN coalesce(output_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN coalesce(cache_read_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN coalesce(cache_write_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 AND input_tokens IS NOT NULL THEN 1 ELSE 0 END),
               sum(CASE WHEN ok = 0 THEN 0
                        WHEN billed > 0 THEN saved_f * (coalesce(input_tokens, 0) - miss_input_tokens) / billed
                        ELSE tokens_saved END),
               sum(CASE WHEN ok = 1 AND billed > 0
                        THEN saved_f * (coalesce(cache_read_tokens, 0) + miss_input_tokens
                                             + miss_write_tokens) / billed
                        ELSE 0 END),
               sum(CASE WHEN ok = 1 AND billed > 0
                        THEN saved_f * (coalesce(cache_write_tokens, 0) - miss_write_tokens) / billed
                        ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN compaction ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN prefix_invalidated_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN miss_write_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN miss_input_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN 1 ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN cf_input_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN cf_cache_read_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN cf_cache_write_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN coalesce(input_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN coalesce(cache_read_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN coalesce(cache_write_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 0 OR cf = 1 THEN 0
                        WHEN billed > 0 THEN saved_f * (coalesce(input_tokens, 0) - miss_input_tokens) / billed
                        ELSE tokens_saved END),
               sum(CASE WHEN ok = 1 AND cf = 0 AND billed > 0
                        THEN saved_f * (coalesce(cache_read_tokens, 0) + miss_input_tokens
                                             + miss_write_tokens) / billed
                        ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 0 AND billed > 0
                        THEN saved_f * (coalesce(cache_write_tokens, 0) - miss_write_tokens) / billed
                        ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 0 THEN miss_write_tokens ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 0 THEN miss_input_tokens ELSE 0 END),
               sum(measured),
               sum(CASE WHEN measured = 1 THEN slice_symbols ELSE 0 END),
               sum(CASE WHEN measured = 1 THEN answer_symbols ELSE 0 END),
               sum(CASE WHEN measured = 1 THEN symbol_hits ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN coalesce(cache_write_1h_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 AND billed > 0
                        THEN saved_f * (coalesce(cache_write_tokens, 0) - miss_write_tokens) / billed * f1h
                        ELSE 0 END),
               sum(CASE WHEN ok = 1 THEN miss_write_tokens * f1h ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN coalesce(cf_cache_write_1h_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 1 THEN coalesce(cache_write_1h_tokens, 0) ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 0 AND billed > 0
                        THEN saved_f * (coalesce(cache_write_tokens, 0) - miss_write_tokens) / billed * f1h
                        ELSE 0 END),
               sum(CASE WHEN ok = 1 AND cf = 0 THEN miss_write_tokens * f1h ELSE 0 END)
        FROM (
            SELECT *,
                   CASE WHEN status BETWEEN 200 AND 299 AND coalesce(error, '') <> 'not_an_answer'
                        THEN 1 ELSE 0 END AS ok,
                   CASE WHEN cf_input_tokens IS NOT NULL THEN 1 ELSE 0 END AS cf,
                   CAST(coalesce(input_tokens, 0) + coalesce(cache_read_tokens, 0)
                        + coalesce(cache_write_tokens, 0) AS DOUBLE PRECISION) AS billed,
                   CAST(tokens_saved AS DOUBLE PRECISION) AS saved_f,
                   -- the 1-hour share of the reported writes of the row: the part of its
                   -- write-priced figures (saved, missed) billed at the 1-hour rate (no quote
                   -- marks in these comments: the PostgreSQL placeholder rewrite reads them)
                   CASE WHEN coalesce(cache_write_tokens, 0) > 0
                        THEN CAST(coalesce(cache_write_1h_tokens, 0) AS DOUBLE PRECISION) / cache_write_tokens
                        ELSE 0 END AS f1h,
                   CASE WHEN slice_symbols IS NOT NULL AND answer_symbols IS NOT NULL
                             AND symbol_hits IS NOT NULL THEN 1 ELSE 0 END AS measured
            FROM ledger{where}
        ) AS ledger_rows
        GROUP BY provider, model, day, label
        ORDER BY day, label, count(*) DESC, sum(tokens_original) DESC
    """
    out = []
    names = [f.name for f in fields(ModelTotals)][4:]
    for r in store.execute(sql, tuple(params)):
        values = {n: (float(v or 0) if n in _FRACTIONAL else int(v or 0)) for n, v in zip(names, r[4:])}
        out.append(ModelTotals(r[0], r[1], r[2], r[3], **values))
    return out


def _entry(d: dict) -> LedgerEntry:
    d.pop("tokens_saved")
    for k in _BOOLS:
        d[k] = bool(d[k])
    d["sources"] = json.loads(d["sources"]) if d["sources"] else []
    return LedgerEntry(**d)


def entries(store: Store, since: float | None = None, limit: int = 100, *,
            session_ids: Iterable[int] | None = None) -> list[LedgerEntry]:
    """The most recent rows, newest last (for the CLI, the dashboard and tests)."""
    where, params = _where(since, None, session_ids)
    rows = store.execute(f"SELECT id, {','.join(_COLUMNS)} FROM ledger{where} ORDER BY id DESC LIMIT ?",
                         (*params, limit))
    return [_entry(dict(zip(("id", *_COLUMNS), r))) for r in reversed(rows)]


def top_sources(store: Store, since: float | None = None, limit: int = 10) -> list[tuple[str, int]]:
    """Files most often in the slices sent upstream: (path, requests), most first."""
    where, params = _where(since, None, None)
    # The elements of each row's JSON array of paths, one row each.
    elements = ("json_each(l.sources) AS j" if _dialect(store) == "sqlite"
                else "json_array_elements_text(CAST(l.sources AS json)) AS j(value)")
    sql = f"""
        SELECT j.value, count(*) FROM (SELECT sources FROM ledger{where}) AS l, {elements}
        WHERE l.sources IS NOT NULL
        GROUP BY j.value ORDER BY count(*) DESC, j.value LIMIT ?
    """
    return [(str(r[0]), int(r[1])) for r in store.execute(sql, (*params, limit))]


def count(store: Store, *, uncounted: bool = False) -> int:
    """Rows in the ledger (``uncounted``: only rows whose token counts never arrived)."""
    try:
        sql = "SELECT count(*) FROM ledger" + (" WHERE counted = 0" if uncounted else "")
        return int(store.execute(sql)[0][0])
    except sqlite3.OperationalError:  # read-only store of an older schema
        return 0


def shared_projects(url: str) -> list[str]:
    """The projects a shared PostgreSQL store holds (their ledgers are read one store each),
    found without opening any of them, so a reader needs no project of its own."""
    from .postgres import list_projects

    return list_projects(url)
