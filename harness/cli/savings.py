"""``memstrata savings``: what the proxy saved, from the project's ledger.

With ``--by`` it reads the ledger as a team's: the billing cycle's savings per
user, host, model, UTC day or project (every project of a shared PostgreSQL
store; the one project of a SQLite index).
"""

from __future__ import annotations

import argparse
import json
import time

from memstrata.indexer.project import ProjectError
from memstrata.storage import StoreError, ledger

from . import argtypes
from memstrata.harness.proxy.savings import (
    GROUPS, SavingsReport, WindowSavings, add_windows, cycle_start, group_dict, grouped, iso, load_providers,
    ranked, savings_report, team_groups, window)

BY = (*GROUPS[:2], "project", *GROUPS[2:])   # user, host, project, model, day


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("savings", help="tokens and dollars the proxy saved (running serve session and billing cycle)",
                       description="Read the project's savings ledger. A session is one `memstrata serve` "
                       "process: the report shows the one running now (or says none runs) and the current "
                       "billing cycle. Dollars saved are the prompt bill the provider would have charged for the "
                       "requests as sent minus the one it charged for the forwarded requests, both at "
                       "cache-aware rates (docs/proxy.md defines every figure). Reads only.")
    argtypes.add_project(p)
    p.add_argument("--by", choices=BY, default=None,
                   help="the billing cycle's tokens and dollars saved per user or host label (memstrata serve "
                   "--user-label), project, model or UTC day; with a shared --store, over every project in it "
                   "(unless --project-name names one)")
    p.add_argument("--all", action="store_true", help="with --by: every recorded request, not just the cycle's")
    p.add_argument("--json", action="store_true", help="print exactly the seven savings_summary fields as JSON "
                   "(with --by: the groups, as docs/proxy.md describes)")
    p.add_argument("--detail", action="store_true",
                   help="with --json: every figure of the session and the cycle, per model, and the sessions")
    p.set_defaults(func=cmd_savings)


def cmd_savings(args) -> int:
    from .index import NotIndexed, fail, open_indexed

    if args.detail and not args.json:
        return fail("--detail shapes the JSON: use it with --json")
    if args.all and args.by is None:
        # The summary is the running session and the billing cycle: "every request" has no place
        # in it, and a flag that changes nothing would read as a total that it is not.
        return fail("--all widens a --by table to every recorded request: use it with --by")
    if args.by is not None:
        return _by_group(args)
    try:
        ws = open_indexed(argtypes.project_of(args), argtypes.store_of(args))
    except NotIndexed as exc:
        return _no_index(exc.root, args)
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    try:
        report = savings_report(ws.store)
        last = ledger.sessions(ws.store, limit=1)
    finally:
        ws.close()
    if args.json:
        print(json.dumps(report.as_dict() if args.detail else report.summary(), indent=2))
        return 0
    print("\n".join(report_lines(report, last[0] if last else None)))
    return 0


def _by_group(args) -> int:
    from .index import NotIndexed, fail, open_indexed

    providers, providers_error = load_providers()
    now = time.time()
    since = None if args.all else cycle_start(now, providers.billing_cycle_start_day if providers else 1)
    skipped: list[dict] = []
    try:
        choice = argtypes.store_of(args)
        if choice.shared and (args.by == "project" or choice.project_name is None):
            # A shared store is the team's: every project in it, unless --project-name names one.
            found, skipped = team_groups(choice.url, (args.by,), since, providers)
            groups = found[args.by]
        else:
            with open_indexed(argtypes.project_of(args), choice) as ws:
                if args.by == "project":
                    name = choice.name_for(ws.root) if choice.shared else ws.root.name
                    groups = {name: window(ws.store, since, providers)}
                else:
                    groups = grouped(ws.store, args.by, since, providers)
    except NotIndexed:
        groups = {}
    except (ProjectError, StoreError) as exc:
        return fail(str(exc))
    rows = ranked(groups)
    total = group_dict("total", add_windows(list(groups.values()), since))
    del total["key"]
    if args.json:
        out = {"by": args.by, "since": iso(since) if since is not None else None,
               "store": "postgresql" if choice.shared else "sqlite", "groups": rows, "total": total}
        if skipped:
            out["skipped"] = skipped
        if providers_error:
            out["providers_error"] = providers_error
        print(json.dumps(out, indent=2))
        return 0
    print("\n".join(group_lines(args.by, since, rows, total, skipped, providers_error)))
    return 0


