"""The code index's PostgreSQL-only parts: bulk writes and the BM25 search.

storage/code_index.py calls these when ``store.dialect`` is
``"postgresql"``; everything else it does is portable SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from .fts_terms import bm25 as fts_bm25
from .fts_terms import postings, query_terms

TERM_COLUMNS = ("term", "symbol_id", "file_id", "n_name", "n_signature", "n_doc", "n_body")
SYMBOL_COLUMNS = ("id", "file_id", "name", "qualname", "kind", "parent", "start_byte", "end_byte",
                  "start_line", "end_line", "signature", "docstring", "fts_tokens")


def write_rows(conn, file_id: int, first: int, symbols: Sequence[tuple], refs: Sequence[tuple],
               imports: Sequence[tuple], fts_rows: Sequence[tuple[str, str, str, str]]) -> None:
    """A file's symbols, search postings, references and imports, by COPY."""
    found = postings(fts_rows)
    conn.copy_rows("symbols", SYMBOL_COLUMNS,
                   ((sid, file_id, *row, found[i][1]) for i, (sid, row) in enumerate(enumerate(symbols, first))))
    conn.copy_rows("symbol_terms", TERM_COLUMNS,
                   ((term, sid, file_id, *counts)
                    for sid, (terms, _) in enumerate(found, first) for term, counts in terms.items()))
    if found:
        conn.execute("UPDATE fts_totals SET nrow = nrow + ?, ntok = ntok + ? WHERE id = 1",
                     (len(found), sum(n for _, n in found)))
    conn.copy_rows("refs", ("file_id", "scope", "name", "kind", "receiver", "line", "count"),
                   ((file_id, *row) for row in refs))
    conn.copy_rows("imports", ("file_id", "module", "name", "alias", "line", "target_path"),
                   ((file_id, *row) for row in imports))


def forget_rows(conn, file_id: int) -> None:
    """Take a file's symbols out of BM25's corpus figures (its rows go by cascade)."""
    conn.execute("UPDATE fts_totals SET nrow = nrow - s.n, ntok = ntok - s.t "
                 "FROM (SELECT count(*) AS n, coalesce(sum(fts_tokens), 0) AS t FROM symbols WHERE file_id = ?) s "
                 "WHERE fts_totals.id = 1", (file_id,))


class PhraseQueryError(Exception):
    """A token the tokenizer splits in several terms: a phrase, which FTS5's
    detail=column index refuses, so the SQLite backend finds nothing either."""


def term_of(token: str) -> str | None:
    terms = query_terms(token)
    if len(terms) > 1:
        raise PhraseQueryError(token)
    return terms[0] if terms else None


def match_count(store, token: str, cap: int) -> int:
    """How many symbols hold ``token`` (at most ``cap``): FTS5's ``MATCH`` count."""
    term = term_of(token)
    if term is None:
        return 0
    return store.execute("SELECT count(*) FROM (SELECT 1 FROM symbol_terms WHERE term = ? LIMIT ?) AS m",
                         (term, cap))[0][0]


def search(store, tokens: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """``tokens`` OR-ed, ranked by FTS5's BM25 with the index's column weights."""
    terms = [term_of(t) for t in tokens]
    with store.read():
        nrow, ntok = store.execute("SELECT nrow, ntok FROM fts_totals WHERE id = 1")[0]
        wanted = sorted({t for t in terms if t is not None})
        hits: dict[str, dict[int, tuple[int, ...]]] = {t: {} for t in wanted}
        if wanted:
            marks = ",".join("?" * len(wanted))
            for term, sid, *counts in store.execute(
                    "SELECT term, symbol_id, n_name, n_signature, n_doc, n_body FROM symbol_terms "
                    f"WHERE term IN ({marks})", tuple(wanted)):
                hits[term][sid] = counts
        docs = sorted(set().union(*hits.values())) if hits else []
        lengths: dict[int, int] = {}
        for start in range(0, len(docs), 5000):
            chunk = docs[start:start + 5000]
            lengths.update(store.execute(
                f"SELECT id, fts_tokens FROM symbols WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk)))
    phrases = [hits.get(t, {}) if t is not None else {} for t in terms]
    return fts_bm25(phrases, nrow, ntok, lengths, limit)
