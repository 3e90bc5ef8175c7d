"""``memstrata config show`` and ``memstrata config set provider-rate|billing-day``."""

from __future__ import annotations

import argparse
import json
import math

from . import argtypes
from memstrata.harness.proxy.providers import (
    MAX_COST_PER_MTOK, Providers, ProvidersError, cache_write_1h_factor, display_path,
)
from memstrata.harness.proxy.upstream import shown_url

# A rate as providers.json takes it (the same range, the same words).
_RATE = argtypes.checked(float, lambda v: math.isfinite(v) and 0 <= v <= MAX_COST_PER_MTOK, "a number",
                         f"must be a number of USD per million tokens from 0 to {MAX_COST_PER_MTOK:,.0f}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show or change provider rates (~/memstrata/providers.json)",
                       description="Provider hints live in ~/memstrata/providers.json (MEMSTRATA_HOME overrides "
                       "~/memstrata); the file is created with defaults on first use.")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    csub.required = True

    show = csub.add_parser("show", help="print the providers file and its rates")
    show.add_argument("--json", action="store_true", help="print the file's JSON")
    show.set_defaults(func=cmd_show)

    setp = csub.add_parser("set", help="change a setting")
    ssub = setp.add_subparsers(dest="setting", metavar="SETTING")
    ssub.required = True
    rate = ssub.add_parser("provider-rate", help="set a model's input rate in USD per million tokens",
                           description="Set MODEL's input_cost_per_mtok (USD per million input tokens, as in "
                           "providers.json) and, optionally, its output and prompt-cache rates. MODEL may be an "
                           "exact name, a pattern such as 'claude-sonnet-4*', or '*' for every model of a "
                           "provider. A model without cache rates is priced with its provider family's "
                           "multipliers (Anthropic: reads 0.1x, writes 1.25x, 1-hour writes 2x the input rate; "
                           "others: reads 0.5x, writes 1x).")
    rate.add_argument("model")
    rate.add_argument("rate", type=_RATE, help="USD per million input tokens, e.g. 3.00")
    rate.add_argument("--provider", default=None,
                      help="provider to file it under (default: the one listing MODEL, else guessed from the name)")
    rate.add_argument("--output", type=_RATE, default=None, metavar="RATE",
                      help="USD per million output tokens")
    rate.add_argument("--cache-read", type=_RATE, default=None, metavar="RATE",
                      help="USD per million prompt tokens read from the provider's cache")
    rate.add_argument("--cache-write", type=_RATE, default=None, metavar="RATE",
                      help="USD per million prompt tokens written to the provider's cache (Anthropic: its "
                      "5-minute cache)")
    rate.add_argument("--cache-write-1h", type=_RATE, default=None, metavar="RATE",
                      help="USD per million prompt tokens written to Anthropic's 1-hour cache (breakpoints "
                      "marked \"ttl\": \"1h\")")
    rate.set_defaults(func=cmd_set_rate)
    day = ssub.add_parser("billing-day", help="day of the month your billing cycle starts (1-31, default 1)")
    day.add_argument("day", type=int)
    day.set_defaults(func=cmd_set_day)


def _fail(message: str) -> int:
    import sys

    print(f"memstrata: {message}", file=sys.stderr)
    return 2


def cmd_show(args) -> int:
    try:
        p = Providers.load()
    except ProvidersError as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(p.data, indent=2))
        return 0
    print(f"providers file: {display_path(p.path)}")
    print(f"billing cycle starts on day {p.billing_cycle_start_day} of the month (UTC)")
    rows = p.rows()
    w_p = max([len("provider")] + [len(r.provider) for r in rows])
    w_m = max([len("model")] + [len(r.model_key) for r in rows])
    print(f"{'provider':<{w_p}}  {'model':<{w_m}}  {'input':>8}  {'output':>8}  {'cache read':>10}  "
          f"{'cache write':>11}  {'1h write':>8}   (USD per million tokens; * = derived from the input rate)")
    for r in rows:
        out = "-" if r.output_cost_per_mtok is None else f"{r.output_cost_per_mtok:.2f}"
        # Only Anthropic has 1-hour cache writes: elsewhere the column has nothing to show.
        has_1h = r.cache_write_1h_listed or cache_write_1h_factor(r.provider, r.model_key) is not None
        write_1h = f"{r.cache_write_1h_cost_per_mtok:>8.3f}" if has_1h else f"{'-':>8}"
        derived = not r.cache_rates_listed or (has_1h and not r.cache_write_1h_listed)
        mark = "*" if derived else " "
        print(f"{r.provider:<{w_p}}  {r.model_key:<{w_m}}  {r.input_cost_per_mtok:>8.2f}  {out:>8}  "
              f"{r.cache_read_cost_per_mtok:>10.3f}  {r.cache_write_cost_per_mtok:>11.3f}  {write_1h}{mark}")
    for name in p.providers:
        if p.base_url(name):
            print(f"{name} upstream: {shown_url(p.base_url(name))}")
    return 0


def cmd_set_rate(args) -> int:
    try:
        p = Providers.load(create=False)  # the change is saved below: no defaults written first
        provider = p.set_rate(args.model, args.rate, provider=args.provider, output=args.output,
                              cache_read=args.cache_read, cache_write=args.cache_write,
                              cache_write_1h=args.cache_write_1h)
        p.save()
    except ProvidersError as exc:
        return _fail(str(exc))
    rate = p.rate(args.model, provider)
    parts = [f"input ${args.rate:g}"]
    if rate is not None and rate.model_key == args.model:
        if rate.output_cost_per_mtok is not None:
            parts.append(f"output ${rate.output_cost_per_mtok:g}")
        parts.append(f"cache read ${rate.cache_read_cost_per_mtok:g}")
        parts.append(f"cache write ${rate.cache_write_cost_per_mtok:g}")
        if rate.cache_write_1h_listed or cache_write_1h_factor(rate.provider, rate.model_key) is not None:
            parts.append(f"1-hour cache write ${rate.cache_write_1h_cost_per_mtok:g}")
    print(f"{provider} / {args.model}: {', '.join(parts)} per million tokens ({display_path(p.path)})")
    return 0


def cmd_set_day(args) -> int:
    try:
        p = Providers.load(create=False)  # the change is saved below: no defaults written first
        p.set_billing_day(args.day)
        p.save()
    except ProvidersError as exc:
        return _fail(str(exc))
    print(f"billing cycle starts on day {args.day} ({display_path(p.path)})")
    return 0
