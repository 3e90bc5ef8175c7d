"""``memstrata savings``: what the proxy saved, from the project's ledger."""

from __future__ import annotations

import argparse
import json
import time

from memstrata.indexer.project import ProjectError
from memstrata.storage import StoreError, ledger

from .savings import savings_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("savings", help="tokens and dollars the proxy saved (session and billing cycle)",
                       description="Read the savings ledger of the project. The session is the running (or "
                       "last) `memstrata serve` on this project; the cycle is the current billing month.")
    p.add_argument("--project", default=None, metavar="PATH", help="project folder (default: current directory)")
    p.add_argument("--json", action="store_true", help="print exactly the seven savings_summary fields as JSON")
    p.add_argument("--detail", action="store_true", help="with --json: add per-window and per-model detail")
    p.set_defaults(func=cmd_savings)


def cmd_savings(args) -> int:
    from .cmd_index import fail, open_workspace

    try:
        ws = open_workspace(args.project)
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    try:
        latest = ledger.latest_session(ws.store)
        since = latest[1] if latest else time.time()
        report = savings_report(ws.store, since)
    finally:
        ws.close()
    if args.json:
        print(json.dumps(report.as_dict() if args.detail else report.summary(), indent=2))
        return 0
    s, c = report.session, report.cycle
    print(f"session (since {s.as_dict()['since_iso']}): {s.requests} requests, {s.compressed_requests} compressed")
    print(f"  tokens saved:  {s.tokens_saved}  ({s.tokens_original} -> {s.tokens_forwarded})")
    print(f"  dollars saved: {_money(s.dollar_saved)}" + _unpriced(s))
    print(f"cycle (since {c.as_dict()['since_iso']}): {c.requests} requests")
    print(f"  tokens saved:  {c.tokens_saved}")
    print(f"  dollars saved: {_money(c.dollar_saved)}" + _unpriced(c))
    summary = report.summary()
    rate = summary["provider_rate_per_token"]
    print(f"rate: {'unknown' if rate is None else f'${rate * 1e6:.2f} per million input tokens'}"
          + (f" ({s.top_model or c.top_model})" if (s.top_model or c.top_model) else ""))
    print(f"recall: {_ratio(summary['recall'])}   precision: {_ratio(summary['precision'])}"
          f"   (over {s.measured} measured answers)")
    if report.providers_error:
        print(f"note: {report.providers_error}")
    return 0


def _money(v: float | None) -> str:
    return "unknown (no rate for the models used)" if v is None else f"${v:.4f}"


def _unpriced(w) -> str:
    return f"  (+{w.unpriced_tokens_saved} tokens on models without a rate)" if w.unpriced_tokens_saved and \
        w.dollar_saved is not None else ""


def _ratio(v: float | None) -> str:
    return "n/a (no measured answers yet)" if v is None else f"{v:.2f}"
