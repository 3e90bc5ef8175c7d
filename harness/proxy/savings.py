"""What the proxy saved, read from the ledger and priced with providers.json.

Windows:

* **session** — the rows of one or more ``memstrata serve`` processes (ledger
  sessions).  ``memstrata serve`` reports its own; the CLI and ``memstrata
  mcp`` the serve sessions running now on the project (none: no session
  figures);
* **cycle** — the current billing month in UTC, starting on
  ``billing_cycle_start_day`` (clamped to the month's length).

Token sums cover requests the provider answered with 2xx.  Dollars are
cache-aware (docs/proxy.md defines each figure):

* **gross saved** — each request's tokens saved, priced in the proportions the
  provider billed that request (full input rate, cache read, cache write),
  with the tokens the proxy made it re-bill moved back to cache reads;
* **cache-miss cost** — tokens of an already-forwarded prefix that the proxy
  changed, re-billed as cache writes or full input instead of cache reads:
  ``tokens × (write or input rate − cache read rate)``;
* **saved** (``*_dollar_saved``) — the counterfactual bill minus the real one:
  what the provider would have billed for the unmodified requests' prompts
  under its caching rules (:mod:`.counterfactual`) minus what it reported
  billing for the forwarded ones (``bill_direct - bill_proxied``).  Rows
  without a counterfactual (no usage reported, or written by an older
  release) fall back on the estimate: gross saved minus cache-miss cost.

Tokens saved on a model with no known rate are not priced (if nothing can be
priced the dollar figures are null).  ``recall``/``precision`` are
micro-averaged over the measured requests of the session (of the cycle when
no session is given) and null until there is one.
"""

from __future__ import annotations

import calendar
import time as _time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from memstrata.storage import ledger
from memstrata.storage.ledger import ModelTotals, Session

from .providers import Providers, ProvidersError, Rate

SUMMARY_FIELDS = (
    "session_tokens_saved", "session_dollar_saved", "cycle_tokens_saved", "cycle_dollar_saved",
    "provider_rate_per_token", "recall", "precision",
)


@dataclass
class Dollars:
    gross_saved: float = 0.0
    miss_cost: float = 0.0
    spent: float | None = 0.0   # None when an output rate is unknown
    bill_direct: float = 0.0    # the counterfactual: the unmodified requests' prompts, as the provider bills
    bill_proxied: float = 0.0   # what the provider billed for the forwarded prompts (the same requests)
    saved: float = 0.0          # bill_direct - bill_proxied, plus the estimate for rows without them


def writes_cost(tokens: float, tokens_1h: float, rate: Rate) -> float:
    """Cache writes at their rates: Anthropic bills a write to its 1-hour cache at 2x the input rate
    where a 5-minute one costs 1.25x, so ``tokens_1h`` of the ``tokens`` are priced apart."""
    return (tokens - tokens_1h) * rate.cache_write_per_token + tokens_1h * rate.cache_write_1h_per_token


def misses_cost(write: float, write_1h: float, input_: float, rate: Rate) -> float:
    """What re-billing cached tokens cost beyond the cache reads they would have been: ``write`` as
    cache writes (``write_1h`` of them 1-hour ones), ``input_`` at the full input rate."""
    read = rate.cache_read_per_token
    return ((write - write_1h) * max(rate.cache_write_per_token - read, 0.0)
            + write_1h * max(rate.cache_write_1h_per_token - read, 0.0)
            + input_ * max(rate.input_per_token - read, 0.0))


def price(t: ModelTotals, rate: Rate) -> Dollars:
    """The dollar figures of ``t``'s token sums at ``rate``."""
    inp, read = rate.input_per_token, rate.cache_read_per_token
    gross = t.saved_fresh * inp + t.saved_read * read + writes_cost(t.saved_write, t.saved_write_1h, rate)
    miss = misses_cost(t.miss_write_tokens, t.miss_write_1h, t.miss_input_tokens, rate)
    direct = (t.cf_input_tokens * inp + t.cf_cache_read_tokens * read
              + writes_cost(t.cf_cache_write_tokens, t.cf_cache_write_1h_tokens, rate))
    proxied = (t.cf_reported_input * inp + t.cf_reported_read * read
               + writes_cost(t.cf_reported_write, t.cf_reported_write_1h, rate))
    estimate = (t.est_fresh * inp + t.est_read * read + writes_cost(t.est_write, t.est_write_1h, rate)
                - misses_cost(t.est_miss_write, t.est_miss_write_1h, t.est_miss_input, rate))
    out = rate.output_per_token
    spent = None if out is None and t.output_tokens else (
        t.input_tokens * inp + t.cache_read_tokens * read
        + writes_cost(t.cache_write_tokens, t.cache_write_1h_tokens, rate) + t.output_tokens * (out or 0.0))
    return Dollars(gross, miss, spent, direct, proxied, direct - proxied + estimate)


