"""Reads and writes of the code index tables (files, symbols, refs, imports).

Functions taking ``conn`` run inside a caller's :meth:`Store.write`
transaction, so a file's facts are replaced all at once or not at all.
Records are duck-typed: any object with the documented attributes will do
(the indexer passes its dataclasses), which keeps this layer free of imports
from the layers above it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

from .db import Store
from .file_ids import numbered
from .fts_terms import WEIGHTS, query_terms
from .pg_index import (
    drop_term_indexes,
    ensure_term_indexes,
    forget_rows,
    postings_of,
)
from .pg_index import update_by_id as pg_update_by_id
from .pg_index import write_files as pg_write_files
from .text import fts_quote, stored_text

log = logging.getLogger(__name__)


class PhraseQueryError(Exception):
    """A token the tokenizer splits in several terms: a phrase, which the
    symbol search never answers (see search_symbols)."""


_TOKEN_SPLIT = re.compile(r"[\W_]+", re.UNICODE)


def _on_postgres(conn) -> bool:
    return getattr(conn, "dialect", "sqlite") == "postgresql"


@dataclass(slots=True)
class FileRecord:
    path: str
    language: str | None
    size: int
    mtime_ns: int
    hash: str
    status: str  # ok | syntax_error
    error: str | None
    encoding: str
    lines: int
    is_test: bool
    indexed_at: float


@dataclass(slots=True, frozen=True)
class FileState:
    size: int
    mtime_ns: int
    hash: str


def write_file(
    conn: sqlite3.Connection,
    rec: FileRecord,
    text: str,
    symbols: Sequence[tuple],
    refs: Sequence[tuple],
    imports: Sequence[tuple],
    fts_rows: Sequence[tuple[str, str, str, str]],
) -> int:
    """Replace everything known about ``rec.path`` with the given rows.

    Rows are plain tuples in column order (cheap to build in a worker process
    and to pickle back):

    * ``symbols``: (name, qualname, kind, parent, start_byte, end_byte,
      start_line, end_line, signature, docstring)
    * ``refs``: (scope, name, kind, receiver, line, count)
    * ``imports``: (module, name, alias, line, target_path)
    * ``fts_rows[i]``: the (name, signature, doc, body) search text of ``symbols[i]``
    """
    return write_files(conn, [(rec, text, symbols, refs, imports, fts_rows)])[0]


@contextlib.contextmanager
def bulk_load(store: Store, cold: bool) -> Iterator[None]:
    """Around an index run's writes.  On PostgreSQL, a ``cold`` run (an empty
    index) loads the search postings without their indexes and builds them
    at the end; every run starts by making sure they exist, so a killed cold
    run costs the next one that build, never a search without them.  SQLite
    needs nothing."""
    if store.dialect != "postgresql":
        yield
        return
    with store.write() as conn:
        if cold:
            drop_term_indexes(conn)
        else:
            ensure_term_indexes(conn)
    try:
        yield
    except BaseException:
        if cold:  # best effort: the next run builds them if this cannot
            with contextlib.suppress(Exception), store.write() as conn:
                ensure_term_indexes(conn)
        raise
    if cold:
        with store.write() as conn:
            ensure_term_indexes(conn)


def write_files(conn: sqlite3.Connection, files: Sequence[tuple]) -> list[int]:
    """:func:`write_file` for many files in one go: items of (rec, text,
    symbols, refs, imports, fts_rows); returns their file ids.

    Each table gets its rows for the whole batch at once, and the search
    rows come last: FTS5 writes out what it has gathered at every later
    statement of the transaction that opens a savepoint, so search rows
    written file by file became a segment per file, each merged again and
    again as the index grew.  Ids are those a file-at-a-time writer gives
    (storage/file_ids.py)."""
    if _on_postgres(conn):
        return pg_write_files(conn, files)
    if not files:
        return []
    paths = [f[0].path for f in files]
    old = _file_ids(conn, paths)
    _delete_where_path_in(conn, "skipped", paths)
    file_rows, texts, symbols, search, refs, imports = [], [], [], [], [], []
    ids = []
    for (file_id, first, ref_id, import_id), (rec, text, syms, file_refs, file_imports, fts_rows) in numbered(
            conn, files, old, lambda fid: _delete_file_id(conn, fid), _NUMBERED):
        ids.append(file_id)
        file_rows.append((file_id, rec.path, rec.language, rec.size, rec.mtime_ns, rec.hash, rec.status,
                          rec.error, rec.encoding, rec.lines, int(rec.is_test), rec.indexed_at))
        texts.append((file_id, text))
        symbols += [(sid, file_id, *row) for sid, row in enumerate(syms, first)]
        search += [(sid, *row) for sid, row in enumerate(fts_rows, first)]
        refs += [(rid, file_id, *row) for rid, row in enumerate(file_refs, ref_id)]
        imports += [(iid, file_id, *row) for iid, row in enumerate(file_imports, import_id)]
    insert_rows(conn, "files", FILE_COLUMNS, file_rows)
    insert_rows(conn, "file_text", ("file_id", "text"), texts)
    insert_rows(conn, "symbols", SYMBOL_COLUMNS, symbols)
    insert_rows(conn, "refs", REF_COLUMNS, refs)
    insert_rows(conn, "imports", IMPORT_COLUMNS, imports)
    # One row per statement here: a statement of many rows opens a savepoint,
    # and FTS5 writes out a segment at each.
    conn.executemany("INSERT INTO symbols_fts(rowid, name, signature, doc, body) VALUES (?,?,?,?,?)", search)
    return ids


FILE_COLUMNS = ("id", "path", "language", "size", "mtime_ns", "hash", "status", "error", "encoding",
                "lines", "is_test", "indexed_at")
SYMBOL_COLUMNS = ("id", "file_id", "name", "qualname", "kind", "parent", "start_byte", "end_byte",
                  "start_line", "end_line", "signature", "docstring")
REF_COLUMNS = ("id", "file_id", "scope", "name", "kind", "receiver", "line", "count")
IMPORT_COLUMNS = ("id", "file_id", "module", "name", "alias", "line", "target_path")
# The tables whose ids a batch assigns, and where an item holds its rows for each.
_NUMBERED = (("files", None), ("symbols", 2), ("refs", 3), ("imports", 4))
# Rows per INSERT statement.  A statement executed per row pays SQLite's whole
# statement start and end (transaction check, savepoint, reset) for each; the
# refs of a batch went in a third faster 64 rows at a time.  12 columns x 64
# stays far below the oldest limit on bound parameters (999).
_ROWS_PER_INSERT = 64


def insert_rows(conn: sqlite3.Connection, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
    """INSERT ``rows`` in order (rowids come out as one INSERT per row gives them)."""
    if not rows:
        return
    one = "(" + ",".join("?" * len(columns)) + ")"
    head = f"INSERT INTO {table}({', '.join(columns)}) VALUES "
    full = len(rows) - len(rows) % _ROWS_PER_INSERT
    if full:
        flat = list(chain.from_iterable(rows[:full]))
        step = _ROWS_PER_INSERT * len(columns)
        conn.executemany(head + ",".join([one] * _ROWS_PER_INSERT),
                         [flat[i : i + step] for i in range(0, len(flat), step)])
    if full < len(rows):
        conn.executemany(head + one, rows[full:])


def _file_ids(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(0, len(paths), 500):
        chunk = paths[i : i + 500]
        out.update(conn.execute(f"SELECT path, id FROM files WHERE path IN ({','.join('?' * len(chunk))})",
                                chunk).fetchall())
    return out


def _delete_where_path_in(conn: sqlite3.Connection, table: str, paths: Sequence[str]) -> None:
    for i in range(0, len(paths), 500):
        chunk = paths[i : i + 500]
        conn.execute(f"DELETE FROM {table} WHERE path IN ({','.join('?' * len(chunk))})", chunk)


def _delete_file_id(conn: sqlite3.Connection, file_id: int) -> None:
    conn.execute("DELETE FROM symbols_fts WHERE rowid IN (SELECT id FROM symbols WHERE file_id = ?)", (file_id,))
    conn.execute("DELETE FROM files WHERE id = ?", (file_id,))  # cascades


def _delete_file_rows(conn: sqlite3.Connection, path: str) -> None:
    row = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return
    if _on_postgres(conn):
        forget_rows(conn, row[0])
        conn.execute("DELETE FROM files WHERE id = ?", (row[0],))  # cascades
        return
    _delete_file_id(conn, row[0])


def delete_files(conn: sqlite3.Connection, paths: Iterable[str]) -> None:
    for path in paths:
        _delete_file_rows(conn, path)
        conn.execute("DELETE FROM skipped WHERE path = ?", (path,))


def set_skipped(conn: sqlite3.Connection, path: str, reason: str, size: int | None) -> None:
    _delete_file_rows(conn, path)
    conn.execute(
        "INSERT INTO skipped(path, reason, size) VALUES (?,?,?) "
        "ON CONFLICT(path) DO UPDATE SET reason = excluded.reason, size = excluded.size",
        (path, reason, size),
    )


def forget_skipped(conn: sqlite3.Connection, paths: Iterable[str]) -> None:
    """Drop the skipped-list entries of ``paths`` and of everything under them as folders."""
    for path in paths:
        conn.execute("DELETE FROM skipped WHERE path = ? OR substr(path, 1, ?) = ?",
                     (path, len(path) + 1, path + "/"))


def replace_skipped(conn: sqlite3.Connection, skipped: Iterable[tuple[str, str, int | None]]) -> None:
    """Replace the whole skipped-files list (after a full scan)."""
    conn.execute("DELETE FROM skipped")
    conn.executemany("INSERT INTO skipped(path, reason, size) VALUES (?,?,?) ON CONFLICT(path) DO UPDATE "
                     "SET reason = excluded.reason, size = excluded.size", list(skipped))


def set_import_targets(conn: sqlite3.Connection, rows: Iterable[tuple[str | None, int]]) -> None:
    """Update resolved import targets: rows of (target_path, import id)."""
    if _on_postgres(conn):
        return pg_update_by_id(conn, "imports", "target_path", list(rows))
    conn.executemany("UPDATE imports SET target_path = ? WHERE id = ?", list(rows))


# -- reads --------------------------------------------------------------------


GENERATION_KEY = "code_generation"


def code_generation(store: Store) -> str | None:
    """The token the schema's triggers replace on every change the graph is
    built from (files written or dropped, import targets re-pointed)."""
    row = store.execute("SELECT value FROM meta WHERE key = ?", (GENERATION_KEY,))
    return row[0][0] if row else None


def file_states(store: Store) -> dict[str, FileState]:
    rows = store.execute("SELECT path, size, mtime_ns, hash FROM files")
    return {p: FileState(s, m, h) for p, s, m, h in rows}


def file_versions(store: Store) -> dict[str, tuple[str, float]]:
    """Each indexed file's (hash, time its rows were written).  A file whose
    bytes did not change may still have been written anew (dropped and
    indexed again, re-parsed): its symbols then have new ids, which full-text
    hits are read by, so a graph that follows the index must take it again."""
    return {p: (h, t) for p, h, t in store.execute("SELECT path, hash, indexed_at FROM files")}


def file_states_of(store: Store, paths: Iterable[str]) -> dict[str, FileState]:
    """:func:`file_states` of ``paths`` only (those indexed)."""
    paths = list(dict.fromkeys(paths))
    out: dict[str, FileState] = {}
    for i in range(0, len(paths), 500):
        chunk = paths[i : i + 500]
        for p, s, m, h in store.execute(
                f"SELECT path, size, mtime_ns, hash FROM files WHERE path IN ({','.join('?' * len(chunk))})",
                tuple(chunk)):
            out[p] = FileState(s, m, h)
    return out


def file_paths(store: Store) -> list[str]:
    return [r[0] for r in store.execute("SELECT path FROM files ORDER BY path")]


def file_text(store: Store, path: str) -> str | None:
    rows = store.execute(
        "SELECT t.text FROM file_text t JOIN files f ON f.id = t.file_id WHERE f.path = ?", (path,)
    )
    return stored_text(rows[0][0]) if rows else None


def file_texts(store: Store, paths: Iterable[str]) -> dict[str, str]:
    return {p: row[0] for p, row in _file_rows(store, "t.text", paths).items()}


def file_texts_counted(store: Store, paths: Iterable[str]) -> dict[str, tuple[str, str, int | None]]:
    """path -> (text, content hash, its cl100k token count if one was saved)."""
    return _file_rows(store, "t.text, f.hash, f.tokens", paths)


# A run that rewrote this share of an index's files (an extractor upgrade re-deriving every
# file, a branch switch) merges the symbol search's segments afterwards.
REWRITE_SHARE_TO_MERGE = 0.2
REWRITE_FILES_TO_MERGE = 200


def merge_search_segments(conn: sqlite3.Connection) -> None:
    """Merge the symbol search index into one segment.  Rows deleted and written again leave
    their old entries in the segments until FTS5's gradual merging reaches them: after every file
    of a 750k-line project was re-derived in place, the search table held three times the pages
    of a fresh index, and a question's searches took a millisecond longer.  PostgreSQL keeps no
    segments."""
    if not _on_postgres(conn):
        conn.execute("INSERT INTO symbols_fts(symbols_fts) VALUES('optimize')")


def set_file_tokens(conn: sqlite3.Connection, rows: Iterable[tuple[int, str, str]]) -> None:
    """Save whole-file token counts: rows of (tokens, path, content hash).  A
    file rewritten since it was counted has another hash and is left alone."""
    conn.executemany("UPDATE files SET tokens = ? WHERE path = ? AND hash = ?", list(rows))


def uncounted_files(store: Store) -> list[tuple[str, int]]:
    """(path, size in bytes) of every file whose whole-text token count is not
    saved yet, files not tests first, then largest first; the texts are read
    a few at a time with :func:`file_texts_counted`."""
    return [(p, size) for p, size in store.execute(
        "SELECT path, size FROM files WHERE tokens IS NULL ORDER BY is_test, size DESC, path")]


def any_uncounted(store: Store) -> bool:
    """Whether some file's whole-text token count is not saved yet (a look of a millisecond)."""
    return bool(store.execute("SELECT 1 FROM files WHERE tokens IS NULL LIMIT 1"))


