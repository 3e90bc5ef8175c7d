"""Reads and writes of a Kura document database (sources, chunks, keyword search).

A Kura database is one :class:`~storage.db.Store` whose ``kura_*`` tables hold
the files of one watched folder cut into numbered chunks.  ``kura_fts`` is an
external-content FTS5 index over ``kura_chunks``: every function here that
adds or drops chunks updates it in the same transaction, so the two never
disagree.

Search is BM25 over that index.  A query becomes an OR of, for every term,
the exact token and (for terms of three or more characters) the token as a
prefix, plus the whole query as a phrase.  BM25 sums over those clauses, so a
chunk with the exact word outranks one with only a longer word starting with
it, and a chunk holding the words side by side outranks both.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memstrata.storage.db import Store
from memstrata.storage.text import expand_identifiers, fts_quote, query_terms
from .schema import KURA_SCHEMA


class KuraDatabase(Store):
    """One Kura database file (``<home>/<name>/data.db``), on Kura's own migration chain."""

    schema = KURA_SCHEMA

# A query of any length is cut to this many distinct terms (a 10 KB paste
# would otherwise become a MATCH expression with thousands of clauses).
MAX_QUERY_TERMS = 32
# Terms this short are matched exactly only: a two-letter prefix matches too
# much of the vocabulary to mean anything.
MIN_PREFIX_LEN = 3
META_ROOT = "kura.root"
META_SKIPPED = "kura.skipped"
META_CHUNKING = "kura.chunking"
_TOKEN = re.compile(r"[^\W_]+")


@dataclass(slots=True, frozen=True)
class SourceState:
    size: int
    mtime_ns: int
    hash: str


@dataclass(slots=True)
class SourceRecord:
    path: str
    size: int
    mtime_ns: int
    hash: str
    kind: str
    indexed_at: float


@dataclass(slots=True, frozen=True)
class Hit:
    source: str
    chunk: int
    content: str
    score: float  # bm25: lower is better


@dataclass(slots=True, frozen=True)
class KuraStats:
    sources: int
    chunks: int


def idents_of(content: str) -> str:
    """The split identifier parts :func:`expand_identifiers` would append."""
    expanded = expand_identifiers(content)
    return expanded[len(content) + 1:] if len(expanded) > len(content) else ""


# -- writes (inside a caller's Store.write() transaction) ---------------------


def replace_source(conn: sqlite3.Connection, rec: SourceRecord, chunks: Sequence[str]) -> int:
    """Replace whatever is stored for ``rec.path`` with ``chunks`` (numbered from 1)."""
    _drop_chunks(conn, rec.path)
    conn.execute(
        "INSERT INTO kura_sources(path, size, mtime_ns, hash, kind, chunks, indexed_at)"
        " VALUES (?,?,?,?,?,?,?) ON CONFLICT(path) DO UPDATE SET size = excluded.size,"
        " mtime_ns = excluded.mtime_ns, hash = excluded.hash, kind = excluded.kind,"
        " chunks = excluded.chunks, indexed_at = excluded.indexed_at",
        (rec.path, rec.size, rec.mtime_ns, rec.hash, rec.kind, len(chunks), rec.indexed_at),
    )
    source_id = conn.execute("SELECT id FROM kura_sources WHERE path = ?", (rec.path,)).fetchone()[0]
    first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM kura_chunks").fetchone()[0]
    rows = [(first + i, source_id, i + 1, text, idents_of(text)) for i, text in enumerate(chunks)]
    conn.executemany(
        "INSERT INTO kura_chunks(id, source_id, chunk, content, idents) VALUES (?,?,?,?,?)", rows)
    conn.executemany("INSERT INTO kura_fts(rowid, content, idents) VALUES (?,?,?)",
                     [(r[0], r[3], r[4]) for r in rows])
    return source_id


