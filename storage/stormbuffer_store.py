"""The SQLite projection of one Stormbuffer store's Markdown records.

The Markdown files are the only source of truth; these tables (``sbuf_*``,
schema migration 4) are a disposable projection that the harness rebuilds
from them at any time.  This module only moves rows: it knows nothing of the
Markdown format, lifecycle rules or ranking.

``sbuf_fts`` is an external-content FTS5 index over ``sbuf_chunks.retrieval``;
every function here that adds or drops chunks updates it in the same
transaction, so the two never disagree.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .db import Store, StoreError


@dataclass(slots=True, frozen=True)
class FileState:
    """What a sync compares to decide whether a file must be read again."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    racy: bool
    hash: str


@dataclass(slots=True)
class RecordRow:
    id: str
    title: str
    kind: str
    scope: str
    status: str
    access: str
    created_at: str
    updated_at: str
    tags: list[str]
    aliases: list[str]
    supersedes: list[str]
    sources: list[tuple[str, str, str]]  # (kind, reference, actor)
    body: str
    norm_title: str
    norm_body: str
    file: str = ""  # path below records/, POSIX


@dataclass(slots=True)
class ChunkRow:
    ordinal: int
    text: str
    retrieval: str


@dataclass(slots=True)
class ProjectedFile:
    """One file as the sync saw it: its state and, when valid, its record."""

    path: str
    state: FileState
    error: str | None = None
    record: RecordRow | None = None
    chunks: list[ChunkRow] = field(default_factory=list)


@dataclass(slots=True)
class ChunkHit:
    record: RecordRow
    ordinal: int
    text: str
    bm25: float


@dataclass(slots=True)
class Problems:
    invalid: list[tuple[str, str]]           # (path, why)
    duplicates: list[tuple[str, list[str]]]  # (record id, paths holding it)

    def __bool__(self) -> bool:
        return bool(self.invalid or self.duplicates)


def open_projection(path: str | Path) -> Store:
    """Open (creating or migrating) the projection at ``path``.  Raises StoreError."""
    return Store(path)


def discard_projection(path: str | Path) -> None:
    """Delete a projection file and its WAL side files (it is rebuilt from the Markdown)."""
    base = Path(path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(base) + suffix).unlink(missing_ok=True)


# -- writes ---------------------------------------------------------------------


def apply_changes(store: Store, upserts: Sequence[ProjectedFile], touches: Sequence[ProjectedFile],
                  deletes: Iterable[str]) -> None:
    """One transaction: re-project ``upserts``, refresh the stat of ``touches``
    (same bytes), drop ``deletes``."""
    with store.write() as conn:
        for path in deletes:
            _drop_file(conn, path)
        for f in touches:
            s = f.state
            conn.execute(
                "UPDATE sbuf_files SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ?, racy = ?"
                " WHERE path = ?", (s.size, s.mtime_ns, s.ctime_ns, s.inode, int(s.racy), f.path))
        for f in upserts:
            _replace_file(conn, f)


def clear(store: Store) -> None:
    with store.write() as conn:
        conn.execute("INSERT INTO sbuf_fts(sbuf_fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM sbuf_chunks")
        conn.execute("DELETE FROM sbuf_records")
        conn.execute("DELETE FROM sbuf_files")


def _replace_file(conn: sqlite3.Connection, f: ProjectedFile) -> None:
    _drop_file(conn, f.path)
    s = f.state
    cur = conn.execute(
        "INSERT INTO sbuf_files(path, size, mtime_ns, ctime_ns, inode, racy, hash, error)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (f.path, s.size, s.mtime_ns, s.ctime_ns, s.inode, int(s.racy), s.hash, f.error))
    file_id = cur.lastrowid
    r = f.record
    if r is None:
        return
    conn.execute(
        "INSERT INTO sbuf_records(file_id, id, title, kind, scope, status, access, created_at,"
        " updated_at, tags, aliases, supersedes, sources, body, norm_title, norm_body)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (file_id, r.id, r.title, r.kind, r.scope, r.status, r.access, r.created_at, r.updated_at,
         _dump(r.tags), _dump(r.aliases), _dump(r.supersedes), _dump([list(s) for s in r.sources]),
         r.body, r.norm_title, r.norm_body))
    for chunk in f.chunks:
        cur = conn.execute("INSERT INTO sbuf_chunks(file_id, ordinal, text, retrieval) VALUES (?,?,?,?)",
                           (file_id, chunk.ordinal, chunk.text, chunk.retrieval))
        conn.execute("INSERT INTO sbuf_fts(rowid, retrieval) VALUES (?, ?)", (cur.lastrowid, chunk.retrieval))


