"""The code index's PostgreSQL-only parts: bulk writes and the BM25 search.

storage/code_index.py calls these when ``store.dialect`` is
``"postgresql"``; everything else it does is portable SQL.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from .file_ids import numbered
from .fts_terms import bm25 as fts_bm25
from .fts_terms import postings, query_terms

TERM_COLUMNS = ("term", "symbol_id", "file_id", "n_name", "n_signature", "n_doc", "n_body")
TERM_TYPES = ("text", "int8", "int8", "int4", "int4", "int4", "int4")
# The postings' indexes, dropped while a cold index loads and built once at
# its end: a B-tree fed a million terms in random order costs several times
# building it from the loaded rows.
TERM_INDEXES = (("symbol_terms_term", "term"), ("symbol_terms_file", "file_id"))
SYMBOL_COLUMNS = ("id", "file_id", "name", "qualname", "kind", "parent", "start_byte", "end_byte",
                  "start_line", "end_line", "signature", "docstring", "fts_tokens")


FILE_COLUMNS = ("id", "path", "language", "size", "mtime_ns", "hash", "status", "error", "encoding",
                "lines", "is_test", "indexed_at")


def write_files(conn, files: Sequence[tuple]) -> list[int]:
    """Replace the rows of many files at once: items of (rec, text, symbols,
    refs, imports, fts_rows) as :func:`storage.code_index.write_file` takes
    them.  One COPY per table for the whole batch: a round trip per file
    and table would cost more than the rows themselves.  Ids are assigned
    as SQLite assigns them (the largest so far plus one), so both backends
    number the same rows alike.
    """
    if not files:
        return []
    paths = [f[0].path for f in files]
    old = dict(conn.execute("SELECT path, id FROM files WHERE path = ANY(?)", (paths,)).fetchall())
    conn.execute("DELETE FROM skipped WHERE path = ANY(?)", (paths,))
    found, sizes = postings([row for f in files for row in f[5]])
    # found: (index of the symbol in this batch, term, counts...), grouped by symbol
    owner: list[tuple[int, int]] = []  # batch symbol index -> (symbol id, file id)
    file_rows, texts, symbols, refs, imports = [], [], [], [], []
    ids, at = [], 0

    def drop(file_id: int) -> None:
        forget_rows(conn, file_id)
        conn.execute("DELETE FROM files WHERE id = ?", (file_id,))  # cascades

    for (file_id, next_symbol), (rec, text, syms, file_refs, file_imports, fts_rows) in numbered(
            conn, files, old, drop, (("files", None), ("symbols", 2))):
        ids.append(file_id)
        clean = _without_nul if "\x00" in text else _as_is  # whatever a NUL-free text yields is NUL-free
        file_rows.append(clean((file_id, rec.path, rec.language, rec.size, rec.mtime_ns, rec.hash, rec.status,
                                rec.error, rec.encoding, rec.lines, int(rec.is_test), rec.indexed_at)))
        texts.append((file_id, text.encode("utf-8")))
        for sid, row in enumerate(syms, next_symbol):
            symbols.append(clean((sid, file_id, *row, sizes[at + sid - next_symbol])))
            owner.append((sid, file_id))
        at += len(syms)
        refs.extend(clean((file_id, *row)) for row in file_refs)
        imports.extend(clean((file_id, *row)) for row in file_imports)
    conn.copy_rows("files", FILE_COLUMNS, file_rows, checked=True)
    conn.copy_rows("file_text", ("file_id", "text"), texts, checked=True)
    conn.copy_rows("symbols", SYMBOL_COLUMNS, symbols, checked=True)
    conn.copy_rows("symbol_terms", TERM_COLUMNS,
                   ((term, *owner[i], *counts) for i, term, *counts in found), checked=True, types=TERM_TYPES)
    conn.copy_rows("refs", ("file_id", "scope", "name", "kind", "receiver", "line", "count"), refs, checked=True)
    conn.copy_rows("imports", ("file_id", "module", "name", "alias", "line", "target_path"), imports,
                   checked=True)
    if sizes:
        conn.execute("UPDATE fts_totals SET nrow = nrow + ?, ntok = ntok + ? WHERE id = 1",
                     (len(sizes), sum(sizes)))
    return ids


def update_by_id(conn, table: str, column: str, rows: list[tuple[str | None, int]]) -> None:
    """``UPDATE table SET column = value WHERE id = id`` for many (value, id)
    rows: one COPY and one joined UPDATE instead of a statement per row
    (the references a graph resolves after a cold index are 100k+ rows)."""
    if len(rows) < 50:
        conn.executemany(f"UPDATE {table} SET {column} = ? WHERE id = ?", rows)
        return
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS id_values (value text, id bigint) ON COMMIT DELETE ROWS")
    conn.execute("DELETE FROM id_values")
    last = {i: v for v, i in rows}  # an id given twice takes its last value, as one UPDATE per row would
    conn.copy_rows("id_values", ("value", "id"), ((v, i) for i, v in last.items()))
    conn.execute(f"UPDATE {table} AS t SET {column} = v.value FROM id_values AS v WHERE t.id = v.id")
    conn.execute("DELETE FROM id_values")


def _as_is(row: tuple) -> tuple:
    return row


def _without_nul(row: tuple) -> tuple:
    # PostgreSQL text cannot hold NUL (file texts are bytea and exact).
    return tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row)


def drop_term_indexes(conn) -> None:
    for name, _ in TERM_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")


def ensure_term_indexes(conn) -> None:
    for name, column in TERM_INDEXES:
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON symbol_terms({column})")


def forget_rows(conn, file_id: int) -> None:
    """Take a file's symbols out of BM25's corpus figures and drop its postings
    (its other rows go by cascade when its files row is deleted).  The
    postings carry no foreign key: checking one for each of a million rows
    was a third of a cold index."""
    conn.execute("UPDATE fts_totals SET nrow = nrow - s.n, ntok = ntok - s.t "
                 "FROM (SELECT count(*) AS n, coalesce(sum(fts_tokens), 0) AS t FROM symbols WHERE file_id = ?) s "
                 "WHERE fts_totals.id = 1", (file_id,))
    conn.execute("DELETE FROM symbol_terms WHERE file_id = ?", (file_id,))


def _term_of(token: str) -> str | None:
    """The one FTS5 term of a query token (storage/code_index.search_symbols has
    refused tokens the tokenizer splits), or None for punctuation."""
    terms = query_terms(token)
    return terms[0] if terms else None


class _Postings:
    """One reader's copy of the postings it has searched, good while the
    index's code generation holds (every write of a file renews it).  A
    question's terms mostly come back in later questions; fetching a common
    term's thousands of rows again each time was most of a search on a
    server across the network."""

    MAX_ROWS = 200_000  # postings kept before the copy starts afresh (a search reads a few thousand)

    def __init__(self, store, generation: str | None):
        self.store, self.generation = store, generation
        self.terms: dict[str, dict[int, tuple[int, ...]]] = {}
        self.counts: dict[tuple[str, int], int] = {}  # (term, cap) -> symbols holding it, at most cap
        self.rows = 0
        self.lock = threading.Lock()  # a server's worker threads share one copy
        with store.read():
            self.nrow, self.ntok = store.execute("SELECT nrow, ntok FROM fts_totals WHERE id = 1")[0]
            # Every symbol's length at once (tens of thousands of small rows,
            # read once per generation): BM25 needs it for whatever matches.
            self.lengths: dict[int, int] = dict(store.execute("SELECT id, fts_tokens FROM symbols"))

    def match_count(self, token: str, cap: int) -> int:
        """How many symbols hold ``token`` (at most ``cap``): FTS5's ``MATCH`` count."""
        term = _term_of(token)
        if term is None:
            return 0
        with self.lock:
            return self._count(term, cap)

    def search(self, tokens: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """``tokens`` OR-ed, ranked by FTS5's BM25 with the index's column weights."""
        terms = [_term_of(t) for t in tokens]
        hits = self.hits([t for t in terms if t is not None])
        phrases = [hits[t] if t is not None else {} for t in terms]
        return fts_bm25(phrases, self.nrow, self.ntok, self.lengths, limit)

    def _count(self, term: str, cap: int) -> int:
        n = self.counts.get((term, cap))
        if n is None:
            known = self.terms.get(term)
            if known is not None:
                n = min(len(known), cap)
            else:
                n = self.store.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM symbol_terms WHERE term = ? LIMIT ?) AS m", (term, cap))[0][0]
            if len(self.counts) > 100_000:
                self.counts.clear()
            self.counts[(term, cap)] = n
        return n

    def hits(self, terms: Sequence[str]) -> dict[str, dict[int, tuple[int, ...]]]:
        with self.lock:
            return self._hits(terms)

    def _hits(self, terms: Sequence[str]) -> dict[str, dict[int, tuple[int, ...]]]:
        if self.rows > self.MAX_ROWS:  # before deciding what to fetch: what is kept stays until returned
            self.terms.clear()
            self.rows = 0
        missing = sorted({t for t in terms if t not in self.terms})
        if missing:
            fetched: dict[str, dict[int, tuple[int, ...]]] = {t: {} for t in missing}
            # = ANY(array): one statement text whatever the count.
            for term, sid, *counts in self.store.execute(
                    "SELECT term, symbol_id, n_name, n_signature, n_doc, n_body FROM symbol_terms "
                    "WHERE term = ANY(?)", (missing,)):
                fetched[term][sid] = tuple(counts)
            for term, found in fetched.items():
                self.terms[term] = found
                self.rows += len(found)
        return {t: self.terms[t] for t in terms}


_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def postings_of(store) -> _Postings:
    """The store's postings copy for its current code generation (one query to
    check it; a search then asks the copy for counts and scores)."""
    generation = store.get_meta("code_generation")
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None or cache.generation != generation or generation is None:
            cache = _caches[store] = _Postings(store, generation)
        return cache