_SUMMED = ("requests", "ok_requests", "compressed_requests", "tokens_original", "tokens_forwarded", "tokens_saved",
           "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens",
           "usage_requests",
           "compactions", "prefix_invalidated_tokens", "miss_write_tokens", "miss_input_tokens", "measured",
           "cf_requests")


@dataclass
class WindowSavings:
    since: float | None
    requests: int = 0
    ok_requests: int = 0
    compressed_requests: int = 0
    tokens_original: int = 0
    tokens_forwarded: int = 0
    tokens_saved: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0         # of the cache writes, those to Anthropic's 1-hour cache
    usage_requests: int = 0
    compactions: int = 0
    prefix_invalidated_tokens: int = 0
    miss_write_tokens: int = 0
    miss_input_tokens: int = 0
    dollar_saved: float | None = 0.0
    dollar_saved_gross: float | None = 0.0
    cache_miss_dollars: float | None = 0.0
    dollar_spent: float | None = 0.0
    cf_requests: int = 0                   # requests priced against the counterfactual bill ...
    bill_direct: float | None = 0.0        # ... what their prompts would have cost sent unmodified
    bill_proxied: float | None = 0.0       # ... and what the provider billed for them as forwarded
    unpriced_tokens_saved: int = 0
    top_model: str | None = None
    top_provider: str | None = None
    rate_per_token: float | None = None
    recall: float | None = None
    precision: float | None = None
    measured: int = 0
    models: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in (
            "since", *_SUMMED, "dollar_saved", "dollar_saved_gross", "cache_miss_dollars", "dollar_spent",
            "bill_direct", "bill_proxied",
            "unpriced_tokens_saved", "top_model", "rate_per_token", "recall", "precision", "models")}
        d["since_iso"] = iso(self.since) if self.since is not None else None
        return d


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


def _rate(providers: Providers | None, t: ModelTotals) -> Rate | None:
    return providers.rate(t.model, t.provider) if providers is not None else None


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def window(store, since: float | None, providers: Providers | None, until: float | None = None, *,
           session_ids: list[int] | None = None) -> WindowSavings:
    return _summed(WindowSavings(since=since), ledger.totals(store, since, until, session_ids=session_ids),
                   providers)


def _summed(w: WindowSavings, totals: list[ModelTotals], providers: Providers | None) -> WindowSavings:
    """``w`` with the sums and prices of ``totals`` (per-model rows of one window) added."""
    priced_any = False
    spent_known = True
    hits = answer = sliced = 0
    gross = miss = spent = saved = direct = proxied = 0.0
    for t in totals:
        for name in _SUMMED:
            setattr(w, name, getattr(w, name) + getattr(t, name))
        hits += t.symbol_hits
        answer += t.answer_symbols
        sliced += t.slice_symbols
        rate = _rate(providers, t)
        dollars = price(t, rate) if rate is not None else None
        if dollars is not None:
            gross += dollars.gross_saved
            miss += dollars.miss_cost
            saved += dollars.saved
            direct += dollars.bill_direct
            proxied += dollars.bill_proxied
            if dollars.spent is None:
                spent_known = False
            else:
                spent += dollars.spent
            priced_any = True
        else:
            spent_known = False
            w.unpriced_tokens_saved += t.tokens_saved
        if w.top_model is None and t.model is not None:
            w.top_model, w.top_provider = t.model, t.provider
            w.rate_per_token = rate.input_per_token if rate is not None else None
        w.models.append({
            "provider": t.provider, "model": t.model, "requests": t.requests, "tokens_saved": t.tokens_saved,
            "cache_read_tokens": t.cache_read_tokens, "cache_write_tokens": t.cache_write_tokens,
            "cache_write_1h_tokens": t.cache_write_1h_tokens,
            "input_cost_per_mtok": rate.input_cost_per_mtok if rate else None,
            "cache_read_cost_per_mtok": rate.cache_read_cost_per_mtok if rate else None,
            "cache_write_cost_per_mtok": rate.cache_write_cost_per_mtok if rate else None,
            "cache_write_1h_cost_per_mtok": rate.cache_write_1h_cost_per_mtok if rate else None,
            "dollar_saved": None if dollars is None else _round(dollars.saved),
            "cache_miss_dollars": None if dollars is None else _round(dollars.miss_cost),
        })
    # Nothing priced while there was something to price (tokens saved, or the two bills of
    # requests the provider answered): the dollars are unknown, not zero.
    nothing_priced = not priced_any and bool(w.unpriced_tokens_saved or w.cf_requests)
    w.dollar_saved_gross = None if nothing_priced else _round(gross)
    w.cache_miss_dollars = None if nothing_priced else _round(miss)
    w.dollar_saved = None if nothing_priced else _round(saved)
    w.bill_direct = None if nothing_priced else _round(direct)
    w.bill_proxied = None if nothing_priced else _round(proxied)
    w.dollar_spent = _round(spent) if spent_known else None
    w.recall = round(hits / answer, 4) if answer else None
    w.precision = round(hits / sliced, 4) if sliced else None
    return w


