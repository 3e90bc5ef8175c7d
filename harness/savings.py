"""What the proxy saved, read from the ledger and priced with providers.json.

Windows:

* **session** — ledger rows with ``time >= since`` (the caller's process start:
  ``memstrata serve`` passes its own start, the MCP server its own, the CLI the
  start of the latest serve session);
* **cycle** — the current billing month in UTC, starting on
  ``billing_cycle_start_day`` (clamped to the month's length).

Token sums cover requests the provider answered with 2xx.  Dollars = tokens
saved × the model's input rate; tokens saved on a model with no known rate are
not priced (if no saved token can be priced the dollar figure is null).
``recall``/``precision`` are micro-averaged over the session's measured
requests (see docs/proxy.md) and null until there is one.
"""

from __future__ import annotations

import calendar
import time as _time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from memstrata.storage import ledger

from .providers import Providers, ProvidersError

SUMMARY_FIELDS = (
    "session_tokens_saved", "session_dollar_saved", "cycle_tokens_saved", "cycle_dollar_saved",
    "provider_rate_per_token", "recall", "precision",
)


@dataclass
class WindowSavings:
    since: float
    requests: int = 0
    ok_requests: int = 0
    compressed_requests: int = 0
    tokens_original: int = 0
    tokens_forwarded: int = 0
    tokens_saved: int = 0
    dollar_saved: float | None = 0.0
    unpriced_tokens_saved: int = 0
    top_model: str | None = None
    top_provider: str | None = None
    rate_per_token: float | None = None
    recall: float | None = None
    precision: float | None = None
    measured: int = 0
    models: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "since", "requests", "ok_requests", "compressed_requests", "tokens_original", "tokens_forwarded",
            "tokens_saved", "dollar_saved", "unpriced_tokens_saved", "top_model", "rate_per_token",
            "recall", "precision", "measured", "models")} | {"since_iso": _iso(self.since)}


def cycle_start(now: float, start_day: int = 1) -> float:
    """Unix time at which the billing month containing ``now`` began (UTC)."""
    t = datetime.fromtimestamp(now, tz=timezone.utc)

    def start_in(year: int, month: int) -> datetime:
        day = min(start_day, calendar.monthrange(year, month)[1])
        return datetime(year, month, day, tzinfo=timezone.utc)

    start = start_in(t.year, t.month)
    if t < start:
        year, month = (t.year - 1, 12) if t.month == 1 else (t.year, t.month - 1)
        start = start_in(year, month)
    return start.timestamp()


def window(store, since: float, providers: Providers | None, until: float | None = None) -> WindowSavings:
    w = WindowSavings(since=since)
    priced_any = False
    hits = answer = sliced = 0
    for t in ledger.totals(store, since, until):
        w.requests += t.requests
        w.ok_requests += t.ok_requests
        w.compressed_requests += t.compressed_requests
        w.tokens_original += t.tokens_original
        w.tokens_forwarded += t.tokens_forwarded
        w.tokens_saved += t.tokens_saved
        w.measured += t.measured
        hits += t.symbol_hits
        answer += t.answer_symbols
        sliced += t.slice_symbols
        rate = providers.rate(t.model, t.provider) if providers is not None else None
        dollars = None
        if rate is not None:
            dollars = t.tokens_saved * rate.input_per_token
            w.dollar_saved = (w.dollar_saved or 0.0) + dollars
            priced_any = True
        elif t.tokens_saved:
            w.unpriced_tokens_saved += t.tokens_saved
        if w.top_model is None and t.model is not None:
            w.top_model, w.top_provider = t.model, t.provider
            w.rate_per_token = rate.input_per_token if rate is not None else None
        w.models.append({
            "provider": t.provider, "model": t.model, "requests": t.requests,
            "tokens_saved": t.tokens_saved, "input_cost_per_mtok": rate.input_cost_per_mtok if rate else None,
            "dollar_saved": None if dollars is None else round(dollars, 6),
        })
    if w.unpriced_tokens_saved and not priced_any:
        w.dollar_saved = None
    if w.dollar_saved is not None:
        w.dollar_saved = round(w.dollar_saved, 6)
    w.recall = round(hits / answer, 4) if answer else None
    w.precision = round(hits / sliced, 4) if sliced else None
    return w


@dataclass
class SavingsReport:
    session: WindowSavings
    cycle: WindowSavings
    providers_error: str | None = None

    def summary(self) -> dict:
        """Exactly the seven ``savings_summary`` fields of the API reference."""
        rate = self.session.rate_per_token if self.session.top_model else self.cycle.rate_per_token
        return {
            "session_tokens_saved": self.session.tokens_saved,
            "session_dollar_saved": self.session.dollar_saved,
            "cycle_tokens_saved": self.cycle.tokens_saved,
            "cycle_dollar_saved": self.cycle.dollar_saved,
            "provider_rate_per_token": rate,
            "recall": self.session.recall,
            "precision": self.session.precision,
        }

    def as_dict(self) -> dict:
        d = {"summary": self.summary(), "session": self.session.as_dict(), "cycle": self.cycle.as_dict()}
        if self.providers_error:
            d["providers_error"] = self.providers_error
        return d


def savings_report(store, since: float, *, now: float | None = None,
                   providers: Providers | None = None) -> SavingsReport:
    error = None
    if providers is None:
        try:
            providers = Providers.load(create=False)
        except ProvidersError as exc:  # rates unknown rather than a failed summary
            providers, error = None, str(exc)
    now = _time.time() if now is None else now
    day = providers.billing_cycle_start_day if providers is not None else 1
    return SavingsReport(
        session=window(store, since, providers),
        cycle=window(store, cycle_start(now, day), providers),
        providers_error=error,
    )


def savings_summary(ws, since: float) -> dict:
    """The ``savings_summary`` MCP tool's result for workspace ``ws``.

    ``since``: unix time the caller's session began.  Returns exactly the
    seven documented fields; null where a figure has no data.
    """
    return savings_report(ws.store, since).summary()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
