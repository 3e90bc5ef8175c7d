"""A Strata database on MemStrata's store: a versioned, branchable record store.

One commit clock per database: every mutation is one SQLite transaction that
takes the next version and writes rows stamped with it.  Nothing is updated
in place; a read "as of" version T takes, for each key, the newest row at or
below T, so every retained version stays readable.

A branch is a timeline.  A fork records its parent and the parent version it
was taken at and starts empty: reads fall through to the parent's rows up to
that version (and on up the ancestry), so forking costs a few rows whatever
the size of the data.  A :class:`View` is that chain of (branch, bound) levels
for one read; the leaf shadows its ancestors key by key, tombstones included.

What the rows mean (KV bytes, JSON documents, vectors, graphs) is the
caller's business: this module stores opaque ``value`` bytes and an ``aux``
text per (space, kind, key, version), plus hash-chained event logs.

A durable database is a folder holding ``strata.db`` and a lock file, and
several processes may serve it at once, as they may with the real engine.
Each command runs holding the lock file (a POSIX record lock, which the
kernel drops when its holder dies, however it dies; see :meth:`hold`),
so commands of different processes never interleave: a command that reads
before it writes (the event chain, "created" or "updated") reads what the
last command of any process left.  What this process remembers between
commands (the clock, branches, spaces, remembered reads) is thrown away
whenever another process changed the database since (the change counter
in the lock file says so).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import heapq
import mmap
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple
from pathlib import Path

from memstrata.storage.db import Store, StoreError
from .schema import STRATA_SCHEMA

DB_FILE = "strata.db"
LOCK_FILE = "strata.lock"
DEFAULT_BRANCH = "default"
DEFAULT_SPACE = "default"

# Entity kinds (the ``kind`` column).
KV, JSON, VECTOR_COLLECTION, VECTOR, GRAPH, GRAPH_NODE, GRAPH_OUT, GRAPH_IN, SPACE = range(1, 10)
# JSON index definitions (kept apart from the range above, which other kinds extend).
JSON_INDEX = 20
# A graph's ontology record, keyed by the graph name (issue 23).
GRAPH_ONTOLOGY = 21
# Promotion records of a target branch, in the registry space (issue 23).
MERGE = 22
# Where a space's event log starts (aux: the stored sequence its sequence 0 is): a space
# deletion restarts the log at 0 while the rows of the old one stay for older reads and forks.
EVENT_LOG = 23

# Space records live outside every product space.
REGISTRY_SPACE = ""

# A fresh database has used versions 1 and 2 (engine set-up), as the real one does.
SETUP_VERSIONS = 2
# Versions a fork (or a new root branch) consumes, the first two on its own timeline.
FORK_VERSIONS = 3
FORK_OWN_VERSIONS = 2
# Versions a fork refused for its anchor consumes, and a branch deletion.
FAILED_FORK_VERSIONS = 2
DELETE_VERSIONS = 2

# Remembered point reads (see StrataStore.get): how many, and the largest value kept.
_MEMO_ENTRIES = 100_000
_MEMO_VALUE_BYTES = 16_384
_NO_ENTRY = object()
_MEMO_COMMIT_ROWS = 16  # a commit of more rows is not remembered (see commit)
_KEYS_PER_QUERY = 500  # bound parameters per IN (...) list, well under SQLite's limit

# How long a command waits for another process's command to finish with the database
# (as long as SQLite waits for a writer), and the longest pause between two tries.
_LOCK_WAIT_S = 30.0
_LOCK_POLL_MAX_S = 0.005
# The lock file's first bytes, mapped into every process serving the database and only
# touched while holding the lock: a counter a command bumps when it changed rows, and a flag
# set for the length of a command.  A flag found set means its holder died mid-command (it may
# have committed), which counts as a change.  Read from memory, this costs a command far less
# than asking SQLite (PRAGMA data_version is a read transaction of its own).
_SHARED = struct.Struct("<QQ")

# The bound of a view at the head (greater than any version ever handed out).
HEAD = 2**62

_SCAN_BATCH = 64
_MAX_SCAN_BATCH = 4096


class StrataStoreError(Exception):
    """The database cannot be opened (not a Strata folder, unwritable, damaged)."""


@dataclass(slots=True, frozen=True)
class Branch:
    id: int
    name: str
    generation: int
    status: str
    parent: int | None
    fork_version: int | None
    fork_timestamp: int | None
    created_at: int | None
    deleted_at: int | None
    state_revision: int


class Level(NamedTuple):
    branch: int
    bound: int  # newest version visible on this level


@dataclass(slots=True, frozen=True)
class View:
    """What one read sees: the leaf branch first, then its ancestors."""

    levels: tuple[Level, ...]

    @property
    def leaf(self) -> int:
        return self.levels[0].branch


@dataclass(slots=True, frozen=True)
class Entry:
    key: bytes
    version: int
    value: bytes | None  # None: deleted at this version
    aux: str | None


@dataclass(slots=True, frozen=True)
class Event:
    sequence: int
    version: int
    event_type: str
    payload: str
    timestamp: int
    previous_hash: bytes
    hash: bytes


@dataclass(slots=True, frozen=True)
class Commit:
    version: int
    committed_at: int


def tuple_key(*parts: str) -> bytes:
    """An order-preserving encoding of a tuple of strings as one key.

    NUL bytes inside a part are escaped (00 ff) and each part ends with 00 01,
    so (a, b) sorts by a then b and ``tuple_key(a)`` is a prefix of every key
    that starts with part a.
    """
    return b"".join(p.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x01" for p in parts)


def split_tuple_key(key: bytes) -> list[str]:
    parts = key.split(b"\x00\x01")[:-1]
    return [p.replace(b"\x00\xff", b"\x00").decode("utf-8") for p in parts]


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def now_us() -> int:
    return time.time_ns() // 1000


class StrataStore:
    """One open Strata database (a durable folder or an in-memory cache)."""

    def __init__(self, store: Store, *, durable: bool, lock_fd: int | None = None):
        self.store = store
        self.durable = durable
        self._lock_fd = lock_fd
        self._shared = _map_shared(lock_fd) if lock_fd is not None else None
        self._conn = store._conn  # noqa: SLF001 - the hot paths skip the Store wrappers
        self._db_lock = store._lock  # noqa: SLF001
        self._branches: dict[int, Branch] = {}
        self._active: dict[str, int] = {}
        self._latest: dict[int, int] = {}
        self._spaces: set[tuple[int, str]] = set()
        self._head_views: dict[int, View] = {}
        self._memo: dict[tuple, Entry | None] = {}
        self._seen = 0  # the change counter this process's caches reflect
        self._changes = 0  # the connection's total_changes when the current hold began
        self._held = False
        self._setup()
        # The head when this process opened the database: every commit up to it was in the
        # database file proper (SQLite folds its write-ahead log in when the last connection
        # closes), which is what the engine's WAL retention watermark tells (`storage`).
        self.opened_head = self.head

    # -- opening ----------------------------------------------------------------

    @classmethod
    def open(cls, folder: str | Path) -> "StrataStore":
        """Open (creating when needed) the durable database in ``folder``."""
        folder = Path(folder)
        name = _display_name(folder)
        if folder.exists() and not folder.is_dir():
            raise StrataStoreError(f"{name} is a file, not a database folder")
        if folder.is_dir() and not (folder / DB_FILE).exists():
            foreign = [p.name for p in folder.iterdir() if p.name not in (LOCK_FILE,)]
            if foreign:
                raise StrataStoreError(
                    f"{name} is not empty and holds no MemStrata Strata database "
                    f"({DB_FILE}); pass a new or empty folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StrataStoreError(f"cannot create {name}: {exc.strerror}") from None
        lock_fd = _open_lock_file(folder / LOCK_FILE)
        try:
            store = Store(folder / DB_FILE, schema=STRATA_SCHEMA)
        except StoreError as exc:
            os.close(lock_fd)
            raise StrataStoreError(str(exc)) from None
        try:
            return cls(store, durable=True, lock_fd=lock_fd)
        except BaseException:
            store.close()
            os.close(lock_fd)
            raise

    @classmethod
    def memory(cls) -> "StrataStore":
        """An ephemeral database that lives in this process only."""
        return cls(Store(Store.MEMORY, schema=STRATA_SCHEMA), durable=False)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.store.close()
        if self._shared is not None:
            with contextlib.suppress(Exception):
                self._shared.close()
            self._shared = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def _setup(self) -> None:
        c = self._conn
        with self.store.write():
            # Whether this open made the database (the engine reports it as `created`).
            self.created = c.execute("SELECT count(*) FROM strata_commits").fetchone()[0] == 0
            if self.created:
                at = now_us()
                c.execute(
                    "INSERT INTO strata_branches(id, name, generation, status, state_revision)"
                    " VALUES (1, ?, 1, 'active', 0)", (DEFAULT_BRANCH,))
                # Only the first setup version is on the default branch's timeline (a fork
                # of a fresh database is taken at 1, and reads as of 2 are past its history).
                c.executemany("INSERT INTO strata_commits(version, branch, committed_at) VALUES (?, ?, ?)",
                              [(v, 1 if v == 1 else None, at) for v in range(1, SETUP_VERSIONS + 1)])
                c.execute("INSERT INTO strata_entries(branch, space, kind, key, version, value)"
                          " VALUES (1, ?, ?, ?, 1, x'')", (REGISTRY_SPACE, SPACE, DEFAULT_SPACE.encode()))
        self._load()

    def _load(self) -> None:
        """Read the clock and the branches afresh, forgetting everything remembered."""
        c = self._conn
        if self._shared is not None:
            # Read first: a commit of another process after this point bumps it again,
            # and the next command reloads (nothing read here can miss a commit).
            self._seen = _SHARED.unpack_from(self._shared)[0]
        self._branches.clear()
        self._active.clear()
        self._latest.clear()
        self._spaces = set()
        self._head_views.clear()
        self._memo.clear()
        self.head = c.execute("SELECT max(version) FROM strata_commits").fetchone()[0]
        self._last_committed_at = c.execute(
            "SELECT committed_at FROM strata_commits WHERE version = ?", (self.head,)).fetchone()[0]
        for row in c.execute("SELECT id, name, generation, status, parent, fork_version, fork_timestamp,"
                             " created_at, deleted_at, state_revision FROM strata_branches"):
            self._remember(Branch(*row))
        for branch, latest in c.execute(
                "SELECT branch, max(version) FROM strata_commits WHERE branch IS NOT NULL GROUP BY branch"):
            self._latest[branch] = latest

    def hold(self) -> bool | None:
        """Hold the database for one command against every other process serving it.

        Until :meth:`release`, nothing but this command commits, so the clock
        and what it reads before it commits stay the newest.  Returns whether
        another process committed since this one last looked (everything
        remembered was then reloaded, and the caller drops what it derived
        from it), or None when it holds nothing: an in-memory database, or a
        hold already taken.  Two plain methods rather than a context manager:
        this runs around every command, and a generator costs a cached read
        a noticeable share of its time.
        """
        if self._lock_fd is None:
            return None
        self._db_lock.acquire()  # another thread's hold ends first; this thread's own is re-entered
        if self._held:
            self._db_lock.release()
            return None
        try:
            _hold(self._lock_fd, self.store.path.parent)
            self._held = True
            shared = self._shared
            counter, busy = _SHARED.unpack_from(shared)
            if busy:
                counter += 1  # its holder died mid-command: what it may have committed is news to all
            _SHARED.pack_into(shared, 0, counter, 1)
            self._changes = self._conn.total_changes
            if counter == self._seen:
                return False
            self._load()
            return True
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """End a hold :meth:`hold` took (one it answered True or False to)."""
        try:
            if self._held:
                self._held = False
                # Rows this command changed (a rolled-back write too: a needless reload at worst)
                # are news to the other processes.
                counter = _SHARED.unpack_from(self._shared)[0]
                if self._conn.total_changes != self._changes:
                    counter += 1
                    self._seen = counter
                _SHARED.pack_into(self._shared, 0, counter, 0)
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN)
        finally:
            self._db_lock.release()

    def _remember(self, b: Branch) -> None:
        self._branches[b.id] = b
        if b.status == "active":
            self._active[b.name] = b.id
        elif self._active.get(b.name) == b.id:
            del self._active[b.name]

    # -- branches ---------------------------------------------------------------

    def branch(self, name: str) -> Branch | None:
        bid = self._active.get(name)
        return self._branches[bid] if bid is not None else None

    def branch_by_id(self, bid: int) -> Branch:
        return self._branches[bid]

    def active_branches(self) -> list[Branch]:
        return sorted((self._branches[i] for i in self._active.values()), key=lambda b: b.name)

    def generations(self, name: str) -> int:
        return sum(1 for b in self._branches.values() if b.name == name)

    def latest(self, bid: int) -> int:
        """The newest version on the branch's own timeline."""
        return self._latest.get(bid, 0)

    def view(self, b: Branch, as_of: int | None = None) -> View:
        if as_of is None:
            # The head of a branch is "everything on it": no bound to move,
            # so the view is built once per branch.
            cached = self._head_views.get(b.id)
            if cached is None:
                cached = self._head_views[b.id] = self._view(b, HEAD)
            return cached
        return self._view(b, as_of)

    def _view(self, b: Branch, bound: int) -> View:
        levels = [Level(b.id, bound)]
        while b.parent is not None:
            bound = min(bound, b.fork_version)
            b = self._branches[b.parent]
            levels.append(Level(b.id, bound))
        return View(tuple(levels))

    def timeline_start(self, b: Branch) -> int:
        """The oldest version a read of ``b`` may be anchored at.

        A fork's history reaches back through its ancestors, so the root of
        its lineage decides: the default branch's from the first commit, an
        empty root's from the version after the one that created it.
        """
        while b.parent is not None:
            b = self._branches[b.parent]
        return 1 if b.created_at is None else b.created_at + 1

    def in_timeline(self, b: Branch, version: int) -> bool:
        """Whether ``version`` is a commit on the branch's timeline (its own or inherited)
        that a fork may be anchored at: a branch's creation version is not one."""
        row = self._conn.execute("SELECT branch FROM strata_commits WHERE version = ?", (version,)).fetchone()
        if row is None or row[0] is None or version == self._branches[row[0]].created_at:
            return False
        return any(level.branch == row[0] and version <= level.bound for level in self.view(b).levels)

    def timeline_version_at(self, b: Branch, instant: int, *, by_time: bool, anchor: bool = False) -> int | None:
        """The newest timeline version at or before ``instant`` (a version, or a UTC µs time);
        with ``anchor``, the newest a fork may be anchored at (no branch's creation version)."""
        best = None
        column = "committed_at" if by_time else "version"
        with self._db_lock:
            for level in self.view(b).levels:
                skip = self._branches[level.branch].created_at if anchor else None
                row = self._conn.execute(
                    f"SELECT max(version) FROM strata_commits WHERE branch = ? AND version <= ? AND {column} <= ?"
                    " AND version IS NOT ?", (level.branch, level.bound, instant, skip)).fetchone()
                if row[0] is not None and (best is None or row[0] > best):
                    best = row[0]
        return best

    def create_branch(self, name: str, parent: Branch | None, fork_version: int | None,
                      fork_timestamp: int | None) -> Branch:
        """A new branch (a fork of ``parent`` at ``fork_version``, or an empty root)."""
        # An empty root made over a deleted generation starts one state revision
        # on (the engine resets the name's catalog record); a fork starts afresh.
        revision = int(parent is None and self.generations(name) > 0)
        with self._db_lock, self.store.write() as c:
            first = self.head + 1
            at = self._clock()
            cur = c.execute(
                "INSERT INTO strata_branches(name, generation, status, parent, fork_version, fork_timestamp,"
                " created_at, state_revision) VALUES (?, ?, 'active', ?, ?, ?, ?, ?)",
                (name, self.generations(name) + 1, parent.id if parent else None,
                 fork_version, fork_timestamp, first, revision))
            bid = cur.lastrowid
            rows = [(first + i, bid if i < FORK_OWN_VERSIONS else None, at) for i in range(FORK_VERSIONS)]
            c.executemany("INSERT INTO strata_commits(version, branch, committed_at) VALUES (?, ?, ?)", rows)
            if parent is None:
                c.execute("INSERT INTO strata_entries(branch, space, kind, key, version, value)"
                          " VALUES (?, ?, ?, ?, ?, x'')", (bid, REGISTRY_SPACE, SPACE, DEFAULT_SPACE.encode(), first))
        self.head = first + FORK_VERSIONS - 1
        self._last_committed_at = at
        self._latest[bid] = first + FORK_OWN_VERSIONS - 1
        created = Branch(bid, name, self.generations(name) + 1, "active", parent.id if parent else None,
                         fork_version, fork_timestamp, first, None, revision)
        self._remember(created)
        return created

    def delete_branch(self, b: Branch, state_revision: int) -> Branch:
        with self._db_lock, self.store.write() as c:
            first = self.head + 1
            at = self._clock()
            c.executemany("INSERT INTO strata_commits(version, branch, committed_at) VALUES (?, NULL, ?)",
                          [(first + i, at) for i in range(DELETE_VERSIONS)])
            c.execute("UPDATE strata_branches SET status = 'deleted', deleted_at = ?, state_revision = ?"
                      " WHERE id = ?", (first, state_revision, b.id))
            # A fork of this branch reads through to its rows: keep them for it.
            if not self.has_forks(b):
                c.execute("DELETE FROM strata_entries WHERE branch = ?", (b.id,))
                c.execute("DELETE FROM strata_events WHERE branch = ?", (b.id,))
        self.head = first + DELETE_VERSIONS - 1
        self._last_committed_at = at
        gone = Branch(b.id, b.name, b.generation, "deleted", b.parent, b.fork_version, b.fork_timestamp,
                      b.created_at, first, state_revision)
        self._remember(gone)
        self._spaces = {s for s in self._spaces if s[0] != b.id}
        return gone

    def timeline_commits(self, b: Branch) -> int:
        """How many versions the branch's own timeline holds (its creation's included)."""
        with self._db_lock:
            return self._conn.execute("SELECT count(*) FROM strata_commits WHERE branch = ?", (b.id,)).fetchone()[0]

    def has_forks(self, b: Branch) -> bool:
        return any(x.parent == b.id for x in self._branches.values())

    def burn_versions(self, count: int, branch: int | None = None) -> None:
        """Consume versions that carry no rows (what a refused fork costs the real engine).

        With ``branch`` they join that branch's timeline (a read or fork may be
        anchored at them); without, no timeline holds them.
        """
        with self._db_lock, self.store.write() as c:
            at = self._clock()
            c.executemany("INSERT INTO strata_commits(version, branch, committed_at) VALUES (?, ?, ?)",
                          [(self.head + 1 + i, branch, at) for i in range(count)])
        self.head += count
        if branch is not None:
            self._latest[branch] = self.head
        self._last_committed_at = at

    # -- commits ------------------------------------------------------------------

    def _clock(self, before: int = 0) -> int:
        # Strictly increasing, so that "as of this instant" names one commit; ``before``
        # instants are left free between the previous commit and this one.
        at = max(now_us(), self._last_committed_at + 1 + before)
        return at

    @contextlib.contextmanager
    def commit(self, b: Branch, instants: int = 0) -> Iterator["Transaction"]:
        """One commit on ``b``: everything written inside lands at one new version, or nothing does.

        ``instants`` reserves that many microseconds just before the commit's own
        (``committed_at - instants`` .. ``committed_at - 1``), after the previous
        commit: the times of the events it appends.

        Rows are buffered and written when the block ends, so reads inside it
        see the committed state.  A commit of a single row is a single
        INSERT (atomic on its own; a trigger records the commit with it),
        the common case of every put; larger ones run in one transaction.
        """
        with self._db_lock:
            tx = Transaction(self, b, self.head + 1, self._clock(instants))
            yield tx
            c = self._conn
            try:
                if len(tx.entries) == 1 and not tx.events:
                    c.execute(_INSERT_ENTRY, (*tx.entries[0], tx.committed_at))
                else:
                    c.execute("BEGIN IMMEDIATE")
                    try:
                        # No per-row time here: the trigger would record the commit once per row,
                        # and this transaction records it once, below.
                        c.executemany(_INSERT_ENTRIES, tx.entries)
                        c.executemany(_INSERT_EVENT, tx.events)
                        c.execute("INSERT OR IGNORE INTO strata_commits(version, branch, committed_at)"
                                  " VALUES (?, ?, ?)", (tx.version, b.id, tx.committed_at))
                    except BaseException:
                        c.execute("ROLLBACK")
                        raise
                    c.execute("COMMIT")
            finally:
                self._forget(tx.written)
            # What this commit wrote is what the head now reads.  A large commit (a batch) is
            # forgotten instead: its keys are read back one by one if at all, and holding every
            # one would make the memo a pile of long-lived objects for the garbage collector to
            # walk again and again.
            memo = self._memo
            if len(memo) < _MEMO_ENTRIES and len(tx.rows) <= _MEMO_COMMIT_ROWS:
                for key, entry in tx.rows:
                    memo[key] = entry
            self.head = tx.version
            self._last_committed_at = tx.committed_at
            self._latest[b.id] = tx.version
            self._spaces.update(tx.new_spaces)

    def commit_of(self, version: int) -> Commit | None:
        with self._db_lock:
            row = self._conn.execute("SELECT committed_at FROM strata_commits WHERE version = ?", (version,)).fetchone()
        return Commit(version, row[0]) if row else None

    # -- entries ------------------------------------------------------------------

    _GET = ("SELECT version, value, aux FROM strata_entries WHERE branch = ? AND space = ? AND kind = ?"
            " AND key = ? AND version <= ? ORDER BY version DESC LIMIT 1")

    def get(self, view: View, space: str, kind: int, key: bytes) -> Entry | None:
        """The newest row for ``key`` visible in ``view`` (a deletion included), or None.

        Answers are remembered: a read as of a past version can never change,
        and a read at a branch head changes only when that branch writes the
        key, which :class:`Transaction` reports back (see ``_forget``).
        """
        memo = (view.levels, space, kind, key)
        hit = self._memo.get(memo, _NO_ENTRY)
        if hit is not _NO_ENTRY:
            return hit
        found = None
        with self._db_lock:
            for level in view.levels:
                row = self._conn.execute(self._GET, (level.branch, space, kind, key, level.bound)).fetchone()
                if row is not None:
                    found = Entry(key, row[0], row[1], row[2])
                    break
        if found is None or found.value is None or len(found.value) <= _MEMO_VALUE_BYTES:
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.clear()  # cheap and rare: the working set refills it
            self._memo[memo] = found
        return found

    def live(self, view: View, space: str, kind: int, key: bytes) -> Entry | None:
        """The visible row for ``key`` unless it is absent or deleted."""
        entry = self.get(view, space, kind, key)
        return entry if entry is not None and entry.value is not None else None

    def live_keys(self, view: View, space: str, kind: int, keys: list[bytes]) -> set[bytes]:
        """Which of ``keys`` are visible and not deleted in ``view``: one query per level and
        chunk of keys instead of one per key (what a batch write asks before it commits)."""
        found: set[bytes] = set()
        pending = []
        memo = self._memo
        for key in keys:
            hit = memo.get((view.levels, space, kind, key), _NO_ENTRY)
            if hit is _NO_ENTRY:
                pending.append(key)
            elif hit is not None and hit.value is not None:
                found.add(key)
        with self._db_lock:
            for level in view.levels:
                if not pending:
                    break
                decided: set[bytes] = set()
                for i in range(0, len(pending), _KEYS_PER_QUERY):
                    chunk = pending[i:i + _KEYS_PER_QUERY]
                    # SQLite takes the bare columns of a max() aggregate from the row holding the max.
                    rows = self._conn.execute(
                        "SELECT key, max(version), value IS NOT NULL FROM strata_entries"
                        " WHERE branch = ? AND space = ? AND kind = ? AND version <= ?"
                        f" AND key IN ({','.join('?' * len(chunk))}) GROUP BY key",
                        (level.branch, space, kind, level.bound, *chunk))
                    for key, _, alive in rows:
                        decided.add(key)
                        if alive:
                            found.add(key)
                # A key this level holds a row for (a deletion too) is settled; the rest fall through.
                pending = [k for k in pending if k not in decided]
        return found

    def _forget(self, keys: list[tuple]) -> None:
        for key in keys:
            self._memo.pop(key, None)

    def history(self, view: View, space: str, kind: int, key: bytes) -> list[Entry]:
        """Every visible version of ``key``, newest first (deletions included)."""
        out: list[Entry] = []
        sql = ("SELECT version, value, aux FROM strata_entries WHERE branch = ? AND space = ? AND kind = ?"
               " AND key = ? AND version <= ? ORDER BY version DESC")
        with self._db_lock:
            for level in view.levels:
                out += [Entry(key, *row) for row in self._conn.execute(
                    sql, (level.branch, space, kind, key, level.bound))]
        return out

    def scan(self, view: View, space: str, kind: int, start: bytes = b"", end: bytes | None = None,
             *, after: bool = False, batch: int = _SCAN_BATCH) -> Iterator[Entry]:
        """Live entries with ``start`` <= key < ``end`` (key > start when ``after``), in key order.

        Lazy: each level is read in growing batches, so a caller that stops
        early never reads the rest, whatever limit it was asked for.
        """
        streams = [self._level_stream(i, level, space, kind, start, end, after, batch)
                   for i, level in enumerate(view.levels)]
        last: bytes | None = None
        for key, _, entry in heapq.merge(*streams):
            if key == last:
                continue  # an ancestor's row shadowed by a nearer level
            last = key
            if entry.value is not None:
                yield entry

    def _level_stream(self, index: int, level: Level, space: str, kind: int, start: bytes,
                      end: bytes | None, after: bool, batch: int) -> Iterator[tuple[bytes, int, Entry]]:
        op = ">" if after else ">="
        upper = " AND key < ?" if end is not None else ""
        sql = (f"SELECT key, max(version), value, aux FROM strata_entries WHERE branch = ? AND space = ?"
               f" AND kind = ? AND key {{op}} ?{upper} AND version <= ? GROUP BY key ORDER BY key LIMIT ?")
        lower = start
        while True:
            params: list = [level.branch, space, kind, lower]
            if end is not None:
                params.append(end)
            params += [level.bound, batch]
            with self._db_lock:
                rows = self._conn.execute(sql.format(op=op), params).fetchall()
            for key, version, value, aux in rows:
                yield key, index, Entry(key, version, value, aux)
            if len(rows) < batch:
                return
            lower, op = rows[-1][0], ">"
            batch = min(batch * 4, _MAX_SCAN_BATCH)

    def count(self, view: View, space: str, kind: int, start: bytes = b"", end: bytes | None = None) -> int:
        return sum(1 for _ in self.scan(view, space, kind, start, end, batch=_MAX_SCAN_BATCH))

    # -- spaces -------------------------------------------------------------------

    def space_known(self, view: View, space: str) -> bool:
        at_head = view.levels[0].bound == HEAD
        if at_head and (view.leaf, space) in self._spaces:
            return True
        entry = self.get(view, REGISTRY_SPACE, SPACE, space.encode("utf-8"))
        known = entry is not None and entry.value is not None
        if known and at_head:
            self._spaces.add((view.leaf, space))  # spaces are never removed here
        return known

    def spaces(self, view: View) -> list[str]:
        return [e.key.decode("utf-8") for e in self.scan(view, REGISTRY_SPACE, SPACE)]

    # -- events -------------------------------------------------------------------

    _EVENT_COLUMNS = "sequence, version, event_type, payload, timestamp, previous_hash, hash"

    # Stored sequences only grow per branch and space; the sequence a read reports is the
    # stored one less the log's start (see EVENT_LOG), so a deleted log restarts at 0.

    def event_base(self, view: View, space: str) -> int:
        """The stored sequence the log's visible sequence 0 is (0 until the space is deleted)."""
        entry = self.get(view, space, EVENT_LOG, b"")
        return 0 if entry is None or entry.value is None else int(entry.aux)

    def last_event(self, view: View, space: str) -> Event | None:
        base = self.event_base(view, space)
        sql = (f"SELECT {self._EVENT_COLUMNS} FROM strata_events WHERE branch = ? AND space = ?"
               " AND version <= ? ORDER BY sequence DESC LIMIT 1")
        with self._db_lock:
            for level in view.levels:
                row = self._conn.execute(sql, (level.branch, space, level.bound)).fetchone()
                if row is not None:
                    return Event(row[0] - base, *row[1:]) if row[0] >= base else None
        return None

    def event(self, view: View, space: str, sequence: int) -> Event | None:
        base = self.event_base(view, space)
        sql = (f"SELECT {self._EVENT_COLUMNS} FROM strata_events WHERE branch = ? AND space = ?"
               " AND sequence = ? AND version <= ?")
        with self._db_lock:
            for level in view.levels:
                row = self._conn.execute(sql, (level.branch, space, sequence + base, level.bound)).fetchone()
                if row is not None:
                    return Event(row[0] - base, *row[1:])
        return None

    def events(self, view: View, space: str, after: int = -1, event_type: str | None = None,
               batch: int = _SCAN_BATCH) -> Iterator[Event]:
        """Visible events with sequence > ``after``, in sequence order (lazily)."""
        # Ancestors hold the lower sequences: a fork continues its parent's log.
        type_clause = " AND event_type = ?" if event_type is not None else ""
        sql = (f"SELECT {self._EVENT_COLUMNS} FROM strata_events WHERE branch = ? AND space = ?"
               f" AND version <= ? AND sequence > ?{type_clause} ORDER BY sequence LIMIT ?")
        base = self.event_base(view, space)
        for level in reversed(view.levels):
            lower = after + base
            size = batch
            while True:
                params: list = [level.branch, space, level.bound, lower]
                if event_type is not None:
                    params.append(event_type)
                params.append(size)
                with self._db_lock:
                    rows = self._conn.execute(sql, params).fetchall()
                for row in rows:
                    yield Event(row[0] - base, *row[1:])
                if len(rows) < size:
                    break
                lower = rows[-1][0]
                size = min(size * 4, _MAX_SCAN_BATCH)

    def integrity_ok(self) -> bool:
        return self.store.integrity_ok()

    # -- space deletion and the storage footprint (additions for issue 23) ---------

    def last_commit_time(self) -> int:
        """The newest commit's ``committed_at`` (UTC µs)."""
        return self._last_committed_at

    def kinds_in(self, view: View, space: str) -> list[int]:
        """Every entity kind with rows in ``space`` on the view's levels (live or not)."""
        kinds: set[int] = set()
        with self._db_lock:
            for level in view.levels:
                kinds.update(k for (k,) in self._conn.execute(
                    "SELECT DISTINCT kind FROM strata_entries WHERE branch = ? AND space = ? AND version <= ?",
                    (level.branch, space, level.bound)))
        return sorted(kinds)

    def space_removed(self, bid: int, space: str) -> None:
        """Forget that ``space`` is known on branch ``bid`` (a committed space deletion removed it)."""
        self._spaces.discard((bid, space))

    def file_pages(self) -> tuple[int, int, int]:
        """(page count, page size, free pages) of the database file."""
        with self._db_lock:
            c = self._conn
            return (c.execute("PRAGMA page_count").fetchone()[0], c.execute("PRAGMA page_size").fetchone()[0],
                    c.execute("PRAGMA freelist_count").fetchone()[0])

    def wal_bytes(self) -> int:
        wal = Path(str(self.store.path) + "-wal")
        try:
            return wal.stat().st_size
        except OSError:
            return 0

    def row_count(self) -> int:
        with self._db_lock:
            return sum(self._conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("strata_entries", "strata_events"))


