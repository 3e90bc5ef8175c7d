"""Retrieval quality of ``context_query`` against naive RAG, on real git history (issues 3 and 10).

Cases come from each repository's own history.  A commit qualifies when it
is not a merge, modifies (no adds, deletes, renames, binary diffs) 1-3
non-test source files in a supported language, and at least one changed
line lies inside a function/class that exists at the parent commit.  Other
files (tests, docs, changelog) may change too.  For a case:

* query = the commit message (subject + body) without trailers such as
  ``Signed-off-by:`` / ``Co-authored-by:`` (PR numbers like "(#1234)" stay);
  messages with fewer than ``--min-query-words`` content words ("Fix typo",
  "Tweaks", "spelling") are skipped and counted: nothing to retrieve by;
* gold files = the changed source files;
* gold symbols = the innermost function/method/class enclosing each changed
  line, taken from the index of the parent commit.

The parent is checked out into one scratch clone per repository (outside
the repository, under ``--scratch``), indexed incrementally (each case moves
the same checkout to the next parent, so only changed files are re-parsed),
then ``context_query`` and the naive-RAG arm (:mod:`compressor.baseline`)
run at the same ``--max-tokens``.  Commits are taken newest first, so the
selection is deterministic for a given repository HEAD.

Measured per case and averaged over cases (every case weighs the same):

* file recall: share of gold files in ``sources``;
* symbol recall: share of gold symbols whose definition line is in the
  slice -- for ``context_query`` the symbol (or an enclosing symbol shown in
  full) is among the rendered symbols, for naive RAG a packed chunk spans
  the line of the symbol's signature;
* tokens, ``baseline_tokens`` (whole text of the files in ``sources``) and
  their per-case ratio;
* p50/p95 latency of the ``context_query`` call alone (the graph is warm;
  the name-index rebuild after each incremental update is included).

``--latency-index PATH`` also times ``context_query`` on a large existing
index (read-only), e.g. the sympy wheel indexed by bench/index_speed.py,
with queries made from its docstrings' first lines, "<Symbol> and its
callers", and (``--latency-repo``) real commit messages of a repository.
It then times one-shot ``memstrata query`` processes on that project (wall
clock, start-up to exit, like a shell user or a script): the first one, which
builds and saves the graph snapshot when none matches the index, apart from
the rest.  Those processes may save the snapshot and whole-file token counts
into the index folder, as any reader of a writable index does.

Printed per repository, with a GUARD line for any repository where
context_query is below the BM25 arm on file or symbol recall, the share of
slices under half the budget, and issue 10's targets next to their figures.
A large repository's run is bounded with ``--limit NAME=CASES[/SCAN]``.

Example (CORPORA holds the clones; see docs/benchmarks.md for the commands)::

    python bench/quality.py --repos CORPORA/repos/{click,starlette,rich,attrs,ky,cobra,sympy,twisted,tokio,eslint} \\
        --limit sympy=40/2000 --latency-index CORPORA/sympy_wheel --latency-repo CORPORA/repos/sympy \\
        --json /tmp/quality.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memstrata.compressor import context_query
from memstrata.compressor.baseline import STOPWORDS, chunk_index, naive_rag
from memstrata.indexer.graph import SYMBOL
from memstrata.indexer.languages import language_for_path
from memstrata.indexer.project import INDEX_FILE
from memstrata.indexer.scan import is_test_path
from memstrata.indexer.workspace import Workspace
from memstrata.storage import Store
from memstrata.storage import code_index as ci

GOLD_KINDS = frozenset({"function", "method", "class", "interface", "struct", "enum", "type"})
MAX_SOURCE_FILES = 3
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_TRAILER = re.compile(
    r"^\s*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|suggested-by|"
    r"helped-by|cc|change-id|[a-z]+(-[a-z]+)*-by)\s*:",
    re.I,
)
_WS = re.compile(r"\s+")
_CONTENT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")
_PR_REF = re.compile(r"\(#\d+\)|#\d+")


# -- data ---------------------------------------------------------------------


@dataclass
class GoldSymbol:
    node: str  # "path::qualname" at the parent commit
    kind: str
    start: int
    end: int
    def_line: int  # the line carrying the signature (after decorators)


@dataclass
class Case:
    repo: str
    sha: str
    parent: str
    query: str
    files: list[str]
    symbols: list[GoldSymbol]


@dataclass
class ArmResult:
    file_recall: float
    symbol_recall: float
    tokens: int
    baseline_tokens: int
    latency_ms: float
    sources: list[str]
    hits: list[str] = field(default_factory=list)  # gold symbols found
    shown: list[str] = field(default_factory=list)  # cq: symbols; rag: "path:a-b" spans
    full: list[str] = field(default_factory=list)  # cq: symbols shown in full


@dataclass
class CaseResult:
    case: Case
    cq: ArmResult
    rag: ArmResult


@dataclass
class RepoRun:
    name: str
    head: str
    results: list[CaseResult] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    scanned: int = 0
    source_lines: int = 0  # non-test source lines indexed at the last case
    language: str = ""  # the language most gold files are in

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


# -- git ------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, check=True)
    return out.stdout.decode("utf-8", errors="replace")


def commit_message(repo: Path, sha: str) -> str:
    lines = git(repo, "log", "-1", "--format=%B", sha).splitlines()
    kept = [ln for ln in lines if not _TRAILER.match(ln)]
    return _WS.sub(" ", " ".join(kept)).strip()


def content_words(message: str) -> int:
    """Words that could steer retrieval: no stop words, no PR numbers."""
    return sum(1 for w in _CONTENT_WORD.findall(_PR_REF.sub(" ", message)) if w.lower() not in STOPWORDS)


def source_changes(repo: Path, parent: str, sha: str) -> tuple[list[str] | None, str | None]:
    """The modified non-test source files, or (None, skip reason)."""
    sources: list[str] = []
    for line in git(repo, "diff-tree", "-r", "-M", "--no-commit-id", "--name-status", parent, sha).splitlines():
        parts = line.split("\t")
        status, paths = parts[0], parts[1:]
        if not any(language_for_path(p) and not is_test_path(p) for p in paths):
            continue
        if status != "M":
            return None, "source_added_deleted_or_renamed"
        sources.append(paths[0])
    if not sources:
        return None, "no_source_change"
    if len(sources) > MAX_SOURCE_FILES:
        return None, "more_than_3_source_files"
    for line in git(repo, "diff-tree", "-r", "--no-commit-id", "--numstat", parent, sha, "--", *sources).splitlines():
        if line.startswith("-\t-\t"):
            return None, "binary_diff"
    return sources, None


def changed_old_lines(repo: Path, parent: str, sha: str, paths: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Per file, the parent-side ranges touched: (first, count); count 0 = insertion after `first`."""
    out: dict[str, list[tuple[int, int]]] = {p: [] for p in paths}
    current: str | None = None
    diff = git(repo, "diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames", parent, sha, "--", *paths)
    for line in diff.splitlines():
        if line.startswith("--- "):
            name = line[4:]
            current = name[2:] if name.startswith("a/") else None
        elif line.startswith("@@") and current in out:
            m = _HUNK.match(line)
            if m:
                out[current].append((int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)))
    return out


