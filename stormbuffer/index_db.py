"""The SQLite projection of one Stormbuffer store's Markdown records.

The Markdown files are the only source of truth; these tables (``sbuf_*``,
stormbuffer/schema.py, a chain of its own) are a disposable projection rebuilt
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

from memstrata.storage.db import Store, StoreError, StoreForeign
from .schema import STORMBUFFER_SCHEMA


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
    """A matching chunk; its ``record`` carries no body and no timestamps."""

    record: RecordRow
    ordinal: int
    text: str
    bm25: float
    chunk_rowid: int = 0


@dataclass(slots=True)
class Problems:
    invalid: list[tuple[str, str]]           # (path, why)
    duplicates: list[tuple[str, list[str]]]  # (record id, paths holding it)

    def __bool__(self) -> bool:
        return bool(self.invalid or self.duplicates)


MARKER_KEY = "sbuf.projection"


def open_projection(path: str | Path) -> Store:
    """Open (creating or migrating) the projection at ``path``.  Raises StoreError.

    A file there that this code did not create (e.g. Stormbuffer's own index,
    which sits at the same path with another schema) is replaced: it is only
    a projection of the Markdown.
    """
    if any(Path(str(path) + suffix).is_symlink() for suffix in _PROJECTION_SUFFIXES):
        # The projection and its side files are this code's own: a link in their place (a store
        # committed with a repository can carry one) is removed, never opened, so SQLite does not
        # create or write the file it names.
        discard_projection(path)
    existed = Path(path).exists()
    try:
        store = Store(path, schema=STORMBUFFER_SCHEMA)
    except StoreForeign:
        discard_projection(path)
        store = Store(path, schema=STORMBUFFER_SCHEMA)
    try:
        # Only a marker read that succeeded may condemn the file: a failed read
        # (a full disk, an I/O error) says nothing about whose file it is.
        marked = store.get_meta(MARKER_KEY) == "1"
        if existed and not marked:
            store.close()
            discard_projection(path)
            store = Store(path, schema=STORMBUFFER_SCHEMA)
        if not marked:
            store.set_meta(MARKER_KEY, "1")
    except BaseException:
        store.close()
        raise
    return store


def discard_projection(path: str | Path) -> None:
    """Delete a projection file and its WAL side files (it is rebuilt from the Markdown)."""
    base = Path(path)
    for suffix in _PROJECTION_SUFFIXES:
        Path(str(base) + suffix).unlink(missing_ok=True)


_PROJECTION_SUFFIXES = ("", "-wal", "-shm", "-journal")


# -- writes ---------------------------------------------------------------------


def apply_changes(store: Store, upserts: Sequence[ProjectedFile], touches: Sequence[ProjectedFile],
                  deletes: Iterable[str]) -> None:
    """One transaction: re-project ``upserts``, refresh the stat of ``touches``
    (same bytes), drop ``deletes``."""
    with store.write() as conn:
        seq = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM sbuf_files").fetchone()[0]
        ids = _file_ids(conn, [f.path for f in upserts])
        for path in deletes:
            _drop_file(conn, path, ids.get(path) or _file_id(conn, path))
        for f in upserts:
            if f.path in ids:
                _drop_file(conn, f.path, ids[f.path])
        conn.executemany(
            "UPDATE sbuf_files SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ?, racy = ?, seq = ? WHERE path = ?",
            [(f.state.size, f.state.mtime_ns, f.state.ctime_ns, f.state.inode, int(f.state.racy), seq, f.path)
             for f in touches])
        if upserts:
            _insert_files(conn, upserts, seq)


def clear(store: Store) -> None:
    with store.write() as conn:
        conn.execute("INSERT INTO sbuf_fts(sbuf_fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM sbuf_chunks")
        conn.execute("DELETE FROM sbuf_records")
        conn.execute("DELETE FROM sbuf_files")


def _file_ids(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, int]:
    if len(paths) > 64:  # a big batch (a rebuild): one scan beats thousands of lookups
        wanted = set(paths)
        return {p: i for p, i in conn.execute("SELECT path, id FROM sbuf_files") if p in wanted}
    return {p: i for p in paths if (i := _file_id(conn, p)) is not None}


def _file_id(conn: sqlite3.Connection, path: str) -> int | None:
    row = conn.execute("SELECT id FROM sbuf_files WHERE path = ?", (path,)).fetchone()
    return row[0] if row else None


def _insert_files(conn: sqlite3.Connection, files: Sequence[ProjectedFile], seq: int) -> None:
    file_id = conn.execute("SELECT coalesce(max(id), 0) FROM sbuf_files").fetchone()[0]
    chunk_id = conn.execute("SELECT coalesce(max(id), 0) FROM sbuf_chunks").fetchone()[0]
    file_rows, record_rows, chunk_rows = [], [], []
    for f in files:
        file_id += 1
        s = f.state
        file_rows.append((file_id, f.path, s.size, s.mtime_ns, s.ctime_ns, s.inode, int(s.racy), s.hash, f.error,
                          seq))
        r = f.record
        if r is None:
            continue
        record_rows.append((
            file_id, r.id, r.title, r.kind, r.scope, r.status, r.access, r.created_at, r.updated_at,
            _dump(r.tags), _dump(r.aliases), _dump(r.supersedes), _dump([list(x) for x in r.sources]), r.body,
            r.norm_title, r.norm_body))
        for chunk in f.chunks:
            chunk_id += 1
            chunk_rows.append((chunk_id, file_id, chunk.ordinal, chunk.text, chunk.retrieval))
    conn.executemany("INSERT INTO sbuf_files(id, path, size, mtime_ns, ctime_ns, inode, racy, hash, error, seq)"
                     " VALUES (?,?,?,?,?,?,?,?,?,?)", file_rows)
    conn.executemany(
        "INSERT INTO sbuf_records(file_id, id, title, kind, scope, status, access, created_at, updated_at, tags,"
        " aliases, supersedes, sources, body, norm_title, norm_body) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        record_rows)
    conn.executemany("INSERT INTO sbuf_chunks(id, file_id, ordinal, text, retrieval) VALUES (?,?,?,?,?)", chunk_rows)
    conn.executemany("INSERT INTO sbuf_fts(rowid, retrieval) VALUES (?, ?)", [(c[0], c[4]) for c in chunk_rows])


def _drop_file(conn: sqlite3.Connection, path: str, file_id: int | None) -> None:
    if file_id is None:
        return
    # External-content FTS5 deletes need the exact text that was indexed.
    conn.execute("INSERT INTO sbuf_fts(sbuf_fts, rowid, retrieval)"
                 " SELECT 'delete', id, retrieval FROM sbuf_chunks WHERE file_id = ?", (file_id,))
    conn.execute("DELETE FROM sbuf_chunks WHERE file_id = ?", (file_id,))
    conn.execute("DELETE FROM sbuf_records WHERE file_id = ?", (file_id,))
    conn.execute("DELETE FROM sbuf_files WHERE id = ?", (file_id,))


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- reads ----------------------------------------------------------------------


def data_version(store: Store) -> int:
    """Changes whenever another connection commits to the projection."""
    return store.execute("PRAGMA data_version")[0][0]


def file_states(store: Store, since: int = 0) -> tuple[dict[str, FileState], int, int]:
    """(states of the files changed after transaction ``since``, the latest
    transaction, how many files the projection holds)."""
    with store.read() as conn:
        rows = conn.execute("SELECT path, size, mtime_ns, ctime_ns, inode, racy, hash FROM sbuf_files"
                            " WHERE seq > ?", (since,)).fetchall()
        latest, total = conn.execute("SELECT coalesce(max(seq), 0), count(*) FROM sbuf_files").fetchone()
    states = {path: FileState(size, mtime, ctime, inode, bool(racy), h)
              for path, size, mtime, ctime, inode, racy, h in rows}
    return states, latest, total


def problems(store: Store) -> Problems:
    invalid = [(p, e) for p, e in store.execute(
        "SELECT path, error FROM sbuf_files WHERE error IS NOT NULL ORDER BY path")]
    return Problems(invalid, _duplicates(store, "SELECT id FROM sbuf_records GROUP BY id HAVING count(*) > 1", ()))


def problems_among(store: Store, paths: Sequence[str]) -> Problems:
    """The problems a change to ``paths`` can have brought into a store that had none."""
    if len(paths) > 500:
        return problems(store)
    rows = store.execute(
        "SELECT f.path, f.error, r.id FROM sbuf_files f LEFT JOIN sbuf_records r ON r.file_id = f.id"
        f" WHERE f.path IN ({','.join('?' * len(paths))}) ORDER BY f.path", tuple(paths))
    invalid = [(path, error) for path, error, _ in rows if error is not None]
    return Problems(invalid, duplicates_among(store, [rid for _, _, rid in rows if rid is not None]))


def duplicates_among(store: Store, record_ids: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The ids among ``record_ids`` that more than one file holds (a cheap check after a change)."""
    ids = sorted(set(record_ids))
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return _duplicates(store, f"SELECT id FROM sbuf_records WHERE id IN ({marks}) GROUP BY id HAVING count(*) > 1",
                       tuple(ids))