class Transaction:
    """The rows of one commit (see :meth:`StrataStore.commit`)."""

    __slots__ = ("_s", "_head", "branch", "version", "committed_at", "new_spaces", "written", "rows",
                 "entries", "events")

    def __init__(self, s: StrataStore, branch: Branch, version: int, committed_at: int):
        self._s = s
        self._head = s.view(branch).levels
        self.branch = branch
        self.version = version
        self.committed_at = committed_at
        self.new_spaces: list[tuple[int, str]] = []
        self.written: list[tuple] = []  # head reads this commit changes
        self.rows: list[tuple[tuple, Entry]] = []  # ... and what they read once it is committed
        self.entries: list[tuple] = []
        self.events: list[tuple] = []

    def register_space(self, view: View, space: str) -> bool:
        """Record ``space`` on this branch unless it is known; True when this commit created it."""
        if self._s.space_known(view, space):
            return False
        self.put(REGISTRY_SPACE, SPACE, space.encode("utf-8"), b"")
        self.new_spaces.append((self.branch.id, space))
        return True

    def put(self, space: str, kind: int, key: bytes, value: bytes, aux: str | None = None) -> None:
        memo = (self._head, space, kind, key)
        self.written.append(memo)
        if len(value) <= _MEMO_VALUE_BYTES:
            self.rows.append((memo, Entry(key, self.version, value, aux)))
        self.entries.append((self.branch.id, space, kind, key, self.version, value, aux))

    def put_many(self, space: str, kind: int, pairs: list[tuple[bytes, bytes]]) -> None:
        """``put`` of many (key, value) pairs without aux, in one pass (the batch writes)."""
        head, version, bid = self._head, self.version, self.branch.id
        memos = [(head, space, kind, key) for key, _ in pairs]
        self.written += memos
        self.rows += [(memo, Entry(key, version, value, None))
                      for memo, (key, value) in zip(memos, pairs) if len(value) <= _MEMO_VALUE_BYTES]
        self.entries += [(bid, space, kind, key, version, value, None) for key, value in pairs]

    def delete(self, space: str, kind: int, key: bytes, aux: str | None = None) -> None:
        """A deletion row (``aux`` may carry what outlives it, e.g. a revision counter)."""
        memo = (self._head, space, kind, key)
        self.written.append(memo)
        self.rows.append((memo, Entry(key, self.version, None, aux)))
        self.entries.append((self.branch.id, space, kind, key, self.version, None, aux))

    def append_event(self, space: str, event: Event) -> None:
        """Append ``event`` (its visible sequence) to the space's log."""
        base = self._s.event_base(View(self._head), space)
        self.events.append((self.branch.id, space, event.sequence + base, event.version, event.event_type,
                            event.payload, event.timestamp, event.previous_hash, event.hash))