# -- gold -------------------------------------------------------------------------


def definition_line(lines: list[str], start: int, end: int, signature: str) -> int:
    head = _WS.sub("", signature)[:12]
    if head:
        for i in range(start, min(end, start + 30) + 1):
            if i - 1 < len(lines) and head in _WS.sub("", lines[i - 1]):
                return i
    return start


def gold_symbols(ws: Workspace, ranges: dict[str, list[tuple[int, int]]]) -> list[GoldSymbol]:
    graph = ws.graph
    gold: dict[str, GoldSymbol] = {}
    for path, hunks in ranges.items():
        spans = []
        for node in graph.symbols_in_file(path):
            d = graph.node(node)
            if d["kind"] in GOLD_KINDS:
                spans.append((d["start_line"], d["end_line"], node, d))
        if not spans:
            continue
        lines = (ci.file_text(ws.store, path) or "").split("\n")

        def innermost(line: int, insertion: bool):
            best = None
            for start, end, node, d in spans:
                inside = start <= line < end if insertion else start <= line <= end
                if inside and (best is None or end - start < best[1] - best[0]):
                    best = (start, end, node, d)
            return best

        for first, count in hunks:
            probes = [(first, True)] if count == 0 else [(ln, False) for ln in range(first, first + count)]
            for line, insertion in probes:
                hit = innermost(line, insertion)
                if hit and hit[2] not in gold:
                    start, end, node, d = hit
                    gold[node] = GoldSymbol(node, d["kind"], start, end,
                                            definition_line(lines, start, end, d.get("signature") or ""))
    return list(gold.values())


