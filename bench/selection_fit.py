"""The selection model's fit, and fast re-scoring of slices, on banked cases.

``bench/quality.py`` replays history: each case checks out a parent commit
and indexes it, which is most of a run's time.  A *case bank* keeps, for
each case of a quality run, a copy of the index as it was at that parent
(the file texts, the graph snapshot and the recent history are all in it),
so a change to seeding, ranking or selection can be scored on the same
cases in a fraction of the time, and the probability model of
``compressor/slice.py`` (``target_probability``) can be fitted on them.

    python bench/quality.py --repos CORPORA/repos/{click,...} --json /tmp/q.json
    python bench/selection_fit.py bank /tmp/q.json CORPORA/repos BANK
    python bench/selection_fit.py score BANK [--repos a,b] [--max-tokens 4096]
    python bench/selection_fit.py fit BANK --repos click,starlette,...   # development half only
    python bench/selection_fit.py misses BANK [--repos a,b]   # why gold symbols are not shown whole

``bank`` checks each case's parent out in a scratch clone under BANK (the
corpus repository is never written) and indexes it with MemStrata's own
indexer, exactly as the quality run did; plain-English cases are banked at
the repository's HEAD.  ``score`` prints file, symbol and body recall per
repository with ``bench/quality.py``'s own scorer, for ``context_query``
and the BM25 arm recorded by the quality run.  ``fit`` collects, for every
banked commit case, each candidate the selection scores (its features, as
``compressor/slice.py`` computes them) and whether it is a gold symbol, and
fits the logistic model by Newton's method with a small ridge; it prints
the weights in ``FEATURES`` order, the log-likelihood, and the
log-likelihood of each repository under the weights fitted without it.

``misses`` is the error analysis behind a ranking change: for every gold
symbol of the banked commit cases whose file the slice shows but which it
does not show whole, its class (never a candidate; past the ranked
candidates; a body larger than the budget or a quarter of it; a small body
by the chance the model gave it) and what reached it (the question's words,
recent history, the graph walk alone), counted.

Fit on the development half only: the check half's cases are for
measuring (``score``), never for fitting.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality as Q  # noqa: E402

from memstrata.compressor import context_query  # noqa: E402
from memstrata.compressor import slice as S  # noqa: E402
from memstrata.compressor.analyze import validate  # noqa: E402
from memstrata.indexer.workspace import Workspace  # noqa: E402
from memstrata.storage import code_index as ci  # noqa: E402

CASE_FILE = "case.json"


def _copy_index(ws: Workspace, dest: Path) -> None:
    """The index at this moment, its graph snapshot and its recent history."""
    ws._save_snapshot()
    src_dir = ws.root / ".memstrata"
    out = dest / ".memstrata"
    out.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(str(src_dir / "index.db"))
    dst = sqlite3.connect(str(out / "index.db"))
    try:
        src.backup(dst)  # consistent even with the WAL not yet checkpointed
    finally:
        dst.close()
        src.close()
    for name in ("graph.snapshot", "history"):
        if (src_dir / name).is_file():
            (out / name).write_bytes((src_dir / name).read_bytes())


def _case(d: dict) -> Q.Case:
    return Q.Case(d["repo"], d["sha"], d["parent"], d["query"], d["files"],
                  [Q.GoldSymbol(**g) for g in d["symbols"]], d.get("source", "commit"))


def _scoring_inputs(ws: Workspace, case: Q.Case) -> dict:
    texts = {p: (ci.file_text(ws.store, p) or "").split("\n")
             for p in dict.fromkeys(g.node.partition("::")[0] for g in case.symbols)}
    return {"texts": texts, "ancestors": {g.node: Q.enclosing(ws.graph, g) for g in case.symbols}}


def bank(results: Path, repos: Path, out: Path, only: set[str] | None) -> None:
    data = json.loads(results.read_text())
    for name, entry in {**data["repos"], **data.get("check_repos", {})}.items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        checkout = Q.prepare_checkout(repos / name, name, out / "_checkouts", False)
        repo_dir = out / name
        repo_dir.mkdir(parents=True, exist_ok=True)
        (repo_dir / "meta.json").write_text(json.dumps({"half": entry["half"], "language": entry["language"]}))
        ws: Workspace | None = None
        try:
            for i, result in enumerate(entry["cases"]):
                dest = repo_dir / f"c{i:03d}"
                if (dest / CASE_FILE).exists():
                    continue
                Q.checkout(checkout, result["case"]["parent"])
                ws = ws or Workspace.open(checkout)
                ws.index()
                case = _case(result["case"])
                _copy_index(ws, dest)
                (dest / CASE_FILE).write_text(json.dumps([{"case": result["case"], "rag": result["rag"],
                                                           **_scoring_inputs(ws, case)}]))
            english = entry.get("english", {}).get("cases", [])
            dest = repo_dir / "english"
            if english and not (dest / CASE_FILE).exists():
                Q.checkout(checkout, entry["head"])
                ws = ws or Workspace.open(checkout)
                ws.index()
                items = [{"case": r["case"], "rag": r["rag"], **_scoring_inputs(ws, _case(r["case"]))}
                         for r in english]
                _copy_index(ws, dest)
                (dest / CASE_FILE).write_text(json.dumps(items))
        finally:
            if ws is not None:
                ws.close()
        print(f"{name}: {len(entry['cases'])} cases banked in {time.perf_counter() - t0:.0f} s", flush=True)


def _banked(root: Path, names: list[str] | None, english: bool):
    """(repository, half, source, case folder, items) for every banked folder."""
    for repo_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")):
        if names and repo_dir.name not in names:
            continue
        meta = json.loads((repo_dir / "meta.json").read_text())
        for d in sorted(p for p in repo_dir.iterdir() if p.is_dir() and (p / CASE_FILE).exists()):
            source = "english" if d.name == "english" else "commit"
            if source == "english" and not english:
                continue
            items = json.loads((d / CASE_FILE).read_text())
            yield repo_dir.name, meta, source, d, items


def score(root: Path, names: list[str] | None, max_tokens: int, english: bool, out: Path | None) -> None:
    runs: dict[tuple[str, str], list] = {}
    meta_of: dict[str, dict] = {}
    rows = []
    for repo, meta, source, d, items in _banked(root, names, english):
        meta_of[repo] = meta
        with Workspace.open(d) as ws:
            for item in items:
                case = _case(item["case"])
                t0 = time.perf_counter()
                sl = context_query(ws, case.query, max_tokens=max_tokens)
                ms = (time.perf_counter() - t0) * 1000
                cq = Q.score_cq(case, sl, ms, item["texts"], item["ancestors"])
                res = Q.CaseResult(case, cq, Q.ArmResult(**item["rag"]))
                runs.setdefault((repo, source), []).append(res)
                rows.append({"repo": repo, "source": source, "sha": case.sha, "file": cq.file_recall,
                             "symbol": cq.symbol_recall, "body": cq.body_recall, "tokens": cq.tokens})
    for source in ("commit", "english"):
        halves: dict[str, list] = {}
        printed = False
        for (repo, src), results in sorted(runs.items()):
            if src != source:
                continue
            if not printed:
                print(f"{source} cases, max_tokens {max_tokens}:  file cq  rag | symbol cq  rag | body cq  rag")
                printed = True
            s = Q.summarize(results, max_tokens)
            cq, rag = s["context_query"], s["naive_rag"]
            print(f"  {repo:12s} {len(results):3d}   {cq['file_recall']:.3f} {rag['file_recall']:.3f} |"
                  f"   {cq['symbol_recall']:.3f} {rag['symbol_recall']:.3f} |"
                  f"   {cq['body_recall']:.3f} {rag['body_recall']:.3f}")
            halves.setdefault(meta_of[repo]["half"], []).extend(results)
        for half, results in halves.items():
            cq = Q.summarize(results, max_tokens)["context_query"]
            print(f"  {half} half, {len(results)} cases: file {cq['file_recall']:.3f}  symbol {cq['symbol_recall']:.3f}"
                  f"  body {cq['body_recall']:.3f}")
    if out:
        out.write_text(json.dumps(rows, indent=1))


def _features(root: Path, names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per scored candidate of every banked commit case: features, gold label, repository."""
    xs, ys, repos = [], [], []
    for repo, _meta, _source, d, items in _banked(root, names, english=False):
        with Workspace.open(d) as ws:
            for item in items:
                query, _, tests = validate(item["case"]["query"], 4096, False)
                gold = {g["node"] for g in item["case"]["symbols"]}
                with ws.lock:
                    graph = ws.graph
                    ranking = S.rank_candidates(ws, graph, query, tests)
                    if ranking is None:
                        continue
                    docs = S._Docs(ws, graph)
                    for _i, unit, features in S.scored_candidates(
                            graph, ranking.ranked, ranking.fill, ranking.evidence, ranking.named, ranking.sig_only,
                            lambda path: docs.get(path) is not None):
                        if features is None:
                            continue
                        xs.append(features)
                        ys.append(1.0 if unit.node in gold else 0.0)
                        repos.append(repo)
    return np.array(xs), np.array(ys), np.array(repos)


