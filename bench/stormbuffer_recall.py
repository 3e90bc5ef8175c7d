"""Stormbuffer memory at 10,000 records: recall latency, sync cost, full reindex.

The records are paragraphs of a real project's prose: its documentation
files and the docstrings of its source, read from a bare git mirror with
``git archive`` into a scratch folder (never lorem ipsum).  Each paragraph
becomes one active, agent-readable record (title: its section heading or the
documented object's name).

Figures, each printed next to its target:

- ``memory_recall`` p50/p95 at the default budget over a real MCP stdio
  session (``stormbuffer-mcp --stdio --project``, one JSON-RPC line per call,
  the sync before every read included), and the same in-process;
- the sync of a read when nothing changed, and after one file changed;
- a full reindex of every record.

Baselines measured side by side: a sync that reads and hashes every file
(what the stat check saves), and recall by scanning every Markdown file for
the query's words (what the index saves).

Corpora: ``git clone --mirror https://github.com/sympy/sympy CORPORA/repos/sympy``
(and twisted/twisted); run::

    python bench/stormbuffer_recall.py --repo CORPORA/repos/sympy --repo CORPORA/repos/twisted
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from memstrata.stormbuffer.codec import render_record
from memstrata.stormbuffer.core import Core, View
from memstrata.storage.files import atomic_write
from memstrata.stormbuffer.projection import RACY_WINDOW_NS, Projection
from memstrata.stormbuffer.records import Record, Source, new_id, now_ns
from memstrata.stormbuffer.stores import init_store

TARGET_RECALL_P95_MS = 30.0
TARGET_SYNC_MS = 30.0
TARGET_REINDEX_S = 5.0
KINDS = ("fact", "decision", "procedure", "checkpoint")
_HEADING_RULE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_WORD = re.compile(r"[A-Za-z]{4,}")


# -- the corpus ---------------------------------------------------------------------


def _archive(repo: Path, dest: Path) -> None:
    """The tree of the mirror's HEAD, unpacked into ``dest``."""
    data = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "HEAD"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith((".rst", ".md", ".txt", ".py"))]
        tar.extractall(dest, members=members, filter="data")


def _doc_paragraphs(root: Path):
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".rst", ".md", ".txt") and p.is_file()):
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        heading = path.stem.replace("_", " ").replace("-", " ")
        para: list[str] = []
        for i, line in enumerate(lines):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if line.strip() and _HEADING_RULE.match(nxt) and not _HEADING_RULE.match(line):
                heading = line.strip().strip("#").strip() or heading
                para = []
                continue
            if _HEADING_RULE.match(line) or line.startswith("#"):
                continue
            if line.strip():
                para.append(line)
            elif para:
                yield heading, "\n".join(para), path
                para = []
        if para:
            yield heading, "\n".join(para), path


def _docstring_paragraphs(root: Path):
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if not doc:
                    continue
                title = module if isinstance(node, ast.Module) else f"{module}.{node.name}"
                for para in re.split(r"\n\s*\n", doc):
                    yield title, para, path


def paragraphs(root: Path, count: int) -> list[tuple[str, str, str]]:
    out = []
    seen = set()
    for source in (_doc_paragraphs(root), _docstring_paragraphs(root)):
        for title, text, path in source:
            words = text.split()
            if len(words) < 12 or text.lstrip().startswith(("..", ">>>")) or "\x00" in text:
                continue
            key = hashlib.blake2b(text.encode(), digest_size=8).digest()
            if key in seen:
                continue
            seen.add(key)
            title = " ".join(title.split())[:200] or "untitled"
            out.append((title, text.strip() + "\n", str(path.relative_to(root))))
            if len(out) == count:
                return out
    return out


def build_store(project: Path, paras: list[tuple[str, str, str]], scope: str) -> list[Record]:
    records = []
    base = now_ns()
    for n, (title, body, rel) in enumerate(paras):
        rec = Record(new_id(), title, KINDS[n % 4], scope, "active", "agent", base, base, body,
                     [Source("document", rel, "corpus")], tags=[rel.split("/")[0]])
        atomic = project / ".sbuf" / "records" / f"{rec.id}.md"
        atomic.write_bytes(render_record(rec))
        records.append(rec)
    return records


# -- measuring ----------------------------------------------------------------------