def group_lines(by: str, since: float | None, rows: list[dict], total: dict, skipped: list[dict],
                providers_error: str | None) -> list[str]:
    span = f"billing cycle since {iso(since)}" if since is not None else "every recorded request"
    lines = [f"savings by {by}, {span}:"]
    if not rows:
        lines.append("  no requests")
    else:
        width = max(len(by), *(len(str(r["key"])) for r in rows), len("total"))
        lines.append(f"  {by:<{width}}  {'requests':>9}  {'tokens saved':>14}  {'dollars saved':>13}")
        for r in [*rows, {"key": "total", **total}]:
            dollars = "unknown" if r["dollar_saved"] is None else usd(r["dollar_saved"])
            lines.append(f"  {str(r['key']):<{width}}  {r['requests']:>9,}  {r['tokens_saved']:>14,}  {dollars:>13}")
    for s in skipped:
        lines.append(f"note: project {s['project']!r} not read: {s['reason']}")
    if providers_error:
        lines.append(f"note: {providers_error}")
    return lines


def _no_index(root, args) -> int:
    from .index import NOT_INDEXED

    empty = SavingsReport(session=None, cycle=WindowSavings(since=time.time()))
    if args.json:
        print(json.dumps(empty.as_dict() if args.detail else empty.summary(), indent=2))
    else:
        print(f"no savings recorded: {root} is {NOT_INDEXED}")
    return 0


def report_lines(report: SavingsReport, last: ledger.Session | None) -> list[str]:
    lines: list[str] = []
    if report.session is not None:
        for s in report.sessions:
            where = f", {s.address}" if s.address else ""
            lines.append(f"memstrata serve: running since {iso(s.started)} (session {s.id}, pid {s.pid}{where})")
        if len(report.sessions) > 1:
            lines.append(f"these {len(report.sessions)} sessions together:")
        lines += _window_lines(report.session, answers=True)
    else:
        lines.append("memstrata serve: not running" + (f"; {_ended(last)}" if last is not None else
                                                       "; no session recorded yet"))
    c = report.cycle
    lines.append(f"billing cycle since {iso(c.since)}:")
    lines += _window_lines(c, answers=report.session is None)
    rate = report.summary()["provider_rate_per_token"]
    model = (report.session.top_model if report.session is not None else None) or c.top_model
    if model is not None:
        lines.append(f"rate: {model} " + ("unknown (set one with memstrata config set provider-rate)"
                                          if rate is None else f"${rate * 1e6:.2f} per million input tokens"))
    if report.providers_error:
        lines.append(f"note: {report.providers_error}")
    return lines


def _ended(s: ledger.Session) -> str:
    if s.ended is None:  # its process is gone (running_sessions said so) and nothing closed it yet
        return (f"last session {s.id} started {iso(s.started)} and died without stopping "
                "(the next memstrata serve closes it)")
    how = "died; closed by a later start" if s.crashed else "stopped"
    return f"last session {s.id} ran {iso(s.started)} to {iso(s.ended)} ({how})"


def _window_lines(w: WindowSavings, answers: bool) -> list[str]:
    if not w.requests:
        return ["  no requests"]
    share = f" ({100 * w.tokens_saved / w.tokens_original:.1f} %)" if w.tokens_original else ""
    extra = f", {w.compactions} compaction{'s' if w.compactions != 1 else ''}" if w.compactions else ""
    lines = [
        f"  requests:       {w.requests} ({w.compressed_requests} compressed{extra}"
        + (f", {w.requests - w.ok_requests} refused or failed" if w.requests != w.ok_requests else "") + ")",
        f"  tokens saved:   {w.tokens_saved:,} of {w.tokens_original:,}{share}",
    ]
    if w.usage_requests:
        one_hour = f" ({w.cache_write_1h_tokens:,} of them 1-hour)" if w.cache_write_1h_tokens else ""
        lines.append(f"  provider usage: {w.input_tokens:,} input, {w.cache_read_tokens:,} cache read, "
                     f"{w.cache_write_tokens:,} cache write{one_hour}, {w.output_tokens:,} output tokens")
    lines.append(f"  dollars saved:  {_dollars(w)}")
    if answers and w.measured:
        # recall is undefined while no measured answer named a project symbol (and
        # precision while no measured slice held one): say so rather than print 0.
        lines.append(f"  answers:        recall {_share(w.recall)}, precision {_share(w.precision)} "
                     f"over {w.measured} measured")
    return lines


def _share(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def usd(v: float) -> str:
    """Dollars with the digits that matter: cents above $1, more below (a session's savings are often tiny)."""
    a = abs(v)
    return ("-" if v < 0 else "") + f"${a:.{2 if a >= 1 else 4 if a >= 0.01 else 6}f}"


def _dollars(w: WindowSavings) -> str:
    if w.dollar_saved is None:
        return "unknown (no rate for the models used)"
    text = usd(w.dollar_saved)
    if w.cf_requests and w.bill_direct is not None:
        text += f" (prompts {usd(w.bill_direct)} without the proxy, {usd(w.bill_proxied)} through it)"
    elif w.cache_miss_dollars:
        text += f" ({usd(w.dollar_saved_gross)} saved, {usd(w.cache_miss_dollars)} lost to cache misses)"
    if w.unpriced_tokens_saved:
        text += f"; {w.unpriced_tokens_saved:,} tokens saved on models without a rate"
    return text