# What grouped() groups a window by (``project`` is the caller's: one store per project).
GROUPS = ("user", "host", "model", "day")
UNLABELLED = "(unlabelled)"   # rows written before labels existed


def grouped(store, by: str, since: float | None, providers: Providers | None,
            until: float | None = None) -> dict[str, WindowSavings]:
    """The window's savings per user label, host label, model or UTC day, each priced per model."""
    if by not in GROUPS:
        raise ValueError(f"savings can be grouped by {', '.join(GROUPS)}, not {by!r}")
    rows = ledger.totals(store, since, until, by_day=by == "day", by_label=by if by in ledger.LABELS else None)
    parts: dict[str, list[ModelTotals]] = {}
    for t in rows:
        key = {"day": t.day, "model": t.model}.get(by, t.label)
        parts.setdefault(key if key is not None else UNLABELLED, []).append(t)
    return {k: _summed(WindowSavings(since=since), ts, providers) for k, ts in parts.items()}


GROUP_FIELDS = ("requests", "ok_requests", "compressed_requests", "tokens_original", "tokens_forwarded",
                "tokens_saved", "dollar_saved", "bill_direct", "bill_proxied", "unpriced_tokens_saved")


def group_dict(key: str, w: WindowSavings) -> dict:
    """One group of ``memstrata savings --by`` and the dashboard's team view (docs/proxy.md)."""
    return {"key": key, **{k: getattr(w, k) for k in GROUP_FIELDS}}


def add_windows(windows: list[WindowSavings], since: float | None) -> WindowSavings:
    """The sum of several windows' figures (dollars: null only when every part is null)."""
    total = WindowSavings(since=since)
    for name in GROUP_FIELDS[:6] + ("unpriced_tokens_saved",):
        setattr(total, name, sum(getattr(w, name) for w in windows))
    for name in ("dollar_saved", "bill_direct", "bill_proxied"):
        known = [getattr(w, name) for w in windows if getattr(w, name) is not None]
        setattr(total, name, _round(float(sum(known))) if known or not windows else None)
    return total


def team_groups(url: str, bys: tuple[str, ...], since: float | None, providers: Providers | None, *,
                only: str | None = None) -> tuple[dict[str, dict[str, WindowSavings]], list[dict]]:
    """A shared PostgreSQL store's savings grouped each way of ``bys`` (``project`` or one of
    :data:`GROUPS`) over every project it holds (``only``: that one), one connection per project.

    Returns {by: {key: window}} and the projects that could not be read ({"project",
    "reason"}: e.g. written by another MemStrata version).
    """
    from memstrata.storage import StoreError
    from memstrata.storage.postgres import PgStore

    parts: dict[str, dict[str, list[WindowSavings]]] = {by: {} for by in bys}
    skipped: list[dict] = []
    for name in [only] if only is not None else ledger.shared_projects(url):
        try:
            with PgStore(url, name, readonly=True) as store:
                for by in bys:
                    found = {name: window(store, since, providers)} if by == "project" else \
                        grouped(store, by, since, providers)
                    for key, w in found.items():
                        parts[by].setdefault(key, []).append(w)
        except StoreError as exc:
            if only is not None:
                raise
            skipped.append({"project": name, "reason": str(exc)})
    return {by: {k: add_windows(ws, since) for k, ws in groups.items()} for by, groups in parts.items()}, skipped