def _drop_file(conn: sqlite3.Connection, path: str) -> None:
    row = conn.execute("SELECT id FROM sbuf_files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return
    # External-content FTS5 deletes need the exact text that was indexed.
    conn.execute("INSERT INTO sbuf_fts(sbuf_fts, rowid, retrieval)"
                 " SELECT 'delete', id, retrieval FROM sbuf_chunks WHERE file_id = ?", (row[0],))
    conn.execute("DELETE FROM sbuf_chunks WHERE file_id = ?", (row[0],))
    conn.execute("DELETE FROM sbuf_records WHERE file_id = ?", (row[0],))
    conn.execute("DELETE FROM sbuf_files WHERE id = ?", (row[0],))


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- reads ----------------------------------------------------------------------


def data_version(store: Store) -> int:
    """Changes whenever another connection commits to the projection."""
    return store.execute("PRAGMA data_version")[0][0]


def file_states(store: Store) -> dict[str, FileState]:
    rows = store.execute("SELECT path, size, mtime_ns, ctime_ns, inode, racy, hash FROM sbuf_files")
    return {path: FileState(size, mtime, ctime, inode, bool(racy), h)
            for path, size, mtime, ctime, inode, racy, h in rows}


def problems(store: Store) -> Problems:
    invalid = [(p, e) for p, e in store.execute(
        "SELECT path, error FROM sbuf_files WHERE error IS NOT NULL ORDER BY path")]
    dups: dict[str, list[str]] = {}
    for rid, path in store.execute(
            "SELECT r.id, f.path FROM sbuf_records r JOIN sbuf_files f ON f.id = r.file_id"
            " WHERE r.id IN (SELECT id FROM sbuf_records GROUP BY id HAVING count(*) > 1)"
            " ORDER BY r.id, f.path"):
        dups.setdefault(rid, []).append(path)
    return Problems(invalid, sorted(dups.items()))


def counts(store: Store) -> dict[str, int]:
    files, invalid = store.execute(
        "SELECT count(*), coalesce(sum(error IS NOT NULL), 0) FROM sbuf_files")[0]
    chunks = store.execute("SELECT count(*) FROM sbuf_chunks")[0][0]
    return {"files": files, "invalid": invalid, "chunks": chunks}


_RECORD_COLUMNS = ("r.id, r.title, r.kind, r.scope, r.status, r.access, r.created_at, r.updated_at,"
                   " r.tags, r.aliases, r.supersedes, r.sources, r.body, r.norm_title, r.norm_body, f.path")
_FROM = " FROM sbuf_records r JOIN sbuf_files f ON f.id = r.file_id"


def _record(row: Sequence) -> RecordRow:
    (rid, title, kind, scope, status, access, created, updated, tags, aliases, supersedes, sources,
     body, norm_title, norm_body, path) = row
    return RecordRow(rid, title, kind, scope, status, access, created, updated, json.loads(tags),
                     json.loads(aliases), json.loads(supersedes),
                     [tuple(s) for s in json.loads(sources)], body, norm_title, norm_body, path)


def _in(column: str, values: Sequence[str] | None, params: list) -> str:
    if values is None:
        return ""
    params.extend(values)
    return f" AND {column} IN ({','.join('?' * len(values))})"


def find_records(store: Store, record_id: str) -> list[RecordRow]:
    """Every projected record carrying ``record_id`` (more than one is an error state)."""
    rows = store.execute(f"SELECT {_RECORD_COLUMNS}{_FROM} WHERE r.id = ? ORDER BY f.path", (record_id,))
    return [_record(r) for r in rows]


def list_records(store: Store, *, statuses: Sequence[str] | None = None,
                 accesses: Sequence[str] | None = None, scopes: Sequence[str] | None = None) -> list[RecordRow]:
    """Records matching the filters (None = any), ordered by id."""
    params: list = []
    where = (_in("r.status", statuses, params) + _in("r.access", accesses, params)
             + _in("r.scope", scopes, params))
    rows = store.execute(f"SELECT {_RECORD_COLUMNS}{_FROM} WHERE 1{where} ORDER BY r.id, f.path", tuple(params))
    return [_record(r) for r in rows]


def overlapping(store: Store, scope: str, kind: str, norm_title: str, statuses: Sequence[str],
                exclude_ids: Iterable[str] = ()) -> list[RecordRow]:
    """Records of one scope and kind whose normalised title is ``norm_title``, by id."""
    params: list = [scope, kind, norm_title]
    where = _in("r.status", statuses, params)
    rows = store.execute(f"SELECT {_RECORD_COLUMNS}{_FROM} WHERE r.scope = ? AND r.kind = ?"
                         f" AND r.norm_title = ?{where} ORDER BY r.id", tuple(params))
    excluded = set(exclude_ids)
    return [rec for rec in map(_record, rows) if rec.id not in excluded]


def search(store: Store, match: str, *, limit: int, statuses: Sequence[str] | None,
           accesses: Sequence[str] | None, scopes: Sequence[str] | None) -> list[ChunkHit]:
    """The ``limit`` best chunks for the FTS5 expression ``match`` among records
    passing the filters, ordered by bm25 (best first), record id, ordinal."""
    params: list = [match]
    where = (_in("r.status", statuses, params) + _in("r.access", accesses, params)
             + _in("r.scope", scopes, params))
    params.append(limit)
    rows = store.execute(
        f"SELECT {_RECORD_COLUMNS}, c.ordinal, c.text, bm25(sbuf_fts) AS score"
        " FROM sbuf_fts JOIN sbuf_chunks c ON c.id = sbuf_fts.rowid"
        " JOIN sbuf_records r ON r.file_id = c.file_id JOIN sbuf_files f ON f.id = c.file_id"
        f" WHERE sbuf_fts MATCH ?{where} ORDER BY score, r.id, c.ordinal LIMIT ?", tuple(params))
    return [ChunkHit(_record(row[:16]), row[16], row[17], row[18]) for row in rows]


__all__ = [
    "FileState", "RecordRow", "ChunkRow", "ProjectedFile", "ChunkHit", "Problems", "StoreError",
    "open_projection", "discard_projection", "apply_changes", "clear", "data_version", "file_states",
    "problems", "counts", "find_records", "list_records", "overlapping", "search",
]