def touch_source(conn: sqlite3.Connection, path: str, size: int, mtime_ns: int) -> None:
    """Same bytes, new stat (a copy or ``touch``): remember it without re-chunking."""
    conn.execute("UPDATE kura_sources SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))


def delete_sources(conn: sqlite3.Connection, paths: Iterable[str]) -> int:
    removed = 0
    for path in paths:
        if _drop_chunks(conn, path):
            removed += 1
        conn.execute("DELETE FROM kura_sources WHERE path = ?", (path,))
    return removed


def _drop_chunks(conn: sqlite3.Connection, path: str) -> bool:
    row = conn.execute("SELECT id FROM kura_sources WHERE path = ?", (path,)).fetchone()
    if row is None:
        return False
    # External-content FTS5 deletes need the exact text that was indexed.
    conn.execute(
        "INSERT INTO kura_fts(kura_fts, rowid, content, idents)"
        " SELECT 'delete', id, content, idents FROM kura_chunks WHERE source_id = ?", (row[0],))
    conn.execute("DELETE FROM kura_chunks WHERE source_id = ?", (row[0],))
    return True


def set_root(store: Store, root: str | None) -> None:
    store.set_meta(META_ROOT, root)


def get_root(store: Store) -> str | None:
    return store.get_meta(META_ROOT)


def get_chunking(store: Store) -> int:
    """The chunking version the store's chunks were cut with (1: before it was recorded)."""
    value = store.get_meta(META_CHUNKING)
    return int(value) if value is not None and value.isdigit() else 1


def set_chunking(store: Store, version: int) -> None:
    store.set_meta(META_CHUNKING, str(version))


def set_skipped(store: Store, counts: dict[str, int]) -> None:
    """What the last full walk of the folder left out: {reason: count}."""
    store.set_meta(META_SKIPPED, json.dumps(counts, sort_keys=True))


def get_skipped(store: Store) -> dict[str, int]:
    try:
        counts = json.loads(store.get_meta(META_SKIPPED) or "{}")
    except ValueError:
        return {}
    return {str(k): v for k, v in counts.items() if isinstance(v, int)} if isinstance(counts, dict) else {}


# -- reads ---------------------------------------------------------------------


def source_states(store: Store) -> dict[str, SourceState]:
    return {path: SourceState(size, mtime_ns, h) for path, size, mtime_ns, h in
            store.execute("SELECT path, size, mtime_ns, hash FROM kura_sources")}


def stats(store: Store) -> KuraStats:
    sources, chunks = store.execute(
        "SELECT count(*), coalesce(sum(chunks), 0) FROM kura_sources")[0]
    return KuraStats(sources, chunks)


def is_kura_store(store: Store) -> bool:
    """True when the store's schema has the Kura tables (it was migrated far enough)."""
    rows = store.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kura_fts'")
    return bool(rows)


# BM25 costs a few microseconds per matching chunk, so a query is never
# allowed to score many more chunks than this (see :func:`search`).
SCORE_BUDGET = 2000
# When every term of a query is that common, this many matches are ranked.
BOUNDED_RANK = 1000


@dataclass(slots=True)
class _Query:
    groups: list[tuple[str, str]]  # (term, "exact OR prefix" clause)
    phrase: str | None

    def expression(self, terms: Sequence[str] | None = None, *, phrase: bool = True) -> str:
        chosen = [g for t, g in self.groups if terms is None or t in terms]
        if phrase and self.phrase:
            chosen.append(self.phrase)
        return " OR ".join(chosen)


def parse_query(query: str, max_terms: int = MAX_QUERY_TERMS) -> _Query | None:
    # Kura's keywords are matched as typed: `sha256` is not a search for `256`.
    terms = query_terms(query, number_parts=False)[:max_terms]
    if not terms:
        return None
    groups = []
    for term in terms:
        quoted = fts_quote(term)
        # FTS5 applies "*" to the last token of a (multi-token) term: parse_args*
        # means "parse" then anything starting with "args".
        tokens = _TOKEN.findall(term)
        prefix = bool(tokens) and len(tokens[-1]) >= MIN_PREFIX_LEN
        groups.append((term, f"{quoted} OR {quoted}*" if prefix else quoted))
    words = query.split()[:max_terms]
    # Tokenised by FTS5 itself, so punctuation inside the words is harmless.
    phrase = fts_quote(" ".join(words)) if len(words) > 1 else None
    return _Query(groups, phrase)


def match_expression(query: str, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """The FTS5 MATCH expression for a keyword query, or None when it has no terms."""
    parsed = parse_query(query, max_terms)
    return parsed.expression() if parsed else None


def search(store: Store, query: str, limit: int) -> list[Hit]:
    """The ``limit`` best chunks for ``query``, best first.

    Ranking is BM25 over every clause of the query while at most
    :data:`SCORE_BUDGET` chunks match.  Beyond that, latency would grow with
    the database, so the query is narrowed to its selective terms (fewest
    matching chunks first, up to the budget): a word found in thousands of
    chunks has a small IDF and would hardly move the order anyway.  When
    every term is that common, the first :data:`BOUNDED_RANK` matching chunks
    are ranked.
    """
    parsed = parse_query(query)
    if parsed is None:
        return []
    with store.read() as conn:
        full = parsed.expression()
        if _count(conn, full) <= SCORE_BUDGET:
            return _ranked(conn, full, limit)
        total = 0
        use_phrase = False
        if parsed.phrase:
            total = _count(conn, parsed.phrase)
            use_phrase = 0 < total <= SCORE_BUDGET
            total = total if use_phrase else 0
        selective: list[str] = []
        for df, term in sorted((_count(conn, group), term) for term, group in parsed.groups):
            if df == 0:
                # A word found nowhere adds nothing to an OR of terms; kept, it would be the
                # whole narrowed query and find nothing where the other words find plenty.
                continue
            if total + df > SCORE_BUDGET:
                break
            selective.append(term)
            total += df
        if selective or use_phrase:
            return _ranked(conn, parsed.expression(selective, phrase=use_phrase), limit)
        return _ranked(conn, full, limit, budget=BOUNDED_RANK)


def _count(conn: sqlite3.Connection, expr: str) -> int:
    return conn.execute("SELECT count(*) FROM kura_fts WHERE kura_fts MATCH ?", (expr,)).fetchone()[0]


def _ranked(conn: sqlite3.Connection, expr: str, limit: int, budget: int | None = None) -> list[Hit]:
    # Rank inside the FTS table first, then fetch only the winners' text.
    if budget is None:
        top = "SELECT rowid AS id, rank AS score FROM kura_fts WHERE kura_fts MATCH ? ORDER BY rank LIMIT ?"
        params: tuple = (expr, limit)
    else:
        top = ("SELECT id, score FROM (SELECT rowid AS id, rank AS score FROM kura_fts"
               " WHERE kura_fts MATCH ? LIMIT ?) ORDER BY score LIMIT ?")
        params = (expr, budget, limit)
    rows = conn.execute(
        f"SELECT s.path, c.chunk, c.content, top.score FROM ({top}) AS top"
        " JOIN kura_chunks c ON c.id = top.id JOIN kura_sources s ON s.id = c.source_id"
        " ORDER BY top.score, s.path, c.chunk",
        params,
    ).fetchall()
    return [Hit(path, chunk, content, score) for path, chunk, content, score in rows]


def like_search(store: Store, keywords: Sequence[str], limit: int) -> list[Hit]:
    """The original Kura method, kept as the benchmark baseline: every chunk
    containing any keyword as a substring, ranked by how many keyword hits it has."""
    if not keywords:
        return []
    hits_expr = " + ".join(
        "(length(lower(c.content)) - length(replace(lower(c.content), ?, ''))) / length(?)"
        for _ in keywords)
    where = " OR ".join("c.content LIKE ?" for _ in keywords)
    params: list[object] = []
    for kw in keywords:
        params += [kw.lower(), kw.lower()]
    params += [f"%{kw}%" for kw in keywords]
    rows = store.execute(
        f"SELECT s.path, c.chunk, c.content, {hits_expr} AS hits"
        " FROM kura_chunks c JOIN kura_sources s ON s.id = c.source_id"
        f" WHERE {where} ORDER BY hits DESC, s.path, c.chunk LIMIT ?",
        (*params, limit),
    )
    return [Hit(path, chunk, content, -float(hits)) for path, chunk, content, hits in rows]
