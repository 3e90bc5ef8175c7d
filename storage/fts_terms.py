"""FTS5's terms and BM25 score, for a backend without FTS5 (PostgreSQL).

The SQLite index ranks symbols with FTS5: the ``porter unicode61
remove_diacritics 2`` tokenizer and ``bm25()`` with the
column weights of :data:`WEIGHTS`.  To rank the same way elsewhere, the terms
are taken from FTS5 itself (an in-memory table with the same tokenizer, read
back through ``fts5vocab``), never from a re-implementation that could drift,
and :func:`bm25` repeats FTS5's arithmetic step for step (fts5_aux.c), so the
scores are the same doubles and the order, ties included, the same.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache

TOKENIZE = "porter unicode61 remove_diacritics 2"
COLUMNS = ("name", "signature", "doc", "body")
WEIGHTS = (5.0, 3.0, 2.0, 2.0)  # bm25()'s column weights: names weigh most (storage/code_index.search_symbols)

_local = threading.local()


def _db() -> sqlite3.Connection:
    """This thread's in-memory FTS5 table (a tokenizer, nothing is kept in it)."""
    db = getattr(_local, "db", None)
    if db is None:
        db = sqlite3.connect(":memory:", isolation_level=None)
        # detail=full, as the index: its instance list holds every occurrence.
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5({', '.join(COLUMNS)}, "
                   f"tokenize = '{TOKENIZE}', detail = full)")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        _local.db = db
    return db


def _varints(blob: bytes) -> list[int]:
    """FTS5's docsize record: one SQLite varint per column."""
    out, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            out.append(value)
            value = 0
    return out


def postings(rows: Sequence[Sequence[str]]) -> tuple[list[tuple], list[int]]:
    """The FTS5 terms of rows of (name, signature, doc, body).

    Returns (terms, sizes): ``terms`` holds (row index, term, occurrences in
    name, signature, doc, body) for every term of every row; ``sizes[i]`` is
    FTS5's document length of row ``i`` (its tokens in all four columns).
    Occurrences, not just presence: FTS5's bm25() counts every occurrence.
    """
    if not rows:
        return [], []
    db = _db()
    db.execute("BEGIN")
    try:
        db.executemany("INSERT INTO t(rowid, name, signature, doc, body) VALUES (?,?,?,?,?)",
                       [(i, *(c or "" for c in row)) for i, row in enumerate(rows)])
        terms = db.execute(
            "SELECT doc, term, sum(col = 'name'), sum(col = 'signature'), sum(col = 'doc'), sum(col = 'body') "
            "FROM v GROUP BY doc, term").fetchall()
        sizes = [0] * len(rows)
        for rowid, blob in db.execute("SELECT id, sz FROM t_docsize"):
            sizes[rowid] = sum(_varints(blob))
    finally:
        db.execute("ROLLBACK")  # the table stays empty: the next call starts clean
    return terms, sizes


@lru_cache(maxsize=4096)
def query_terms(token: str) -> tuple[str, ...]:
    """The FTS5 terms a quoted query token stands for (usually one stem;
    none for punctuation, several when the tokenizer splits it)."""
    terms, _ = postings([(token, "", "", "")])
    return tuple(sorted({term for _, term, *_ in terms}))


K1 = 1.2
B = 0.75


def idf(nrow: int, nhit: int) -> float:
    """FTS5's inverse document frequency, floored at 1e-6 like fts5Bm25GetData."""
    value = math.log((nrow - nhit + 0.5) / (nhit + 0.5))
    return value if value > 0.0 else 1e-6


def bm25(phrase_hits: Iterable[dict[int, Sequence[int]]], nrow: int, ntok: int, doc_tokens: dict[int, int],
         limit: int) -> list[tuple[int, float]]:
    """Rank documents as FTS5's ``bm25()`` does for ``"a" OR "b" OR ...``.

    ``phrase_hits[i]`` maps each document holding phrase ``i`` to its
    occurrences per column; ``doc_tokens`` gives every such document's
    length.  Returns (document id, score), the best (highest) first, ties by
    id: the order of ``ORDER BY bm25(...), rowid``.
    """
    phrases = list(phrase_hits)
    if not phrases or nrow <= 0:
        return []
    avgdl = float(ntok) / float(nrow)
    idfs = [idf(nrow, len(hits)) for hits in phrases]
    docs = set().union(*phrases)
    scored = []
    for doc in docs:
        D = float(doc_tokens.get(doc, 0))
        score = 0.0
        for weight_of, hits in zip(idfs, phrases):
            freq = 0.0
            for n, w in zip(hits.get(doc, _NONE), WEIGHTS):
                for _ in range(n):  # one addition per instance, as fts5Bm25Function sums them
                    freq += w
            score += weight_of * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * D / avgdl)))
        scored.append((-1.0 * score, doc))
    scored.sort()
    return [(doc, -s) for s, doc in scored[:limit]]


_NONE = (0, 0, 0, 0)