# -- scoring ---------------------------------------------------------------------


def _ancestors(node: str) -> list[str]:
    path, _, qual = node.partition("::")
    parts = qual.split(".")
    return [f"{path}::{'.'.join(parts[:i])}" for i in range(len(parts) - 1, 0, -1)]


def score_cq(case: Case, sl, latency_ms: float) -> ArmResult:
    shown, full = set(sl.symbols), set(sl.full_symbols)
    hits = [g.node for g in case.symbols if g.node in shown or any(a in full for a in _ancestors(g.node))]
    return ArmResult(
        file_recall=sum(f in sl.sources for f in case.files) / len(case.files),
        symbol_recall=len(hits) / len(case.symbols),
        tokens=sl.tokens, baseline_tokens=sl.baseline_tokens, latency_ms=latency_ms,
        sources=list(sl.sources), hits=hits, shown=list(sl.symbols), full=list(sl.full_symbols),
    )


def score_rag(case: Case, r, latency_ms: float) -> ArmResult:
    hits = []
    for g in case.symbols:
        path = g.node.partition("::")[0]
        if any(p == path and a <= g.def_line <= b for p, a, b in r.spans):
            hits.append(g.node)
    return ArmResult(
        file_recall=sum(f in r.sources for f in case.files) / len(case.files),
        symbol_recall=len(hits) / len(case.symbols),
        tokens=r.tokens, baseline_tokens=r.baseline_tokens, latency_ms=latency_ms,
        sources=list(r.sources), hits=hits, shown=[f"{p}:{a}-{b}" for p, a, b in r.spans],
    )


# -- one repository ----------------------------------------------------------------


def prepare_checkout(repo: Path, name: str, scratch: Path, fresh: bool) -> Path:
    dest = scratch / name
    if fresh and dest.exists():
        shutil.rmtree(dest)
    if not (dest / ".git").exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        # --shared borrows the objects: cheap, and the corpus repository is never written.
        subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(dest)], check=True)
    return dest