def _file_rows(store: Store, columns: str, paths: Iterable[str]) -> dict[str, tuple]:
    paths = list(dict.fromkeys(paths))
    out: dict[str, tuple] = {}
    for i in range(0, len(paths), 500):
        chunk = paths[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for p, *rest in store.execute(
            f"SELECT f.path, {columns} FROM file_text t JOIN files f ON f.id = t.file_id WHERE f.path IN ({marks})",
            tuple(chunk),
        ):
            out[p] = (stored_text(rest[0]), *rest[1:])
    return out


def language_counts(store: Store) -> dict[str, int]:
    rows = store.execute("SELECT coalesce(language, 'other'), count(*) FROM files GROUP BY 1 ORDER BY 2 DESC")
    return {lang: n for lang, n in rows}


def skipped_counts(store: Store) -> dict[str, int]:
    rows = store.execute("SELECT reason, count(*) FROM skipped GROUP BY reason ORDER BY 2 DESC")
    return {reason: n for reason, n in rows}


def skip_reason(store: Store, path: str) -> str | None:
    """Why ``path`` was seen but not indexed, if it was."""
    rows = store.execute("SELECT reason FROM skipped WHERE path = ?", (path,))
    return rows[0][0] if rows else None


def skipped_files(store: Store) -> list[tuple[str, str, int | None]]:
    """(path, reason, size) of every file the index left out, by path."""
    return list(store.execute("SELECT path, reason, size FROM skipped ORDER BY path"))


def syntax_error_files(store: Store, limit: int | None = 5) -> list[tuple[str, str | None]]:
    """(path, the parser's account) of up to ``limit`` (None: all) files indexed with syntax errors, by path."""
    return [(p, e) for p, e in store.execute(
        "SELECT path, error FROM files WHERE status = 'syntax_error' ORDER BY path LIMIT ?",
        (1 << 62 if limit is None else limit,))]  # a number both SQLite and PostgreSQL take


def syntax_error_of(store: Store, path: str) -> str | None:
    """The parser's account of ``path``'s syntax errors ("" when it gave none); None when the file
    parsed cleanly or is not indexed."""
    for (error,) in store.execute("SELECT error FROM files WHERE path = ? AND status = 'syntax_error'", (path,)):
        return error or ""
    return None


def status_counts(store: Store) -> dict[str, int]:
    rows = store.execute("SELECT status, count(*) FROM files GROUP BY status")
    return {s: n for s, n in rows}


def search_symbols(store: Store, terms: Sequence[str], limit: int = 50,
                   counts: dict[str, int] | None = None) -> list[tuple[int, float]]:
    """BM25 search over symbol name, signature, docstring and code.

    Returns (symbol id, score) best first; higher scores are better.  Terms
    are OR-ed so partial matches still rank, and names weigh most.  Scoring
    costs time per matching row, so terms that match a large share of the
    symbols ("returns", "value") are left out: they would barely move BM25.
    ``counts`` may hold (and receives) the number of rows each token matches,
    for a caller that knows when the index changed.
    """
    # The tokenizer splits at underscores and punctuation: search the single
    # tokens.  One the tokenizer still splits (rare characters) would be a
    # phrase query; the index once refused those (it kept no positions), so
    # such a search finds nothing, on either backend, as it always did.
    tokens = list(dict.fromkeys(p for t in terms for p in _TOKEN_SPLIT.split(t.lower()) if p))
    if not tokens:
        return []
    try:
        for t in tokens:
            if len(query_terms(t)) > 1:
                raise PhraseQueryError(t)
        memo = {} if counts is None else counts
        if store.dialect == "postgresql":
            index = postings_of(store)
            return index.search(_selective_tokens(tokens, memo, index.match_count), limit)
        tokens = _selective_tokens(tokens, memo, lambda t, cap: store.execute(
            "SELECT count(*) FROM (SELECT rowid FROM symbols_fts WHERE symbols_fts MATCH ? LIMIT ?)",
            (fts_quote(t), cap))[0][0])
        # Ties go by symbol id, the order the PostgreSQL backend gives them too.
        rows = store.execute(
            f"SELECT rowid, bm25(symbols_fts, {_BM25_WEIGHTS}) AS s FROM symbols_fts "
            "WHERE symbols_fts MATCH ? ORDER BY s, rowid LIMIT ?",
            (" OR ".join(fts_quote(t) for t in tokens), limit),
        )
    except (sqlite3.OperationalError, PhraseQueryError) as exc:
        log.warning("full-text search failed for %r: %s", tokens[:20], exc)
        return []
    return [(rowid, -score) for rowid, score in rows]


_BM25_WEIGHTS = ", ".join(map(str, WEIGHTS))  # name, signature, doc, body; the PostgreSQL scoring uses the same
SEARCH_MAX_ROWS = 4000  # rows BM25 scores at most, about 20 ms


def _selective_tokens(tokens: list[str], memo: dict[str, int], match_count) -> list[str]:
    """The tokens worth scoring: rarest first, until about SEARCH_MAX_ROWS rows
    match.  ``match_count(token, cap)`` is the backend's count of rows holding
    a token, at most ``cap``."""
    cap = SEARCH_MAX_ROWS + 1
    counts = []
    for t in tokens:
        n = memo.get(t)
        if n is None:
            n = memo[t] = match_count(t, cap)
        if n:
            counts.append((n, t))
    if not counts:
        return tokens
    counts.sort()
    kept, total = [], 0
    for n, t in counts:
        if kept and total + n > SEARCH_MAX_ROWS:
            break
        kept.append(t)
        total += n
    return kept


# -- bulk loads for the in-memory graph ---------------------------------------

def _path_filter(paths: Sequence[str] | None) -> tuple[str, tuple]:
    if paths is None:
        return "", ()
    return f" WHERE f.path IN ({','.join('?' * len(paths))})", tuple(paths)


# What the graph is built from, table by table: a row's columns, where they are read from, and
# the id rows come in the order of.  The load_* functions read a table whole,
# load_graph_rows_in_pages a page at a time; both give the same rows.
_FILE_ROWS = ("f.path, f.language, f.is_test, f.lines, f.status", "files f", "f.id")
_SYMBOL_ROWS = ("s.id, f.path, s.name, s.qualname, s.kind, s.parent, s.start_line, s.end_line, s.signature,"
                " s.docstring", "symbols s JOIN files f ON f.id = s.file_id", "s.id")
_REF_ROWS = ("r.id, f.path, r.scope, r.name, r.kind, r.receiver, r.line, r.count, r.target",
             "refs r JOIN files f ON f.id = r.file_id", "r.id")
_IMPORT_ROWS = ("f.path, i.module, i.name, i.alias, i.line, i.target_path",
                "imports i JOIN files f ON f.id = i.file_id", "i.id")


def _load(store: Store, table: tuple[str, str, str], paths: Sequence[str] | None) -> list[tuple]:
    columns, source, order = table
    where, params = _path_filter(paths)
    return store.execute(f"SELECT {columns} FROM {source}{where} ORDER BY {order}", params)


def load_files(store: Store, paths: Sequence[str] | None = None) -> list[tuple]:
    """Rows of (path, language, is_test, lines, status)."""
    return _load(store, _FILE_ROWS, paths)


def load_symbols(store: Store, paths: Sequence[str] | None = None) -> list[tuple]:
    """Rows of (id, path, name, qualname, kind, parent, start_line, end_line, signature, docstring)."""
    return _load(store, _SYMBOL_ROWS, paths)


def load_refs(store: Store, paths: Sequence[str] | None = None) -> list[tuple]:
    """Rows of (id, path, scope, name, kind, receiver, line, count, target): ``target`` as
    stored, which the graph compares with what it resolves the reference to."""
    return _load(store, _REF_ROWS, paths)


def load_imports(store: Store, paths: Sequence[str] | None = None) -> list[tuple]:
    """Rows of (path, module, name, alias, line, target_path)."""
    return _load(store, _IMPORT_ROWS, paths)


GRAPH_PAGE_ROWS = 1_000  # rows per read of load_graph_rows_in_pages: a few milliseconds each


class RowsMoved(Exception):
    """The index changed while its rows were read a page at a time."""


def load_graph_rows_in_pages(store: Store, pause: Callable[[], None]) -> tuple[str | None, list, list, list, list]:
    """(generation, files, symbols, imports, refs): what the four ``load_*``
    functions above return for the whole index, read a page at a time with
    ``pause`` called between pages.

    One read of every row holds the store for half a second on a large
    project, and every question waits for the store meanwhile; a page holds
    it a few milliseconds.  The pages are one consistent picture only if
    nothing was written between them: the generation (renewed by every write
    of the rows read here) is compared before and after, and
    :class:`RowsMoved` raised when it moved."""
    generation = code_generation(store)
    files = _pages(store, _FILE_ROWS, pause)
    pause()
    symbols = _pages(store, _SYMBOL_ROWS, pause)
    imports = _pages(store, _IMPORT_ROWS, pause)
    refs = _pages(store, _REF_ROWS, pause)
    if code_generation(store) != generation:
        raise RowsMoved
    return generation, files, symbols, imports, refs


def _pages(store: Store, table: tuple[str, str, str], pause: Callable[[], None]) -> list:
    """Every row of ``table`` (as :func:`_load` reads it), a page at a time in id order."""
    columns, source, order = table
    has_id = columns.startswith(order + ",")  # else the id is read first and left out of the rows
    sql = (f"SELECT {columns if has_id else f'{order}, {columns}'} FROM {source}"
           f" WHERE {order} > ? ORDER BY {order} LIMIT ?")
    page = GRAPH_PAGE_ROWS
    rows: list = []
    after = -1
    while True:
        chunk = store.execute(sql, (after, page))
        rows.extend(chunk if has_id else (tuple(row[1:]) for row in chunk))
        if len(chunk) < page:
            return rows
        after = chunk[-1][0]
        pause()


def set_ref_targets(conn: sqlite3.Connection, rows: Iterable[tuple[str | None, int]]) -> None:
    """Persist resolved reference targets: rows of (target 'path::qualname' or None, ref id)."""
    if _on_postgres(conn):
        return pg_update_by_id(conn, "refs", "target", list(rows))
    conn.executemany("UPDATE refs SET target = ? WHERE id = ?", list(rows))
