"""The dashboard of ``memstrata serve`` at ``GET /``.

One self-contained page (``index.html`` beside this module: inline style and
script, no CDN, so it works offline) that polls ``/status`` and
``/api/dashboard`` every couple of seconds, and ``/api/team`` (the team view:
the billing cycle's savings per user, host and project) less often.  It is served by the same app,
so the Host/Origin guard applies; a Content-Security-Policy allows nothing
but the page's own inline script and style (by hash) and requests to its own
origin.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources

from starlette.responses import Response

from memstrata.storage import ledger

from memstrata.harness.proxy.savings import (
    add_windows, cycle_start, daily, group_dict, grouped, iso, load_providers, ranked, team_groups, window)

DAYS = 30             # the chart's span
RECENT = 25           # rows in "last requests"
TOP_FILES = 10
# The team view reads every project of a shared store (a connection each): at most this often.
TEAM_TTL = 15.0
_team_cache: dict[str, tuple[float, dict, list, float]] = {}
_team_lock = threading.Lock()
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.S)


@lru_cache(maxsize=1)
def _page() -> tuple[bytes, str]:
    html = resources.files(__package__).joinpath("index.html").read_text(encoding="utf-8")
    sources = {"script": [], "style": []}
    for kind, body in _INLINE.findall(html):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii")
        sources[kind].append(f"'sha256-{digest}'")
    csp = (f"default-src 'none'; script-src {' '.join(sources['script'])}; style-src {' '.join(sources['style'])}; "
           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return html.encode("utf-8"), csp


def page_response() -> Response:
    body, csp = _page()
    return Response(body, media_type="text/html; charset=utf-8", headers={
        "content-security-policy": csp, "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
        "x-frame-options": "DENY", "cache-control": "no-store"})


def _day_start(t: float) -> float:
    d = datetime.fromtimestamp(t, tz=timezone.utc)
    return datetime(d.year, d.month, d.day, tzinfo=timezone.utc).timestamp()


def _request(e: ledger.LedgerEntry) -> dict:
    return {
        "time": iso(e.time), "model": e.model, "endpoint": e.endpoint, "status": e.status, "error": e.error,
        "stream": e.stream, "compressed": e.compressed, "counted": e.counted,
        "tokens_before": e.tokens_original if e.counted else None,
        "tokens_after": e.tokens_forwarded if e.counted else None,
        "sources": e.sources, "cache_read_tokens": e.cache_read_tokens, "cache_write_tokens": e.cache_write_tokens,
        "cache_write_1h_tokens": e.cache_write_1h_tokens,
        "input_tokens": e.input_tokens, "output_tokens": e.output_tokens, "compaction": e.compaction,
        "duration_ms": e.duration_ms, "session_id": e.session_id,
    }


def data(harness, now: float | None = None) -> dict:
    """What the page draws besides ``/status``: per-day savings, last requests, top files."""
    store = harness.ws.store
    now = time.time() if now is None else now
    first = _day_start(now) - (DAYS - 1) * 86400
    providers, _ = load_providers()
    return {
        "generated": iso(now),
        "session_id": harness.session_id,
        "days": [datetime.fromtimestamp(first + i * 86400, tz=timezone.utc).date().isoformat() for i in range(DAYS)],
        "daily": daily(store, providers, first),
        "recent": [_request(e) for e in reversed(ledger.entries(store, limit=RECENT))],
        "top_files": [{"path": p, "requests": n} for p, n in ledger.top_sources(store, first, TOP_FILES)],
    }


def _shared(url: str, since: float, providers, now: float) -> tuple[dict, list]:
    with _team_lock:
        hit = _team_cache.get(url)
        if hit is not None and hit[0] == since and now - hit[3] < TEAM_TTL:
            return hit[1], hit[2]
        groups, skipped = team_groups(url, ("user", "host", "project"), since, providers)
        _team_cache[url] = (since, groups, skipped, now)
        return groups, skipped


def team(harness, now: float | None = None) -> dict:
    """The team view: the billing cycle's savings per user label, host label and project
    (over every project of a shared PostgreSQL store; this project's ledger on SQLite).
    docs/proxy.md lists the fields."""
    store = harness.ws.store
    now = time.time() if now is None else now
    providers, error = load_providers()
    since = cycle_start(now, providers.billing_cycle_start_day if providers is not None else 1)
    shared = store.dialect != "sqlite"
    skipped: list[dict] = []
    if shared:
        groups, skipped = _shared(store.url, since, providers, now)
    else:
        groups = {"user": grouped(store, "user", since, providers), "host": grouped(store, "host", since, providers),
                  "project": {harness.ws.root.name: window(store, since, providers)}}
    total = group_dict("total", add_windows(list(groups["project"].values()), since))
    del total["key"]
    out = {
        "generated": iso(now), "since": iso(since), "shared": shared,
        "project": store.project if shared else harness.ws.root.name,
        "by_user": ranked(groups["user"]), "by_host": ranked(groups["host"]),
        "by_project": ranked(groups["project"]), "total": total,
        "skipped": [s["project"] for s in skipped],
    }
    if error:
        out["providers_error"] = "providers.json is invalid; rates are unknown until it is fixed"
    return out