def run_repo(repo: Path, args, log) -> RepoRun:
    name = repo.name  # as given: the corpus folder may be a symlink to a mirror named otherwise
    repo = repo.resolve()
    head = git(repo, "rev-parse", "HEAD").strip()
    run = RepoRun(name, head)
    checkout = prepare_checkout(repo, name, Path(args.scratch), args.fresh)
    ws: Workspace | None = None
    max_cases, max_scan = repo_limits(name, args)
    try:
        for line in git(repo, "rev-list", "--parents", f"--max-count={max_scan}", head).splitlines():
            if len(run.results) >= max_cases:
                break
            sha, *parents = line.split()
            run.scanned += 1
            if len(parents) != 1:
                run.skip("merge" if parents else "root_commit")
                continue
            parent = parents[0]
            files, reason = source_changes(repo, parent, sha)
            if files is None:
                run.skip(reason)
                continue
            query = commit_message(repo, sha)
            if content_words(query) < args.min_query_words:
                run.skip("message_too_short")  # "Fix typo", "Tweaks": nothing to retrieve by
                continue
            try:
                git(checkout, "checkout", "--quiet", "--force", "--detach", parent)
                if ws is None:
                    ws = Workspace.open(checkout)
                ws.index()
                graph = ws.graph  # refreshed here, so the timed call below is the query alone
            except Exception as exc:  # noqa: BLE001 - any failure to index skips the case
                log(f"  {sha[:10]}: parent failed to index: {type(exc).__name__}: {exc}")
                run.skip("parent_index_failed")
                continue
            if any(f not in graph for f in files):
                run.skip("source_not_indexed")
                continue
            symbols = gold_symbols(ws, changed_old_lines(repo, parent, sha, files))
            if not symbols:
                run.skip("no_enclosing_symbol")
                continue
            if len(symbols) > args.max_gold_symbols:
                run.skip(f"more_than_{args.max_gold_symbols}_gold_symbols")
                continue
            case = Case(name, sha, parent, query, files, symbols)
            try:
                t0 = time.perf_counter()
                sl = context_query(ws, query, max_tokens=args.max_tokens)
                cq_ms = (time.perf_counter() - t0) * 1000
                chunk_index(ws.store)  # built outside the timing, as a long-lived server would hold it
                t0 = time.perf_counter()
                rag = naive_rag(ws, query, max_tokens=args.max_tokens)
                rag_ms = (time.perf_counter() - t0) * 1000
            except Exception as exc:  # noqa: BLE001 - reported, never hidden
                log(f"  {sha[:10]}: query failed: {type(exc).__name__}: {exc}")
                run.skip("query_failed")
                continue
            res = CaseResult(case, score_cq(case, sl, cq_ms), score_rag(case, rag, rag_ms))
            run.results.append(res)
            if args.verbose:
                log(f"  {sha[:10]} files={len(files)} gold={len(symbols)} "
                    f"cq sym={res.cq.symbol_recall:.2f} file={res.cq.file_recall:.2f} | "
                    f"rag sym={res.rag.symbol_recall:.2f} file={res.rag.file_recall:.2f} | {cq_ms:.0f} ms")
        if ws is not None:
            run.source_lines = source_lines(ws)
    finally:
        if ws is not None:
            ws.close()
    langs = [language_for_path(f) or "" for r in run.results for f in r.case.files]
    run.language = max(sorted(set(langs)), key=langs.count) if langs else ""
    return run


def repo_limits(name: str, args) -> tuple[int, int]:
    """(cases, commits scanned) for one repository: ``--limit NAME=CASES[/SCAN]`` over the defaults."""
    cases, scan = args.cases_per_repo, args.max_scan
    for spec in args.limit:
        key, _, value = spec.partition("=")
        if key == name:
            c, _, sc = value.partition("/")
            cases = int(c) if c else cases
            scan = int(sc) if sc else scan
    return cases, scan


def source_lines(ws: Workspace) -> int:
    return sum(lines for _p, _lang, is_test, lines, _st in ci.load_files(ws.store) if not is_test)


# -- reporting -------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def summarize(results: list[CaseResult], budget: int) -> dict:
    def arm(get) -> dict:
        rs = [get(r) for r in results]
        lat = [a.latency_ms for a in rs]
        return {
            "file_recall": mean(a.file_recall for a in rs),
            "symbol_recall": mean(a.symbol_recall for a in rs),
            "symbol_recall_micro": (sum(len(a.hits) for a in rs) / max(1, sum(len(r.case.symbols) for r in results))),
            "tokens": mean(a.tokens for a in rs),
            "baseline_tokens": mean(a.baseline_tokens for a in rs),
            "tokens_over_baseline": mean(a.tokens / a.baseline_tokens for a in rs if a.baseline_tokens),
            "p50_ms": pct(lat, 50),
            "p95_ms": pct(lat, 95),
            "under_half_budget": mean(1.0 if a.tokens < budget / 2 else 0.0 for a in rs),
        }

    cq, rag = arm(lambda r: r.cq), arm(lambda r: r.rag)
    return {
        "cases": len(results),
        "gold_files": mean(len(r.case.files) for r in results),
        "gold_symbols": mean(len(r.case.symbols) for r in results),
        "context_query": cq,
        "naive_rag": rag,
        "symbol_recall_vs_naive": cq["symbol_recall"] / rag["symbol_recall"] if rag["symbol_recall"] else float("inf"),
    }