def _duplicates(store: Store, ids_sql: str, params: tuple) -> list[tuple[str, list[str]]]:
    dups: dict[str, list[str]] = {}
    for rid, path in store.execute(
            "SELECT r.id, f.path FROM sbuf_records r JOIN sbuf_files f ON f.id = r.file_id"
            f" WHERE r.id IN ({ids_sql}) ORDER BY r.id, f.path", params):
        dups.setdefault(rid, []).append(path)
    return sorted(dups.items())


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


@dataclass(slots=True, frozen=True)
class Clause:
    """One OR-ed phrase of a search.  ``floor_token``, when set, is a token every
    row matching the phrase contains (so its document count bounds the phrase's)."""

    expr: str
    floor_token: str | None = None


_HIT_COLUMNS = ("c.id, r.id, r.title, r.kind, r.scope, r.status, r.access, r.aliases, r.sources, f.path,"
                " c.ordinal, c.text")


def search(store: Store, clauses: Sequence[Clause], *, limit: int, statuses: Sequence[str] | None,
           accesses: Sequence[str] | None, scopes: Sequence[str] | None) -> list[ChunkHit]:
    """The ``limit`` best chunks for the OR of ``clauses`` among records passing the
    filters, ordered by bm25 (best first), record id, ordinal.

    FTS5 clamps the BM25 weight (IDF) of a phrase found in at least half of
    all rows to 1e-6, so such a clause moves no row's score by more than a few
    millionths, while scoring it for every row it matches is where the time
    of a query with common words goes.  So the rows matching the other
    (selective) clauses are ranked without it, and only when they are fewer
    than ``limit`` is the quota filled from rows matching nothing but the
    common clauses, ranked by those clauses alone: for such a row that is its
    whole score.  The results equal ranking everything at once, up to those
    millionths.  The document count of each clause's floor token (an exact
    lookup in the vocabulary table) proves that a clause is that common.
    """
    params: list = []
    where = (_in("r.status", statuses, params) + _in("r.access", accesses, params)
             + _in("r.scope", scopes, params))
    with store.read() as conn:
        rows = conn.execute("SELECT count(*) FROM sbuf_chunks").fetchone()[0]
        common = [c for c in clauses if c.floor_token and 2 * _doc_count(conn, c.floor_token) >= rows]
        selective = [c for c in clauses if c not in common]
        if not common:
            return _hits(conn, _or(selective), where, params, limit)
        hits = _hits(conn, _or(selective), where, params, limit) if selective else []
        if len(hits) >= limit:
            return hits
        # Every row the selective clauses match is in hits: the rest match only common clauses.
        seen = [h.chunk_rowid for h in hits]
        exclude = f" AND c.id NOT IN ({','.join('?' * len(seen))})" if seen else ""
        return hits + _hits(conn, _or(common), where + exclude, params + seen, limit - len(hits), skip=len(seen))