_INSERT_ENTRY = ("INSERT OR REPLACE INTO strata_entries(branch, space, kind, key, version, value, aux, committed_at)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_INSERT_ENTRIES = ("INSERT OR REPLACE INTO strata_entries(branch, space, kind, key, version, value, aux)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?)")
_INSERT_EVENT = ("INSERT INTO strata_events(branch, space, sequence, version, event_type, payload, timestamp,"
                 " previous_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _display_name(folder: Path) -> str:
    """The folder's own name for messages (never its full path; ``.`` is named too)."""
    return folder.name or folder.absolute().resolve().name or str(folder)


def _open_lock_file(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a read-only or unwritable folder: the server could commit nothing
        raise StrataStoreError(
            f"cannot open database {_display_name(path.parent)} for writing: {exc.strerror}") from None


def _map_shared(fd: int) -> mmap.mmap:
    """The lock file's shared counter and flag (see _SHARED), zeros in a new file."""
    if os.fstat(fd).st_size < _SHARED.size:
        # Only ever grows it (a racing opener truncating to the same size changes no byte).
        os.ftruncate(fd, _SHARED.size)
    return mmap.mmap(fd, _SHARED.size)


def _try_lock(fd: int) -> bool:
    """Whether the record lock was free and is now this process's."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        return False


def _hold(fd: int, folder: Path) -> None:
    """Take the record lock, waiting while another process's command holds it.

    Polled rather than a blocking F_SETLKW: a stopped (not dead) holder then
    costs a command an error after the wait, not the server for good.
    """
    if _try_lock(fd):
        return
    deadline = time.monotonic() + _LOCK_WAIT_S
    pause = 0.0002
    while True:
        time.sleep(pause)
        if _try_lock(fd):
            return
        if time.monotonic() >= deadline:
            raise OSError(errno.EBUSY, f"another process has held database {_display_name(folder)} "
                                       f"for over {_LOCK_WAIT_S:.0f} s")
        pause = min(pause * 2, _LOCK_POLL_MAX_S)