def code_state() -> str:
    """Which MemStrata code measured: HEAD plus any uncommitted layer files."""
    here = Path(__file__).resolve().parents[1]
    try:
        head = git(here, "rev-parse", "--short", "HEAD").strip()
        dirty = [ln[3:] for ln in git(here, "status", "--porcelain", "--", "compressor", "indexer", "storage").splitlines()]
    except (subprocess.CalledProcessError, OSError):
        return "unknown"
    return head + (f" + uncommitted {', '.join(dirty)}" if dirty else "")


def print_tables(runs: list[RepoRun], overall: dict, args, out) -> None:
    def row(name: str, s: dict) -> str:
        c, r = s["context_query"], s["naive_rag"]
        return (f"{name:<10} {s['cases']:>5} {s['gold_symbols']:>5.1f} | "
                f"{c['file_recall']:>5.2f} {r['file_recall']:>5.2f} | "
                f"{c['symbol_recall']:>5.2f} {r['symbol_recall']:>5.2f} {s['symbol_recall_vs_naive']:>5.2f}x | "
                f"{c['tokens']:>6.0f} {c['baseline_tokens']:>7.0f} {c['tokens_over_baseline']:>5.2f} | "
                f"{r['tokens']:>6.0f} {r['baseline_tokens']:>7.0f} | "
                f"{c['p50_ms']:>6.1f} {c['p95_ms']:>6.1f} | {r['p50_ms']:>5.1f} | {c['under_half_budget']:>4.2f}")

    print(f"\nRetrieval quality at max_tokens={args.max_tokens} (cq = context_query, rag = naive BM25 over "
          f"40-line chunks)", file=out)
    print(f"memstrata code: {code_state()}; cases per repo <= {args.cases_per_repo}, "
          f"min query words {args.min_query_words}, max gold symbols {args.max_gold_symbols}", file=out)
    print(f"{'':<10} {'':>5} {'gold':>5} | {'file recall':^11} | {'symbol recall':^18} | "
          f"{'cq tokens / baseline':^20} | {'rag tok / base':^14} | {'cq latency ms':^13} | {'rag':>5} | {'cq':>4}", file=out)
    print(f"{'repo':<10} {'cases':>5} {'syms':>5} | {'cq':>5} {'rag':>5} | {'cq':>5} {'rag':>5} {'ratio':>6} | "
          f"{'tokens':>6} {'base':>7} {'t/b':>5} | {'tokens':>6} {'base':>7} | {'p50':>6} {'p95':>6} | {'p50':>5} | {'<1/2':>4}",
          file=out)
    print("-" * 139, file=out)
    for run in runs:
        if run.results:
            print(row(run.name, summarize(run.results, args.max_tokens)), file=out)
        else:
            print(f"{run.name:<10} {0:>5}  (no qualifying cases)", file=out)
    print("-" * 139, file=out)
    if overall["cases"]:
        print(row("overall", overall), file=out)
    print("(t/b = mean over cases of tokens / baseline_tokens; recall = mean over cases; <1/2 = share of cq slices "
          "under half the budget; symbol recall micro: "
          f"cq {overall['context_query']['symbol_recall_micro']:.2f}, "
          f"rag {overall['naive_rag']['symbol_recall_micro']:.2f})", file=out)

    for run in runs:
        if not run.results:
            continue
        c, r = (summarize(run.results, args.max_tokens)[k] for k in ("context_query", "naive_rag"))
        below = [f"{what} {c[key]:.3f} < {r[key]:.3f}" for what, key in (("file recall", "file_recall"),
                                                                          ("symbol recall", "symbol_recall"))
                 if c[key] < r[key]]
        if below:
            print(f"GUARD {run.name}: context_query below the BM25 arm on {', '.join(below)}", file=out)

    print("\nCases built / skipped (commits scanned newest first):", file=out)
    for run in runs:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(run.skipped.items(), key=lambda kv: -kv[1]))
        print(f"  {run.name:<10} {run.language or '-':<10} {run.source_lines:>8,} lines  HEAD {run.head[:10]}  "
              f"scanned {run.scanned:>4}  built {len(run.results):>3}  "
              f"skipped {sum(run.skipped.values()):>4}: {reasons}", file=out)


