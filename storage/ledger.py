"""The savings ledger: one row per proxied model request, in the project's store.

Rows hold counts and names only (model, endpoint, token counts, the slice's
source paths) — never headers, keys or message bodies.  Reads aggregate by
(provider, model) so that callers can price each model at its own rate.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field

from .db import Store


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
    input_tokens: int | None = None
    output_tokens: int | None = None
    sources: list[str] = field(default_factory=list)
    slice_symbols: int | None = None
    answer_symbols: int | None = None
    symbol_hits: int | None = None
    duration_ms: float | None = None
    session_id: int | None = None

    @property
    def tokens_saved(self) -> int:
        return self.tokens_original - self.tokens_forwarded


@dataclass
class ModelTotals:
    """Aggregates for one (provider, model) over a time window.

    Token sums cover requests the provider accepted (2xx); a refused request
    saved nothing because nothing was billed.  The symbol sums cover requests
    whose answer was measured against a slice.
    """

    provider: str | None
    model: str | None
    requests: int = 0
    ok_requests: int = 0
    compressed_requests: int = 0
    tokens_original: int = 0
    tokens_forwarded: int = 0
    tokens_saved: int = 0
    output_tokens: int = 0
    measured: int = 0
    slice_symbols: int = 0
    answer_symbols: int = 0
    symbol_hits: int = 0


_COLUMNS = (
    "session_id", "time", "endpoint", "provider", "model", "stream", "status", "error", "compressed",
    "tokens_original", "tokens_forwarded", "tokens_saved", "input_tokens", "output_tokens", "sources",
    "slice_symbols", "answer_symbols", "symbol_hits", "duration_ms",
)


def _row(e: LedgerEntry) -> tuple:
    return (
        e.session_id, e.time, e.endpoint, e.provider, e.model, int(e.stream), e.status, e.error,
        int(e.compressed), e.tokens_original, e.tokens_forwarded, e.tokens_saved, e.input_tokens,
        e.output_tokens, json.dumps(e.sources) if e.sources else None, e.slice_symbols,
        e.answer_symbols, e.symbol_hits, e.duration_ms,
    )


def record(store: Store, entries: Iterable[LedgerEntry]) -> int:
    """Append entries in one transaction; returns how many were written."""
    rows = [_row(e) for e in entries]
    if not rows:
        return 0
    marks = ",".join("?" * len(_COLUMNS))
    with store.write() as conn:
        conn.executemany(f"INSERT INTO ledger({','.join(_COLUMNS)}) VALUES ({marks})", rows)
    return len(rows)


def start_session(store: Store, started: float, pid: int | None = None) -> int:
    with store.write() as conn:
        cur = conn.execute("INSERT INTO ledger_sessions(started, pid) VALUES (?, ?)", (started, pid))
        return int(cur.lastrowid)


def end_session(store: Store, session_id: int, ended: float) -> None:
    with store.write() as conn:
        conn.execute("UPDATE ledger_sessions SET ended = ? WHERE id = ?", (ended, session_id))


def latest_session(store: Store) -> tuple[int, float, float | None] | None:
    """(id, started, ended) of the most recent serve session, if any."""
    rows = store.execute("SELECT id, started, ended FROM ledger_sessions ORDER BY started DESC, id DESC LIMIT 1")
    return (int(rows[0][0]), float(rows[0][1]), rows[0][2]) if rows else None


def totals(store: Store, since: float, until: float | None = None) -> list[ModelTotals]:
    """Per-(provider, model) sums over rows with ``since <= time < until``."""
    sql = """
        SELECT provider, model,
               count(*),
               sum(ok),
               sum(CASE WHEN ok THEN compressed ELSE 0 END),
               sum(CASE WHEN ok THEN tokens_original ELSE 0 END),
               sum(CASE WHEN ok THEN tokens_forwarded ELSE 0 END),
               sum(CASE WHEN ok THEN tokens_saved ELSE 0 END),
               sum(CASE WHEN ok THEN coalesce(output_tokens, 0) ELSE 0 END),
               sum(measured),
               sum(CASE WHEN measured THEN slice_symbols ELSE 0 END),
               sum(CASE WHEN measured THEN answer_symbols ELSE 0 END),
               sum(CASE WHEN measured THEN symbol_hits ELSE 0 END)
        FROM (
            SELECT *,
                   (status BETWEEN 200 AND 299) AS ok,
                   (slice_symbols IS NOT NULL AND answer_symbols IS NOT NULL
                    AND symbol_hits IS NOT NULL) AS measured
            FROM ledger
            WHERE time >= ? AND (? IS NULL OR time < ?)
        )
        GROUP BY provider, model
        ORDER BY count(*) DESC, sum(tokens_original) DESC
    """
    out = []
    for r in store.execute(sql, (since, until, until)):
        out.append(ModelTotals(r[0], r[1], *(int(v or 0) for v in r[2:])))
    return out


def entries(store: Store, since: float | None = None, limit: int = 100) -> list[LedgerEntry]:
    """The most recent rows, newest last (for the CLI and tests)."""
    rows = store.execute(
        f"SELECT {','.join(_COLUMNS)} FROM ledger WHERE (? IS NULL OR time >= ?) ORDER BY id DESC LIMIT ?",
        (since, since, limit),
    )
    out = []
    for r in reversed(rows):
        d = dict(zip(_COLUMNS, r))
        d.pop("tokens_saved")
        d["stream"] = bool(d["stream"])
        d["compressed"] = bool(d["compressed"])
        d["sources"] = json.loads(d["sources"]) if d["sources"] else []
        out.append(LedgerEntry(**d))
    return out


def count(store: Store) -> int:
    try:
        return int(store.execute("SELECT count(*) FROM ledger")[0][0])
    except sqlite3.OperationalError:  # read-only store of an older schema
        return 0