def fit_logistic(x: np.ndarray, y: np.ndarray, ridge: float = 1e-3, steps: int = 60) -> np.ndarray:
    """Maximum likelihood by Newton's method; the ridge keeps a feature that
    never varies in the data (no history, say) at a weight of zero."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -60, 60)))
        grad = x.T @ (p - y) + ridge * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + ridge * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def log_likelihood(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    p = np.clip(1.0 / (1.0 + np.exp(-np.clip(x @ w, -60, 60))), 1e-12, 1 - 1e-12)
    return float(np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)))


def fit(root: Path, names: list[str]) -> None:
    x, y, repos = _features(root, names)
    w = fit_logistic(x, y)
    current = np.array(S._P_WEIGHTS[: x.shape[1]] + (0.0,) * max(0, x.shape[1] - len(S._P_WEIGHTS)))
    print(f"{len(y)} candidates, {int(y.sum())} of them gold, from {len(set(repos))} repositories")
    print("weights (FEATURES order):")
    print("  (" + ", ".join(f"{v:.3f}" for v in w) + ")")
    for name, v in zip(S.FEATURES, w):
        print(f"  {name:24s} {v:8.3f}")
    print(f"log-likelihood: fitted {log_likelihood(x, y, w):.1f}, current weights {log_likelihood(x, y, current):.1f}")
    held = []
    for repo in sorted(set(repos)):
        m = repos == repo
        held.append((repo, log_likelihood(x[m], y[m], fit_logistic(x[~m], y[~m])), log_likelihood(x[m], y[m], current)))
    print("leave one repository out (fitted without it | current weights):")
    for repo, a, b in held:
        print(f"  {repo:12s} {a:9.1f} | {b:9.1f}")
    print(f"  total        {sum(a for _, a, _ in held):9.1f} | {sum(b for _, _, b in held):9.1f}")


MISS_LOW_P = 0.03  # "small body, unlikely": the model gave it less than this


def _miss_class(in_file: bool, shown: bool, whole: bool, cand: dict | None, budget: int) -> str | None:
    """Why a gold symbol of a case is not shown whole (None when it is, or when its file is not
    in the slice at all: that is a file miss, not a ranking one)."""
    if not in_file or whole:
        return None
    if cand is None:
        return "a never a candidate"
    if not cand["ranked"]:
        return "b past the ranked candidates (fill)"
    if cand["estimate"] > budget:
        return "c body larger than the budget"
    if cand["estimate"] > budget * S.LARGE_BODY_SHARE:
        return "d large body (a quarter of the budget or more)"
    if cand["p"] >= 0.1:
        return "e small body, p >= 0.1"
    if cand["p"] >= MISS_LOW_P:
        return f"f small body, p {MISS_LOW_P}-0.1"
    return f"g small body, p < {MISS_LOW_P}"


def misses(root: Path, names: list[str] | None, max_tokens: int) -> None:
    """For every gold symbol of the banked commit cases whose file the slice shows but which it
    does not show whole: why, as a count per class and by what reached it (the question's words:
    a full-text hit or a word of its own name; recent history; the graph walk alone)."""
    table: dict[tuple[str, str, str], int] = {}
    totals = {"gold": 0, "file in slice": 0, "shown": 0, "whole": 0}
    for _repo, _meta, _source, d, items in _banked(root, names, english=False):
        with Workspace.open(d) as ws:
            for item in items:
                case = _case(item["case"])
                sl = context_query(ws, case.query, max_tokens=max_tokens)
                cq = Q.score_cq(case, sl, 0.0, item["texts"], item["ancestors"])
                query, _, tests = validate(case.query, max_tokens, False)
                cands: dict[str, dict] = {}
                with ws.lock:
                    graph = ws.graph
                    ranking = S.rank_candidates(ws, graph, query, tests)
                    if ranking is not None:
                        docs = S._Docs(ws, graph)
                        docs.load(list(dict.fromkeys(graph.file_of(n) for n, _ in ranking.ranked)))
                        n_ranked = len(ranking.ranked)
                        for i, unit, features in S.scored_candidates(
                                graph, ranking.ranked, ranking.fill, ranking.evidence, ranking.named,
                                ranking.sig_only, lambda path: docs.get(path) is not None):
                            p = 0.0 if features is None else S.target_probability(features)
                            if unit.node in ranking.focus:
                                p = max(p, S.FOCUS_PROBABILITY)
                            cands[unit.node] = {
                                "ranked": i < n_ranked, "p": p,
                                "estimate": S._estimate_tokens(docs.get(unit.path), unit),
                                "words": unit.node in ranking.evidence.lexical
                                or (features is not None and features[S.FEATURES.index("name_share")] > 0)
                                or bool(S._name_terms(unit.node.rsplit("::", 1)[-1].rsplit(".", 1)[-1])
                                        & ranking.evidence.question_terms),
                                "recent": features is not None and features[S.FEATURES.index("recent")] > 0,
                            }
                for g in case.symbols:
                    in_file = g.node.partition("::")[0] in sl.sources
                    shown, whole = g.node in cq.hits, g.node in cq.body_hits
                    totals["gold"] += 1
                    totals["file in slice"] += in_file
                    totals["shown"] += shown
                    totals["whole"] += whole
                    cand = cands.get(g.node)
                    cls = _miss_class(in_file, shown, whole, cand, max_tokens)
                    if cls is None:
                        continue
                    reach = ("none" if cand is None else "words" if cand["words"]
                             else "recent" if cand["recent"] else "graph")
                    key = (cls, "signature" if shown else "absent", reach)
                    table[key] = table.get(key, 0) + 1
    print("  ".join(f"{k} {v}" for k, v in totals.items()))
    reaches = ("words", "recent", "graph", "none")
    print(f"{'gold not shown whole, its file shown':48s} {'shown as':>9s} " + " ".join(f"{r:>6s}" for r in reaches)
          + "    all")
    for cls in sorted({k[0] for k in table}):
        for how in ("signature", "absent"):
            row = [table.get((cls, how, r), 0) for r in reaches]
            if sum(row):
                print(f"{cls:48s} {how:>9s} " + " ".join(f"{n:6d}" for n in row) + f" {sum(row):6d}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bank", help="bank the cases of a bench/quality.py --json run")
    b.add_argument("results", type=Path)
    b.add_argument("repos", type=Path, help="the folder holding the corpus clones")
    b.add_argument("bank", type=Path)
    b.add_argument("--only", help="comma-separated repository names")
    s = sub.add_parser("score", help="context_query's recall on banked cases")
    s.add_argument("bank", type=Path)
    s.add_argument("--repos", help="comma-separated repository names (default: all banked)")
    s.add_argument("--max-tokens", type=int, default=4096)
    s.add_argument("--no-english", action="store_true")
    s.add_argument("--json", type=Path, help="write per-case figures here")
    f = sub.add_parser("fit", help="fit the selection's probability model (development half only)")
    f.add_argument("bank", type=Path)
    f.add_argument("--repos", required=True, help="comma-separated development repositories")
    m = sub.add_parser("misses", help="why gold symbols whose file is shown are not shown whole (a count per class)")
    m.add_argument("bank", type=Path)
    m.add_argument("--repos", help="comma-separated repository names (default: all banked)")
    m.add_argument("--max-tokens", type=int, default=4096)
    args = ap.parse_args(argv)
    if args.cmd == "bank":
        bank(args.results, args.repos, args.bank, set(args.only.split(",")) if args.only else None)
    elif args.cmd == "score":
        score(args.bank, args.repos.split(",") if args.repos else None, args.max_tokens, not args.no_english,
              args.json)
    elif args.cmd == "misses":
        misses(args.bank, args.repos.split(",") if args.repos else None, args.max_tokens)
    else:
        fit(args.bank, args.repos.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