LARGE_LINES = 300_000


def print_targets(runs: list[RepoRun], overall: dict, latency: dict | None, args, out) -> None:
    """Issue 10's targets at the bench's budget, each next to its figure."""
    c = overall["context_query"]
    checks: list[tuple[str, float | None, float, str]] = []
    below = []
    per_repo = {run.name: summarize(run.results, args.max_tokens) for run in runs if run.results}
    for name, s in per_repo.items():
        cq, rag = s["context_query"], s["naive_rag"]
        gap = min(cq["file_recall"] - rag["file_recall"], cq["symbol_recall"] - rag["symbol_recall"])
        if gap < 0:
            below.append(f"{name} {gap:+.3f}")
    checks.append((f"no repository below BM25 on either recall ({', '.join(below) or 'none below'})",
                   float(len(below)), 0, "<="))
    for run in runs:
        if run.name in per_repo and run.language == "python" and run.source_lines >= LARGE_LINES:
            cq = per_repo[run.name]["context_query"]
            checks.append((f"{run.name} (large Python, {run.source_lines:,} lines) symbol recall >= 0.55",
                           cq["symbol_recall"], 0.55, ">="))
            checks.append((f"{run.name} (large Python) file recall >= 0.85", cq["file_recall"], 0.85, ">="))
    checks.append(("overall symbol recall >= 0.85", c["symbol_recall"], 0.85, ">="))
    checks.append(("overall file recall >= 0.95", c["file_recall"], 0.95, ">="))
    for run in runs:
        if run.name in per_repo and run.language not in ("python", ""):
            checks.append((f"{run.name} ({run.language}) file recall >= 0.90",
                           per_repo[run.name]["context_query"]["file_recall"], 0.90, ">="))
    checks.append(("tokens / baseline_tokens <= 0.45 (issue 3, mean of ratios)", c["tokens_over_baseline"], 0.45, "<="))
    if latency:
        checks.append(("p95 latency on the large index <= 100 ms", latency["p95_ms"], 100.0, "<="))
        if "commit" in latency["by_style"]:
            checks.append(("  commit-message questions p95 <= 100 ms", latency["by_style"]["commit"]["p95_ms"],
                           100.0, "<="))
        checks.append((f"one-shot memstrata query wall p50 <= {ONESHOT_GOAL_S} s (issue 13)",
                       latency["oneshot"]["p50_s"], ONESHOT_GOAL_S, "<="))
    print(f"\nTargets (issue 10, max_tokens {args.max_tokens}):", file=out)
    for name, value, goal, op in checks:
        ok = value >= goal if op == ">=" else value <= goal
        print(f"  {'PASS' if ok else 'MISS'}  {name:<72} measured {value:.3f}", file=out)
    print(f"        share of cq slices under half the budget: {c['under_half_budget']:.3f}", file=out)


def print_failures(runs: list[RepoRun], n: int, out) -> None:
    if n <= 0:
        return
    print(f"\nCases where context_query missed gold symbols (up to {n} per repo):", file=out)
    for run in runs:
        missed = [r for r in run.results if r.cq.symbol_recall < 1.0]
        for r in missed[:n]:
            c = r.case
            print(f"\n[{run.name} {c.sha[:10]}] {c.query[:300]}", file=out)
            print(f"  gold files : {c.files}", file=out)
            for g in c.symbols:
                mark_cq = "cq+" if g.node in r.cq.hits else "cq-"
                mark_rag = "rag+" if g.node in r.rag.hits else "rag-"
                print(f"  gold symbol: {g.node} ({g.kind}, lines {g.start}-{g.end})  {mark_cq} {mark_rag}", file=out)
            print(f"  cq sources : {r.cq.sources[:8]}{' ...' if len(r.cq.sources) > 8 else ''}", file=out)
            print(f"  cq full    : {r.cq.full[:6]}", file=out)
            print(f"  cq shown   : {len(r.cq.shown)} symbols, first {r.cq.shown[:8]}", file=out)
            print(f"  rag spans  : {r.rag.shown[:8]}", file=out)