def ranked(groups: dict[str, WindowSavings]) -> list[dict]:
    """Groups as :func:`group_dict` rows, most tokens saved first."""
    return [group_dict(k, w) for k, w in sorted(groups.items(), key=lambda kv: (-kv[1].tokens_saved, kv[0]))]


@dataclass
class SavingsReport:
    session: WindowSavings | None      # None: no session (no serve runs)
    cycle: WindowSavings
    sessions: list[Session] = field(default_factory=list)   # the sessions the session window covers
    providers_error: str | None = None

    def summary(self) -> dict:
        """Exactly the seven ``savings_summary`` fields of the API reference."""
        s = self.session
        measured = s if s is not None else self.cycle
        rate = s.rate_per_token if s is not None and s.top_model else self.cycle.rate_per_token
        return {
            "session_tokens_saved": s.tokens_saved if s is not None else 0,
            "session_dollar_saved": s.dollar_saved if s is not None else 0.0,
            "cycle_tokens_saved": self.cycle.tokens_saved,
            "cycle_dollar_saved": self.cycle.dollar_saved,
            "provider_rate_per_token": rate,
            "recall": measured.recall,
            "precision": measured.precision,
        }

    def as_dict(self) -> dict:
        d = {"summary": self.summary(),
             "session": self.session.as_dict() if self.session is not None else None,
             "sessions": [session_dict(x) for x in self.sessions],
             "cycle": self.cycle.as_dict()}
        if self.providers_error:
            d["providers_error"] = self.providers_error
        return d


def session_dict(s: Session) -> dict:
    return {"id": s.id, "started": iso(s.started), "ended": iso(s.ended) if s.ended is not None else None,
            "running": s.running, "crashed": s.crashed, "pid": s.pid, "address": s.address}


def load_providers(providers: Providers | None = None) -> tuple[Providers | None, str | None]:
    """The provider rates, or (None, why) when providers.json is invalid."""
    if providers is not None:
        return providers, None
    try:
        return Providers.load(create=False), None
    except ProvidersError as exc:  # rates unknown rather than a failed summary
        return None, str(exc)


def savings_report(store, since: float | None = None, *, session_ids: list[int] | None = None,
                   now: float | None = None, providers: Providers | None = None) -> SavingsReport:
    """``since``: a time window for the session (rows from then on); ``session_ids``: those
    sessions' rows; neither: the serve sessions running now on this project."""
    providers, error = load_providers(providers)
    now = _time.time() if now is None else now
    day = providers.billing_cycle_start_day if providers is not None else 1
    shown: list[Session] = []
    if since is None and session_ids is None:
        shown = ledger.running_sessions(store)
        session_ids = [s.id for s in shown]
    elif session_ids is not None:
        shown = [s for s in (ledger.session(store, i) for i in session_ids) if s is not None]
    if since is not None:
        session = window(store, since, providers)
    elif session_ids:
        session = window(store, None, providers, session_ids=session_ids)
    else:
        session = None
    return SavingsReport(session=session, cycle=window(store, cycle_start(now, day), providers),
                         sessions=shown, providers_error=error)


def daily(store, providers: Providers | None, since: float) -> list[dict]:
    """Tokens and dollars saved per UTC day and model since ``since`` (for the dashboard)."""
    out = []
    for t in ledger.totals(store, since, by_day=True):
        rate = _rate(providers, t)
        dollars = price(t, rate) if rate is not None else None
        out.append({"day": t.day, "provider": t.provider, "model": t.model, "requests": t.requests,
                    "tokens_saved": t.tokens_saved, "tokens_forwarded": t.tokens_forwarded,
                    "dollar_saved": None if dollars is None else _round(dollars.saved)})
    return out


def savings_summary(ws, since: float | None = None, *, session_ids: list[int] | None = None) -> dict:
    """The ``savings_summary`` MCP tool's result for workspace ``ws``.

    ``session_ids``: the serve sessions to report (``memstrata serve`` passes
    its own); ``since``: rows from that time on instead; neither: the serve
    sessions running now.  Returns exactly the seven documented fields.
    """
    return savings_report(ws.store, since, session_ids=session_ids).summary()


def iso(t: float) -> str:
    """Unix time as an ISO 8601 UTC timestamp (seconds, Z)."""
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
