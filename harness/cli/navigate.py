"""``memstrata symbol``, ``refs`` and ``outline``: the navigation tools on the command line.

They read only (like ``query``): a project never indexed is reported and
nothing is created.  ``--json`` prints exactly what the MCP tool answers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import argtypes
from .reading import fail, first_run_unfinished
from .resident import resident_command

_KINDS = "function, method, class, interface, struct, enum, type, constant, module"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("symbol", help="find definitions by name and print their location (or source)",
                       description="Find the definitions NAME designates: a plain name (login), a qualified "
                       "name (AuthService.login, pkg.mod.func, a::b::C, Vendor\\Pkg\\Class::method), a project id "
                       "(app/auth/service.py::AuthService.login) or a substring ending in '*' (Auth*); a setter or a "
                       "later overload of a name has a suffix (Account.balance:set, Printer.print:2), "
                       "which Account.balance also finds. "
                       "Exact matches first, then the most used. Reads only: index the project first.")
    p.add_argument("name", metavar="NAME", help="the symbol to find")
    argtypes.add_project(p)
    p.add_argument("--body", action="store_true", help="print each definition's source")
    p.add_argument("--kind", default=None, metavar="KIND", help=f"only this kind of definition ({_KINDS})")
    p.add_argument("--in", dest="within", default=None, metavar="FILE_OR_DIR",
                   help="only definitions in this file or folder (a path from the current directory or "
                        "from the project folder)")
    p.add_argument("--max-results", type=argtypes.max_results, default=20, metavar="N",
                   help="most matches to show, 1-200 (default 20)")
    p.add_argument("--json", action="store_true", help="print the find_symbol JSON")
    p.set_defaults(func=cmd_symbol)

    p = sub.add_parser("refs", help="list where a symbol is used (calls, type uses, subclasses, imports)",
                       description="List the uses of SYMBOL across the project, in file and line order "
                       "(when more exist than --max-results, those shown are production code before tests, "
                       "nearest the definition first). "
                       "SYMBOL is written as for `memstrata symbol`; a name with several definitions is "
                       "refused with the candidates listed. Reads only: index the project first.")
    p.add_argument("symbol", metavar="SYMBOL", help="the symbol whose uses to list")
    argtypes.add_project(p)
    p.add_argument("--max-results", type=argtypes.max_results, default=50, metavar="N",
                   help="most uses to show, 1-200 (default 50)")
    p.add_argument("--json", action="store_true", help="print the find_references JSON")
    p.set_defaults(func=cmd_refs)

    p = sub.add_parser("outline", help="print the definitions of a file, nested, with line ranges",
                       description="Print what FILE defines, in source order, methods inside their class. "
                       "FILE is a path from the current directory or from the project folder. Reads only: "
                       "index the project first.")
    p.add_argument("file", metavar="FILE", help="the file to outline")
    argtypes.add_project(p)
    p.add_argument("--depth", default="2", metavar="N", help="nesting levels to show (default 2; 1 = top level); how many definitions lie deeper is said on stderr")
    p.add_argument("--json", action="store_true", help="print the file_outline JSON")
    p.set_defaults(func=cmd_outline)


def _answer(ws, operation, *params) -> dict | int:
    from memstrata.compressor import QueryError

    try:
        if (refusal := first_run_unfinished(ws)) is not None:
            return refusal
        return operation(ws, *params)
    except QueryError as exc:
        return fail(str(exc))


def _from_here(path: str | None) -> str | None:
    """A path that exists from the current directory is taken from there (run in a subfolder, or
    ``.`` for it); anything else is read from the project folder."""
    if path is None or os.path.isabs(path) or not os.path.exists(path):
        return path
    return os.path.abspath(path)


def _symbol(ws, args) -> int:
    """Definitions for ``args.name``, printed; run in-process or by the project's daemon."""
    from memstrata.compressor import navigation

    out = _answer(ws, navigation.find_symbol, args.name, args.body, args.kind, _from_here(args.within),
                  args.max_results)
    if isinstance(out, int):
        return out
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    for s in out["symbols"]:
        print(f"{s['path']}:{s['start_line']}-{s['end_line']}  {s['kind']}  {s['symbol']}")
        if args.body:
            print(s["body"])
            print()
        else:
            print(f"    {s['signature']}")
    if out["truncated"]:
        print("-- more matches than shown; narrow with --kind, --in or --max-results", file=sys.stderr)
    return 0


def _refs(ws, args) -> int:
    """Uses of ``args.symbol``, printed; run in-process or by the project's daemon."""
    from memstrata.compressor import navigation

    out = _answer(ws, navigation.find_references, args.symbol, args.max_results)
    if isinstance(out, int):
        return out
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    for r in out["references"]:
        where = r["symbol"].split("::", 1)[1] if r["symbol"] else "(module level)"
        print(f"{r['path']}:{r['line']}  {r['kind']:<7} {where}: {r['snippet']}")
    n = len(out["references"])
    more = ((" (more exist; raise --max-results)" if args.max_results < 200
             else " (more exist; 200 is the most shown: those nearest the definition, tests last)")
            if out["truncated"] else "")
    print(f"-- {n} use{'s' if n != 1 else ''} of {out['symbol']}{more}", file=sys.stderr)
    if out["unattributed"]:
        k = out["unattributed"]
        name = out["symbol"].rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        print(f"-- and {k} use{'s' if k != 1 else ''} of the name {name} not attributed to any definition "
              "(a receiver of unknown type, or a type the project does not define): not listed; "
              "search for the name to find them", file=sys.stderr)
    return 0


def _outline(ws, args) -> int:
    """The outline of ``args.file``, printed; run in-process or by the project's daemon."""
    from memstrata.compressor import navigation

    out = _answer(ws, navigation.file_outline, _from_here(args.file), args.depth)
    if isinstance(out, int):
        return out
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0

    def ranges(entries: list[dict]) -> list[str]:
        return [f"{e['start_line']}-{e['end_line']}" for e in entries] + [
            r for e in entries for r in ranges(e["children"])]

    # Line ranges padded to one width, so kinds and names line up.
    width = max((len(r) for r in ranges(out["symbols"])), default=0)

    def show(entries: list[dict], indent: int) -> None:
        for e in entries:
            qual = e["symbol"].split("::", 1)[1]
            span = f"{e['start_line']}-{e['end_line']}"
            print(f"{'  ' * indent}{span:<{width}}  {e['kind']:<9} {qual}")
            show(e["children"], indent + 1)

    print(f"{out['path']} ({out['language'] or 'unknown language'})")
    show(out["symbols"], 1)
    if out.get("deeper"):
        n = out["deeper"]
        print(f"-- and {n} definition{'s' if n != 1 else ''} nested deeper than --depth {args.depth}: "
              f"not listed (raise --depth to see them)", file=sys.stderr)
    _say_syntax_errors(ws, out["path"])
    return 0


def _say_syntax_errors(ws, path: str) -> None:
    """A file indexed with syntax errors is indexed as far as it parses: its outline may miss the
    definitions the error hides, and the reader should know why (as ``status`` says)."""
    from memstrata.storage import code_index as ci

    with ws.store.read():
        error = ci.syntax_error_of(ws.store, path)
    if error is not None:
        print(f"-- {path} has syntax errors{f' ({error})' if error else ''}: indexed as far as it parses, "
              "so definitions the errors hide are not listed", file=sys.stderr)


# Answered by the project's resident query process when one runs
# (harness/cli/resident.py), in-process otherwise: the same bytes either way.
cmd_symbol = resident_command("symbol", _symbol)
cmd_refs = resident_command("refs", _refs)
cmd_outline = resident_command("outline", _outline)
