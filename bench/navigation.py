"""Symbol navigation (issue 22): exactness, reference recall/precision and
latency over MCP stdio, against what Python's own ``ast`` says.

    python bench/navigation.py CORPUS [--calls N] [--seed S] [--json OUT]

CORPUS is a Python code base nobody here wrote (CORPORA/django_sdist, about
490k lines, or CORPORA/sympy_wheel); its index lives in CORPUS/.memstrata and
is caught up first (``memstrata index CORPUS`` builds it ahead of time).

1. **find_symbol exactness.**  Every function and class definition ``ast``
   finds in the indexed Python files is looked up by its project id
   (``path::Class.method``) with ``include_body``; it counts as exact when
   the one answer has ``ast``'s range (the first decorator's line through
   ``end_lineno``) and its body is those lines of the file, byte for byte.
   A qualname defined twice in one file (a property setter, a definition
   under ``if``/``else``) has one project id, the first definition's: the
   later ones are counted apart.  Target 100 %.
2. **find_references against ``ast``.**  For each function whose name is
   defined once in the whole repository (functions and classes), the call
   sites an ``ast`` walk finds by that name (``name(...)``, ``x.name(...)``)
   are the truth, as far as Python lets that name reach it: a bare
   ``name(...)`` is a use only of a module-level function or class (a method
   needs a receiver), of a builtin's namesake (``open``) only in its own
   file, ``x.name(...)`` is a use of a module-level function only when ``x``
   is a name a project import binds (a module: not a local, a parameter, a
   call's result, ``np = import_module("numpy")``), and a call on a module or
   name imported from outside the project
   (``np.array(...)``, ``sqrt(...)`` after ``from math import sqrt``) is the
   library's, and a call spelled by an import's alias (``dp(...)`` after
   ``from .delta import deltaproduct as dp``) is a use of what it imports;
   find_references' ``call`` entries are the answer.  Recall
   >= 0.95 and precision >= 0.90 are the targets.  Functions with more than
   200 uses (one answer's cap) are left out and counted.  Names that are
   also methods of Python's built-in types (``append``, ``get``) are
   reported apart as well, since the walk counts every ``list.append`` call
   as a use of the project's ``append``.
3. **Latency over MCP stdio.**  ``memstrata mcp --project CORPUS --no-watch``
   is started, and the three tools are called N times each on random
   definitions and files, round-robin; p50/p95 per tool, target p95 <= 20 ms.
   Side by side in the same run: ``savings_summary`` (a tool that reads one
   small table: the protocol's floor) and
   the grep an agent runs without these tools (a word search over every
   indexed Python file, in-process), and the tokens of a body against its
   whole file.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from memstrata.compressor import count_tokens, navigation
from memstrata.indexer.workspace import Workspace

GOAL_P95_MS = 20.0
TARGET_RECALL, TARGET_PRECISION = 0.95, 0.90
_BUILTINS = frozenset(dir(builtins))
_BUILTIN_METHODS = {name for t in (list, dict, str, set, bytes, tuple, int, float, object, frozenset)
                    for name in dir(t)} | set(dir(builtins))


def memstrata_command() -> list[str]:
    script = Path(sys.executable).with_name("memstrata")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memstrata"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- what ast says ----------------------------------------------------------------

class Truth:
    def __init__(self) -> None:
        self.defs: list[tuple[str, str, int, int]] = []  # (path, qualname, start, end), first of each qualname
        self.redefined = 0
        self.def_names: Counter[str] = Counter()
        self.function_ids: dict[str, str] = {}  # function name -> project id (meaningful when defined once)
        self.calls: dict[str, set[tuple[str, int]]] = defaultdict(set)  # name -> {(path, line)} of x.name(...)
        # name -> {(path, line)} of m.name(...) where m is a name a project import binds: the only
        # receivers through which Python reaches a module-level function (a module)
        self.module_calls: dict[str, set[tuple[str, int]]] = defaultdict(set)
        self.bare_calls: dict[str, set[tuple[str, int]]] = defaultdict(set)  # name -> {(path, line)} of name(...)
        self.lines = 0
        self.unparsable = 0
        self.texts: dict[str, str] = {}


def _library_names(tree: ast.AST, project_roots: set[str]) -> set[str]:
    """Names a file's imports bind to modules or names from outside the project (`import numpy
    as np`, `from math import sqrt`): `np.array(...)` and `sqrt(...)` are the library's calls."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".", 1)[0] not in project_roots:
                    out.add(a.asname or a.name.split(".", 1)[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".", 1)[0] not in project_roots:
                out.update(a.asname or a.name for a in node.names if a.name != "*")
    return out


def _project_aliases(tree: ast.AST, project_roots: set[str]) -> dict[str, str]:
    """What each alias of a project name a file imports stands for (`from .delta import
    deltaproduct as dp`: `dp(...)` is a call of `deltaproduct`)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".", 1)[0] in project_roots):
            out.update((a.asname, a.name) for a in node.names if a.asname and a.name != "*")
    return out


def _project_imported(tree: ast.AST, project_roots: set[str]) -> set[str]:
    """Names a file's imports of the project bind (`from . import util`, `import pkg.mod as m`):
    a receiver that can be a module."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.asname or a.name.split(".", 1)[0] for a in node.names
                       if a.name.split(".", 1)[0] in project_roots)
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".", 1)[0] in project_roots):
            out.update(a.asname or a.name for a in node.names if a.name != "*")
    return out


def read_truth(root: Path, paths: list[str]) -> Truth:
    t = Truth()
    # The project's importable top-level names: its packages and top-level modules.
    project_roots = {p.split("/", 1)[0].removesuffix(".py") for p in paths}
    for path in paths:
        try:
            text = (root / path).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            t.unparsable += 1
            continue
        t.texts[path] = text
        t.lines += text.count("\n") + 1
        library = _library_names(tree, project_roots)
        aliases = _project_aliases(tree, project_roots)
        imported = _project_imported(tree, project_roots)
        seen: set[str] = set()
        stubs: dict[str, int] = {}  # qualname -> index in t.defs of its pending @overload signature

        def visit(node: ast.AST, stack: list[str], in_redefinition: bool = False) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qual = ".".join([*stack, child.name])
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    redefinition = in_redefinition
                    if in_redefinition:
                        # Nested in a later definition of a name: its id follows that one's
                        # (`_:11.nonz`), which this walk does not name; counted apart with it.
                        t.redefined += 1
                    elif qual in stubs:
                        # `@overload` signatures fold into the implementation
                        # that follows them (as the indexer documents): the
                        # implementation is the definition find_symbol names.
                        i = stubs.pop(qual)
                        t.defs[i] = (path, qual, start, child.end_lineno)
                        if _is_overload(child):
                            stubs[qual] = i
                    elif qual in seen:
                        t.redefined += 1
                        redefinition = True
                    else:
                        seen.add(qual)
                        t.defs.append((path, qual, start, child.end_lineno))
                        if _is_overload(child):
                            stubs[qual] = len(t.defs) - 1
                    t.def_names[child.name] += 1
                    if not isinstance(child, ast.ClassDef) and not in_redefinition:
                        t.function_ids[child.name] = f"{path}::{qual}"
                    visit(child, [*stack, child.name], redefinition)
                else:
                    if isinstance(child, ast.Call):
                        f = child.func
                        if isinstance(f, ast.Name):
                            if f.id not in library:
                                t.bare_calls[aliases.get(f.id, f.id)].add((path, f.lineno))
                        elif isinstance(f, ast.Attribute):
                            if not (isinstance(f.value, ast.Name) and f.value.id in library):
                                t.calls[f.attr].add((path, f.end_lineno))
                                if isinstance(f.value, ast.Name) and f.value.id in imported:
                                    t.module_calls[f.attr].add((path, f.end_lineno))
                    visit(child, stack, in_redefinition)

        visit(tree, [])
    return t


def _is_overload(node: ast.AST) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "overload")
               or (isinstance(d, ast.Attribute) and d.attr == "overload")
               for d in getattr(node, "decorator_list", ()))


def body_of(text: str, start: int, end: int) -> str:
    body = "".join(text.splitlines(keepends=True)[start - 1 : end])
    return body[:-2] if body.endswith("\r\n") else body[:-1] if body.endswith(("\n", "\r")) else body


# -- 1 and 2: in-process ----------------------------------------------------------

def exactness(ws: Workspace, truth: Truth) -> dict:
    ok = 0
    misses: Counter[str] = Counter()
    examples: list[str] = []
    for path, qual, start, end in truth.defs:
        pid = f"{path}::{qual}"
        try:
            out = navigation.find_symbol(ws, pid, include_body=True)
        except navigation.NavigationError as exc:
            misses["not found"] += 1
            if len(examples) < 8:
                examples.append(f"{pid}: {exc}")
            continue
        syms = out["symbols"]
        if len(syms) != 1 or syms[0]["symbol"] != pid:
            misses["other answer"] += 1
            continue
        s = syms[0]
        if (s["start_line"], s["end_line"]) != (start, end):
            misses["range differs"] += 1
            if len(examples) < 8:
                examples.append(f"{pid}: {s['start_line']}-{s['end_line']}, ast {start}-{end}")
            continue
        if s["body"] != body_of(truth.texts[path], start, end):
            misses["text differs"] += 1
            continue
        ok += 1
    n = len(truth.defs)
    return {"definitions": n, "exact": ok, "share": ok / n if n else 0.0, "misses": dict(misses),
            "redefinitions_not_addressable": truth.redefined, "examples": examples}


def _bare_uses(truth: Truth, name: str, pid: str) -> set[tuple[str, int]]:
    """The `name(...)` calls that can mean ``pid`` in Python: only a module-level function or
    class is reachable by its bare name (a method needs its receiver, a nested function its
    enclosing scope), and a builtin's name (`open`, `str`) is the builtin outside the file that
    defines it."""
    path, _, qual = pid.partition("::")
    calls = truth.bare_calls.get(name, set())
    if "." in qual:
        return {c for c in calls if c[0] == path}  # a closure called where it is defined
    if name in _BUILTINS:
        return {c for c in calls if c[0] == path}
    return set(calls)


def references(ws: Workspace, truth: Truth) -> dict:
    once = [name for name, n in truth.def_names.items() if n == 1 and name in truth.function_ids]
    groups = {"all": [0, 0, 0], "builtin-method names": [0, 0, 0], "other names": [0, 0, 0]}
    truncated = errors = 0
    worst: list[tuple[int, str]] = []
    for name in once:
        pid = truth.function_ids[name]
        try:
            out = navigation.find_references(ws, pid, max_results=200)
        except navigation.NavigationError:
            errors += 1
            continue
        if out["truncated"]:
            truncated += 1
            continue
        found = {(r["path"], r["line"]) for r in out["references"] if r["kind"] == "call" and r["path"].endswith(".py")}
        # A module-level function is reached through a receiver only when that is a module
        # (`util.f()` after `from . import util`): `x.f()` on a local, a parameter, a call's
        # result or `np = import_module("numpy")` is a method of that object, not a use of it.
        module_level = "." not in pid.partition("::")[2]
        through = (truth.module_calls if module_level else truth.calls).get(name, set())
        want = through | _bare_uses(truth, name, pid)
        hit = len(found & want)
        for key in ("all", "builtin-method names" if name in _BUILTIN_METHODS else "other names"):
            g = groups[key]
            g[0] += hit
            g[1] += len(want)
            g[2] += len(found)
        if len(want) - hit >= 3:
            worst.append((len(want) - hit, pid))
    worst.sort(reverse=True)
    summary = {k: {"true_uses": w, "found": f, "hits": h, "recall": h / w if w else 1.0,
                   "precision": h / f if f else 1.0} for k, (h, w, f) in groups.items()}
    return {"functions": len(once), "truncated": truncated, "errors": errors, "groups": summary,
            "most_missed": worst[:8]}


# -- 3: over MCP stdio --------------------------------------------------------------

async def latency(corpus: Path, truth: Truth, calls: int, rng: random.Random, files: list[str]) -> dict:
    defs = rng.sample(truth.defs, min(calls, len(truth.defs)))
    once = [truth.function_ids[n] for n, c in truth.def_names.items() if c == 1 and n in truth.function_ids]
    ref_targets = rng.sample(once, min(calls, len(once)))
    outline_files = [rng.choice(files) for _ in range(calls)]
    cmd = memstrata_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--project", str(corpus), "--no-watch"])
    times: dict[str, list[float]] = defaultdict(list)
    body_ratio: list[float] = []
    with open(corpus / ".memstrata" / "bench-navigation.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            t0 = time.perf_counter()
            while True:
                r = await s.call_tool("index_status", {})
                if r.structured_content and r.structured_content["status"] == "ready":
                    break
                await anyio.sleep(0.2)
            print(f"  server ready in {time.perf_counter() - t0:.1f}s")
            # One warm-up round: the first call of each tool pays for imports.
            await s.call_tool("find_symbol", {"name": defs[0][1]})
            await s.call_tool("find_references", {"symbol": ref_targets[0]})
            await s.call_tool("file_outline", {"path": outline_files[0]})
            for i in range(calls):
                path, qual, _start, _end = defs[i % len(defs)]
                plain = qual.rsplit(".", 2)[-2:] if "." in qual else [qual]
                for tool, args in (
                    ("find_symbol", {"name": ".".join(plain), "include_body": True}),
                    ("find_references", {"symbol": ref_targets[i % len(ref_targets)]}),
                    ("file_outline", {"path": outline_files[i]}),
                    ("savings_summary", {}),
                ):
                    t = time.perf_counter()
                    r = await s.call_tool(tool, args)
                    times[tool].append((time.perf_counter() - t) * 1000)
                    if r.is_error and tool != "find_symbol":
                        raise SystemExit(f"{tool} {args} failed: {r.content[0].text}")
                    if tool == "find_symbol" and not r.is_error and i < 100:
                        first = r.structured_content["symbols"][0]
                        whole = truth.texts.get(first["path"])
                        if whole:
                            body_ratio.append(count_tokens(first["body"]) / max(1, count_tokens(whole)))
    return {"times": times, "body_ratio": body_ratio}


def grep_baseline(root: Path, truth: Truth, names: list[str]) -> list[float]:
    """What an agent without these tools runs: a word search over every file."""
    out = []
    for name in names:
        pattern = re.compile(r"\b" + re.escape(name) + r"\b")
        t = time.perf_counter()
        for path in truth.texts:
            text = (root / path).read_text(encoding="utf-8", errors="replace")
            for _m in pattern.finditer(text):
                pass
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--calls", type=int, default=300, help="calls per tool over MCP (default 300)")
    ap.add_argument("--grep-names", type=int, default=10, help="word searches for the grep baseline (default 10)")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    corpus = args.corpus.resolve()
    rng = random.Random(args.seed)

    t0 = time.perf_counter()
    ws = Workspace.open(corpus)
    summary = ws.index()
    graph = ws.graph
    files = sorted(f for f in graph.files() if f.endswith(".py"))
    print(f"{corpus.name}: {summary.files:,} files indexed ({summary.parsed} re-parsed), "
          f"{len(files):,} Python; ready in {time.perf_counter() - t0:.1f}s")
    truth = read_truth(corpus, files)
    print(f"ast: {truth.lines:,} lines of Python, {len(truth.defs):,} definitions, "
          f"{truth.redefined} redefinitions, {truth.unparsable} files ast cannot parse")

    t0 = time.perf_counter()
    ex = exactness(ws, truth)
    print(f"\n1. find_symbol by project id, range and body equal to ast's: {ex['exact']:,} of {ex['definitions']:,} "
          f"= {ex['share']:.2%} (target 100 %) [{time.perf_counter() - t0:.0f}s]")
    if ex["misses"]:
        print(f"   misses: {ex['misses']}")
        for e in ex["examples"]:
            print(f"     {e}")
    print(f"   not addressable: {ex['redefinitions_not_addressable']} later redefinitions of a qualname in the same file"
          " and definitions nested in them")

    t0 = time.perf_counter()
    refs = references(ws, truth)
    print(f"\n2. find_references vs ast call sites, {refs['functions']:,} functions defined once "
          f"({refs['truncated']} with > 200 uses left out, {refs['errors']} errors) [{time.perf_counter() - t0:.0f}s]")
    for key, g in refs["groups"].items():
        print(f"   {key:<22} uses {g['true_uses']:>6,}  found {g['found']:>6,}  recall {g['recall']:.3f} "
              f"(target {TARGET_RECALL})  precision {g['precision']:.3f} (target {TARGET_PRECISION})")
    if refs["most_missed"]:
        print("   most missed: " + ", ".join(f"{pid} ({n})" for n, pid in refs["most_missed"][:5]))
    ws.close()

    result = {"corpus": corpus.name, "lines": truth.lines, "exactness": ex, "references": refs}
    if not args.skip_latency:
        print(f"\n3. latency over MCP stdio, {args.calls} calls per tool")
        lat = anyio.run(latency, corpus, truth, args.calls, rng, files)
        floor = pct(lat["times"]["savings_summary"], 0.5)
        grep_names = [q.rsplit(".", 1)[-1] for _p, q, _s, _e in rng.sample(truth.defs, args.grep_names)]
        grep = grep_baseline(corpus, truth, grep_names)
        grep_p50 = statistics.median(grep)
        out = {}
        for tool in ("find_symbol", "find_references", "file_outline", "savings_summary"):
            ts = lat["times"][tool]
            p50, p95 = pct(ts, 0.5), pct(ts, 0.95)
            out[tool] = {"p50_ms": p50, "p95_ms": p95}
            goal = f"  (goal p95 <= {GOAL_P95_MS:.0f} ms: {'met' if p95 <= GOAL_P95_MS else 'MISSED'})" \
                if tool != "savings_summary" else "  (the protocol's floor)"
            print(f"   {tool:<16} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  "
                  f"p50 / floor {p50 / floor:4.1f}x  grep / p50 {grep_p50 / p50:5.0f}x{goal}")
        print(f"   grep baseline (word search over {len(truth.texts):,} files, in-process): "
              f"p50 {grep_p50:.0f} ms over {len(grep)} names")
        if lat["body_ratio"]:
            print(f"   find_symbol body tokens / whole-file tokens: median {statistics.median(lat['body_ratio']):.3f} "
                  f"over {len(lat['body_ratio'])} answers")
        result["latency"] = out
        result["grep_p50_ms"] = grep_p50
        result["body_to_file_tokens_median"] = statistics.median(lat["body_ratio"]) if lat["body_ratio"] else None
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