def _or(clauses: Sequence[Clause]) -> str:
    return " OR ".join(c.expr for c in clauses)


def _doc_count(conn: sqlite3.Connection, token: str) -> int:
    row = conn.execute("SELECT doc FROM sbuf_fts_vocab WHERE term = ?", (token,)).fetchone()
    return row[0] if row else 0


def _hits(conn: sqlite3.Connection, match: str, where: str, params: list, limit: int,
          skip: int = 0) -> list[ChunkHit]:
    """Rank inside the FTS table first (cheap), then fetch and filter only the
    leaders; joining every matching row before sorting costs several times more.

    The leaders are exact whenever at least ``limit`` of them pass the filters
    with a score strictly better than the last leader fetched; otherwise more
    leaders are fetched, and in the end one query joins and sorts every match.
    ``skip``: how many of the best matches the filters are known to exclude.
    """
    want = skip + limit + limit // 4 + 16
    for _ in range(3):
        leaders = conn.execute("SELECT rowid, bm25(sbuf_fts) AS s FROM sbuf_fts WHERE sbuf_fts MATCH ?"
                               " ORDER BY s LIMIT ?", (match, want)).fetchall()
        hits = _fetch(conn, leaders, where, params)
        if len(leaders) < want:  # every match was ranked
            return hits[:limit]
        last = leaders[-1][1]
        if sum(1 for h in hits if h.bm25 < last) >= limit:
            return hits[:limit]
        want *= 4
    sql = (f"SELECT {_HIT_COLUMNS}, bm25(sbuf_fts) AS score FROM sbuf_fts"
           " JOIN sbuf_chunks c ON c.id = sbuf_fts.rowid JOIN sbuf_records r ON r.file_id = c.file_id"
           f" JOIN sbuf_files f ON f.id = c.file_id WHERE sbuf_fts MATCH ?{where}"
           " ORDER BY score, r.id, c.ordinal LIMIT ?")
    return [_hit(row[:-1], row[-1]) for row in conn.execute(sql, (match, *params, limit))]