def ms(seconds: float) -> float:
    return seconds * 1000.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def make_queries(records: list[Record], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(query, record id it came from): a few content words of a record, or its title."""
    queries = []
    for rec in rng.sample(records, n):
        words = _WORD.findall(rec.body)
        if len(words) >= 3 and rng.random() < 0.8:
            start = rng.randrange(0, len(words) - 2)
            queries.append((" ".join(words[start:start + rng.choice((2, 3, 4))]), rec.id))
        else:
            queries.append((rec.title, rec.id))
    return queries


def mcp_recall(project: Path, env: dict, queries: list[tuple[str, str]]) -> tuple[list[float], int]:
    exe = shutil.which("stormbuffer-mcp", path=str(Path(sys.executable).parent)) or "stormbuffer-mcp"
    proc = subprocess.Popen([exe, "--stdio", "--project"], cwd=project, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout

    def call(msg: dict) -> dict:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    call({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    times, found = [], 0
    for i, (query, rid) in enumerate(queries, 1):
        t0 = time.perf_counter()
        reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                      "params": {"name": "memory_recall", "arguments": {"query": query}}})
        times.append(time.perf_counter() - t0)
        blocks = reply["result"]["structuredContent"]["result"]["blocks"]
        found += any(b["record_id"] == rid for b in blocks)
    proc.stdin.close()
    proc.wait(timeout=60)
    return times, found


def naive_recall(records_dir: Path, query: str, limit: int = 20) -> list[str]:
    """Baseline: read every Markdown file and rank by how often the query's words occur."""
    terms = [t.lower() for t in re.findall(r"\w+", query)]
    scored = []
    for path in records_dir.iterdir():
        text = path.read_text(encoding="utf-8").lower()
        score = sum(text.count(t) for t in terms)
        if score:
            scored.append((-score, path.name))
    scored.sort()
    return [name for _, name in scored[:limit]]


def hash_everything(records_dir: Path) -> None:
    for path in records_dir.iterdir():
        hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


class Timings:
    """Wall-clock and CPU seconds of repeated calls (CPU time is what a busy machine distorts least)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, fn, *args):
        w, c = time.perf_counter(), time.process_time()
        result = fn(*args)
        self.wall.append(time.perf_counter() - w)
        self.cpu.append(time.process_time() - c)
        return result

    def repeat(self, fn, times: int, check=lambda _r: True) -> "Timings":
        for _ in range(times):
            result = self.run(fn)
            assert check(result), result
        return self


def edit_and_sync(proj: Projection, records_dir: Path, records: list[Record]) -> Timings:
    """Change one record file (as an editor would), then time the sync that picks it up."""
    timings = Timings()
    for rec in records:
        edited = rec.evolve(body=rec.body + "Edited for the benchmark.\n", updated_at=now_ns())
        atomic_write(records_dir / f"{rec.id}.md", render_record(edited))
        report = timings.run(proj.sync)
        assert report.updated == 1, report
    return timings


def wait_out_racy_window(records_dir: Path) -> None:
    newest = max(p.stat().st_mtime_ns for p in records_dir.iterdir())
    delay = (newest + RACY_WINDOW_NS - time.time_ns()) / 1e9 + 0.05
    if delay > 0:
        time.sleep(delay)


def run_repo(name: str, repo: Path, work: Path, count: int, n_queries: int, seed: int) -> dict:
    base = work / name
    shutil.rmtree(base, ignore_errors=True)
    tree, project = base / "tree", base / name
    tree.mkdir(parents=True)
    project.mkdir()
    env = {**os.environ, "XDG_DATA_HOME": str(base / "data"), "XDG_CACHE_HOME": str(base / "cache"),
           "HOME": str(base)}
    os.environ.update({k: env[k] for k in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME")})
    os.chdir(project)

    _archive(repo, tree)
    paras = paragraphs(tree, count)
    view = View.resolve("project", cwd=project, watch=True)  # as the MCP adapter runs
    init_store(view.selected, shared=False)
    records = build_store(project, paras, view.selected.scope)
    records_dir = view.selected.records_dir
    words = sum(len(r.body.split()) for r in records)
    print(f"\n== {name}: {len(records)} records from docs and docstrings, {words} words, "
          f"{sum(p.stat().st_size for p in records_dir.iterdir()) / 1e6:.1f} MB of Markdown "
          f"(load average {os.getloadavg()[0]:.1f})")

    core = Core(view)
    proj = view.projection(view.selected)
    reindex = Timings()
    report = reindex.run(proj.rebuild)
    assert report.files == len(records) and report.invalid == 0, report
    reindex.repeat(proj.rebuild, 2)

    wait_out_racy_window(records_dir)
    walker = Projection(view.selected)  # no change feed: what a one-shot `sbuf invoke` does
    walker.sync()
    proj.sync()  # the files are now old enough to trust their stat
    nochange = Timings().repeat(proj.sync, 50, lambda r: not r.changed)
    nochange_walk = Timings().repeat(walker.sync, 20, lambda r: not r.changed)
    baseline_hash = Timings().repeat(lambda: hash_everything(records_dir), 5)

    rng = random.Random(seed)
    sample = rng.sample(records, 60)
    changed = edit_and_sync(proj, records_dir, sample[:40])
    changed_walk = edit_and_sync(walker, records_dir, sample[40:])
    walker.close()
    wait_out_racy_window(records_dir)
    proj.sync()

    queries = make_queries(records, n_queries, rng)
    inproc, found_inproc = Timings(), 0
    for query, rid in queries:
        envelope = inproc.run(core.invoke, "context", {"version": 1, "query": query})
        found_inproc += any(b["record_id"] == rid for b in envelope["result"]["blocks"])
    mcp_times, found_mcp = mcp_recall(project, env, queries)
    naive = Timings()
    for query, _ in queries[:10]:
        naive.run(naive_recall, records_dir, query)
    core.close()

    def row(label: str, t: Timings | list[float], q: float | None, unit: str = "ms", target: float | None = None):
        wall = t.wall if isinstance(t, Timings) else t
        cpu = t.cpu if isinstance(t, Timings) else None
        pick = (lambda v: pct(v, q)) if q is not None else statistics.median
        scale = 1000.0 if unit == "ms" else 1.0
        value = pick(wall) * scale
        cpu_text = f"cpu {pick(cpu) * scale:8.2f}" if cpu else " " * 12
        verdict = "" if target is None else f"target <= {target:g} {unit}  {'met' if value <= target else 'MISSED'}"
        print(f"  {label:<50} {value:9.2f} {unit:<2}  {cpu_text}  {verdict}")
        return value

    p95 = row("memory_recall over MCP stdio, p50", mcp_times, 0.5)
    p95 = row("memory_recall over MCP stdio, p95", mcp_times, 0.95, target=TARGET_RECALL_P95_MS)
    row("context in-process (sync + search + budget), p50", inproc, 0.5)
    row("context in-process, p95", inproc, 0.95, target=TARGET_RECALL_P95_MS)
    row("baseline: scan every Markdown file (median)", naive, None)
    row("sync, nothing changed (change feed), p50", nochange, 0.5)
    row("sync, nothing changed (change feed), p95", nochange, 0.95, target=TARGET_SYNC_MS)
    row("sync, nothing changed (stat walk), p50", nochange_walk, 0.5)
    row("sync, nothing changed (stat walk), p95", nochange_walk, 0.95, target=TARGET_SYNC_MS)
    row("baseline: read and hash every file (median)", baseline_hash, None)
    row("sync after one file changed (change feed), p95", changed, 0.95, target=TARGET_SYNC_MS)
    row("sync after one file changed (stat walk), p95", changed_walk, 0.95, target=TARGET_SYNC_MS)
    reindex_s = row(f"full reindex of {len(records)} records (median of 3)", reindex, None, "s", TARGET_REINDEX_S)
    print(f"  ratio recall (MCP p50) / scan baseline:              "
          f"{pct(mcp_times, 0.5) / statistics.median(naive.wall):9.3f}")
    print(f"  ratio no-change sync (stat walk) / read-and-hash:    "
          f"{statistics.median(nochange_walk.wall) / statistics.median(baseline_hash.wall):9.3f}")
    print(f"  queries whose source record is among the blocks:     {found_mcp}/{len(queries)} over MCP, "
          f"{found_inproc}/{len(queries)} in-process")
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} (figures are wall clock; cpu = this process)")
    return {"repo": name, "recall_p95_ms": p95, "reindex_s": reindex_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", type=Path, help="bare git mirror of a corpus (repeatable)")
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("BENCH_TMP", "/tmp")) / "stormbuffer_bench",
                    help="scratch folder (outside the repository)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    repos = args.repo or [Path("CORPORA/repos/sympy"), Path("CORPORA/repos/twisted")]
    missing = [r for r in repos if not r.exists()]
    if missing:
        print(f"corpus not found: {', '.join(map(str, missing))} (see the module docstring)", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"stormbuffer recall benchmark: {args.records} records per repository, {args.queries} queries, "
          f"python {sys.version.split()[0]}")
    results = [run_repo(r.name.removesuffix(".git"), r.resolve(), args.work.resolve(), args.records, args.queries,
                        args.seed) for r in repos]
    return 0 if results else 1


if __name__ == "__main__":
    raise SystemExit(main())
