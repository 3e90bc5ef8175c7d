"""``memstrata config show`` and ``memstrata config set provider-rate|billing-day``."""

from __future__ import annotations

import argparse
import json

from . import argtypes
from .providers import Providers, ProvidersError, display_path


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
                           "providers.json). MODEL may be an exact name, a pattern such as 'claude-sonnet-4*', "
                           "or '*' for every model of a provider.")
    rate.add_argument("model")
    rate.add_argument("rate", type=argtypes.non_negative, help="USD per million input tokens, e.g. 3.00")
    rate.add_argument("--provider", default=None,
                      help="provider to file it under (default: the one listing MODEL, else guessed from the name)")
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
    w_p = max([len("provider")] + [len(r[0]) for r in rows])
    w_m = max([len("model")] + [len(r[1]) for r in rows])
    print(f"{'provider':<{w_p}}  {'model':<{w_m}}  {'input $/Mtok':>12}  {'output $/Mtok':>13}")
    for provider, model, inp, out in rows:
        print(f"{provider:<{w_p}}  {model:<{w_m}}  {inp:>12.2f}  {'-' if out is None else f'{out:.2f}':>13}")
    for name in p.providers:
        if p.base_url(name):
            print(f"{name} upstream: {p.base_url(name)}")
    return 0


def cmd_set_rate(args) -> int:
    try:
        p = Providers.load()
        provider = p.set_rate(args.model, args.rate, provider=args.provider)
        p.save()
    except ProvidersError as exc:
        return _fail(str(exc))
    print(f"{provider} / {args.model}: input ${args.rate:g} per million tokens ({display_path(p.path)})")
    return 0


def cmd_set_day(args) -> int:
    try:
        p = Providers.load()
        p.set_billing_day(args.day)
        p.save()
    except ProvidersError as exc:
        return _fail(str(exc))
    print(f"billing cycle starts on day {args.day} ({display_path(p.path)})")
    return 0