# -- latency on a large index ------------------------------------------------------


def commit_questions(repo: Path, n: int, min_words: int) -> list[str]:
    """The newest ``n`` non-merge commit messages with enough content words, trailers removed."""
    repo = repo.resolve()
    out: list[str] = []
    for sha in git(repo, "rev-list", "--no-merges", f"--max-count={n * 5}", "HEAD").split():
        message = commit_message(repo, sha)
        if content_words(message) >= min_words:
            out.append(message)
            if len(out) >= n:
                break
    return out


def latency_bench(path: Path, n: int, max_tokens: int, out, commits: list[str] = ()) -> dict:
    db = path / ".memstrata" / INDEX_FILE if path.is_dir() else path
    root = db.parent.parent
    store = Store(db, readonly=True)  # someone else's index: never written
    ws = Workspace(root, store)
    try:
        t0 = time.perf_counter()
        graph = ws.graph
        load_s = time.perf_counter() - t0
        rng = random.Random(20240603)
        with_doc, funcs = [], []
        for node in sorted(graph.nodes()):
            d = graph.node(node)
            if d.get("type") != SYMBOL or graph.node(d["path"]).get("is_test"):
                continue
            if d["kind"] in ("function", "method"):
                funcs.append(node)
            first = next((ln.strip() for ln in (d.get("doc") or "").splitlines() if ln.strip()), "")
            if d["kind"] in ("function", "method", "class") and len(first.split()) >= 4:
                with_doc.append((node, first))
        n_doc = n * 7 // 10
        queries = [("docstring", q) for _, q in rng.sample(with_doc, min(n_doc, len(with_doc)))]
        for node in rng.sample(funcs, min(n - len(queries), len(funcs))):
            queries.append(("callers", f"{graph.node(node)['qualname']} and its callers"))
        queries += [("commit", m) for m in commits]
        context_query(ws, queries[0][1], max_tokens=max_tokens)  # warm: name index, token ranks
        times: dict[str, list[float]] = {"docstring": [], "callers": [], "commit": []}
        for style, q in queries:
            t0 = time.perf_counter()
            context_query(ws, q, max_tokens=max_tokens)
            times[style].append((time.perf_counter() - t0) * 1000)
        every = times["docstring"] + times["callers"] + times["commit"]
        stats = graph.stats()
        oneshot = oneshot_bench(root, [q for _, q in queries], max_tokens)
        result = {
            "index": str(db), "files": stats["files"], "symbols": stats["symbols"], "graph_load_s": load_s,
            "queries": len(every), "p50_ms": pct(every, 50), "p95_ms": pct(every, 95), "max_ms": max(every),
            "by_style": {k: {"n": len(v), "p50_ms": pct(v, 50), "p95_ms": pct(v, 95)} for k, v in times.items() if v},
            "oneshot": oneshot,
            "examples": ([q for _, q in queries[:3]] + [q for s, q in queries if s == "callers"][:2]
                         + [q[:100] for s, q in queries if s == "commit"][:2]),
        }
    finally:
        ws.close()
    print(f"\nLatency on a large index: {db}", file=out)
    print(f"  {result['files']} files, {result['symbols']} symbols; graph load {load_s:.1f} s (not timed below)", file=out)
    print(f"  context_query at max_tokens={max_tokens}, {result['queries']} queries (warm): "
          f"p50 {result['p50_ms']:.1f} ms  p95 {result['p95_ms']:.1f} ms  max {result['max_ms']:.1f} ms", file=out)
    for k, v in result["by_style"].items():
        print(f"    {k:<10} n={v['n']:<3} p50 {v['p50_ms']:.1f} ms  p95 {v['p95_ms']:.1f} ms", file=out)
    print(f"  e.g. {result['examples']}", file=out)
    o = result["oneshot"]
    print(f"  one-shot `memstrata query` wall, {o['n']} processes: p50 {o['p50_s']:.2f} s  max {o['max_s']:.2f} s "
          f"(goal p50 <= {ONESHOT_GOAL_S} s); the first one {o['first_s']:.2f} s "
          f"({'built and saved the graph snapshot' if o['first_built'] else 'the snapshot was already there'})",
          file=out)
    return result