def _fetch(conn: sqlite3.Connection, leaders: Sequence[tuple[int, float]], where: str,
           params: list) -> list[ChunkHit]:
    """The leaders that pass the filters, ordered by score, record id, ordinal."""
    scores = dict(leaders)
    hits: list[ChunkHit] = []
    ids = list(scores)
    for start in range(0, len(ids), 500):
        batch = ids[start:start + 500]
        sql = (f"SELECT {_HIT_COLUMNS} FROM sbuf_chunks c JOIN sbuf_records r ON r.file_id = c.file_id"
               f" JOIN sbuf_files f ON f.id = c.file_id WHERE c.id IN ({','.join('?' * len(batch))}){where}")
        hits += [_hit(row, scores[row[0]]) for row in conn.execute(sql, (*batch, *params))]
    hits.sort(key=lambda h: (h.bm25, h.record.id, h.ordinal))
    return hits


def _hit(row: Sequence, score: float) -> ChunkHit:
    rowid, rid, title, kind, scope, status, access, aliases, sources, path, ordinal, text = row
    rec = RecordRow(rid, title, kind, scope, status, access, "", "", [],
                    json.loads(aliases) if aliases != "[]" else [], [],
                    [tuple(x) for x in json.loads(sources)], "", "", "", path)
    return ChunkHit(rec, ordinal, text, score, rowid)


__all__ = [
    "FileState", "RecordRow", "ChunkRow", "ProjectedFile", "ChunkHit", "Clause", "Problems", "StoreError",
    "open_projection", "discard_projection", "apply_changes", "clear", "data_version", "file_states",
    "problems", "problems_among", "duplicates_among", "counts", "find_records", "list_records", "overlapping", "search",
]