ONESHOT_GOAL_S = 0.5
ONESHOT_RUNS = 12


def oneshot_bench(root: Path, questions: list[str], max_tokens: int) -> dict:
    """Wall time of whole `memstrata query` processes, distinct questions."""
    snapshot = root / ".memstrata" / "graph.snapshot"
    before = snapshot.stat().st_mtime_ns if snapshot.exists() else None
    exe = Path(sys.executable).with_name("memstrata")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "memstrata"]
    walls = []
    picked = questions[:: max(1, len(questions) // (ONESHOT_RUNS + 1))][: ONESHOT_RUNS + 1]
    for q in picked:
        t0 = time.perf_counter()
        subprocess.run([*cmd, "query", q, "--project", str(root), "--max-tokens", str(max_tokens)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        walls.append(time.perf_counter() - t0)
    after = snapshot.stat().st_mtime_ns if snapshot.exists() else None
    rest = walls[1:] or walls
    return {"n": len(rest), "first_s": walls[0], "first_built": after != before,
            "p50_s": statistics.median(rest), "max_s": max(rest)}


# -- main --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", nargs="*", default=[], metavar="DIR", help="git repositories with full history")
    ap.add_argument("--cases-per-repo", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--max-scan", type=int, default=4000, help="commits looked at per repository at most")
    ap.add_argument("--limit", action="append", default=[], metavar="NAME=CASES[/SCAN]",
                    help="per-repository case count and scan limit, e.g. sympy=40/1500 (repeatable)")
    ap.add_argument("--max-gold-symbols", type=int, default=10,
                    help="skip sweeping commits whose changes touch more symbols than this")
    ap.add_argument("--min-query-words", type=int, default=3,
                    help="skip commits whose message has fewer content words (0 keeps every message)")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "memstrata-quality"), help="where the per-repo checkouts live")
    ap.add_argument("--fresh", action="store_true", help="drop the scratch checkouts and their indexes first")
    ap.add_argument("--latency-index", type=Path, help="project (or index.db) of a large index to time queries on")
    ap.add_argument("--latency-queries", type=int, default=50)
    ap.add_argument("--latency-repo", type=Path,
                    help="git repository whose commit messages join the latency questions (e.g. sympy's history "
                         "for the sympy wheel)")
    ap.add_argument("--latency-commits", type=int, default=50, help="commit-message questions from --latency-repo")
    ap.add_argument("--show-failures", type=int, default=3, help="missed cases printed per repository")
    ap.add_argument("--json", type=Path, help="write every case and figure here")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case while running")
    args = ap.parse_args(argv)
    if not args.repos and not args.latency_index:
        ap.error("give --repos and/or --latency-index")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    out = sys.stdout
    runs: list[RepoRun] = []
    for repo in args.repos:
        t0 = time.perf_counter()
        log(f"{Path(repo).name}: building cases ...")
        run = run_repo(Path(repo), args, log)
        log(f"{run.name}: {len(run.results)} cases in {time.perf_counter() - t0:.0f} s")
        runs.append(run)
    all_results = [r for run in runs for r in run.results]
    overall = summarize(all_results, args.max_tokens) if all_results else None
    if overall:
        print_tables(runs, overall, args, out)
        print_failures(runs, args.show_failures, out)
    latency = None
    if args.latency_index:
        commits = commit_questions(args.latency_repo, args.latency_commits, args.min_query_words) if args.latency_repo else []
        latency = latency_bench(args.latency_index, args.latency_queries, args.max_tokens, out, commits)
    if overall:
        print_targets(runs, overall, latency, args, out)
    if args.json:
        payload = {
            "max_tokens": args.max_tokens,
            "repos": {run.name: {"head": run.head, "scanned": run.scanned, "skipped": run.skipped,
                                 "summary": summarize(run.results, args.max_tokens) if run.results else None,
                                 "cases": [asdict(r) for r in run.results]} for run in runs},
            "overall": overall,
            "latency": latency,
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
