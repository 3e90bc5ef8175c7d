"""Kura keyword search: index a large real document set, then time ``search_rag``
against the original Kura method (``LIKE '%kw%'`` hit counting) on the same
chunks, in the same run.

Corpus: the sympy source from its PyPI wheel plus the Markdown of the git
repositories under ``CORPORA/repos`` (``CORPORA/`` stands for wherever you keep
benchmark corpora, outside this repository; see docs/benchmarks.md for the
download commands).  The files are gathered into a staging folder of
hard links or copies (so the production path — ``sync_folder`` over one folder — indexes
them) and the database is written under a scratch folder (``--work``, default
``$KURA_BENCH_DIR`` or the temp folder's ``kura_bench``).

    python bench/kura_search.py [--corpora CORPORA] [--queries 200] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memstrata.kura.indexing import sync_folder
from memstrata.kura.chunking import walk_documents
from memstrata.kura.search import KuraSearch
from memstrata.storage import Store
from memstrata.kura import store as kura_store
from memstrata.kura.store import KuraDatabase

DEFAULT_CORPORA = os.environ.get("CORPORA", "corpora")
DEFAULT_WORK = os.environ.get("KURA_BENCH_DIR", str(Path(tempfile.gettempdir()) / "kura_bench"))
P95_TARGET_MS = 20.0
SPEEDUP_TARGET = 10.0


def stage(staging: Path, corpora: Path) -> int:
    """Link sympy's files and the repos' Markdown into one folder."""
    if staging.exists():
        shutil.rmtree(staging)
    count = 0
    sources = [(corpora / "sympy_wheel", "sympy_wheel", None)]
    sources += [(repo, f"repos/{repo.name}", (".md", ".markdown"))
                for repo in sorted((corpora / "repos").iterdir()) if repo.is_dir()]
    for root, prefix, suffixes in sources:
        for doc in walk_documents(root):
            if suffixes and not doc.path.lower().endswith(suffixes):
                continue
            link = staging / prefix / doc.path
            link.parent.mkdir(parents=True, exist_ok=True)
            # Hard links (copies across file systems), not symlinks: Kura
            # skips a symlink leading outside the folder it indexes.
            try:
                os.link(root / doc.path, link)
            except OSError:
                shutil.copyfile(root / doc.path, link)
            count += 1
    return count


def make_queries(store: Store, n: int, seed: int = 7) -> list[str]:
    """Keyword queries a user or agent might type: words and identifiers drawn
    from the indexed text (1-3 keywords), deterministic for a given seed."""
    rng = random.Random(seed)
    max_id = store.execute("SELECT max(id) FROM kura_chunks")[0][0]
    word = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
    queries: list[str] = []
    while len(queries) < n:
        cid = rng.randint(1, max_id)
        row = store.execute("SELECT content FROM kura_chunks WHERE id = ?", (cid,))
        if not row:
            continue
        words = [w for w in word.findall(row[0][0]) if not w.isupper() or len(w) > 4]
        if len(words) < 3:
            continue
        k = rng.choice((1, 1, 2, 2, 3))
        start = rng.randrange(0, len(words) - k + 1)
        queries.append(" ".join(words[start:start + k]))
    return queries


class _OneDb:
    """A KuraCatalog with one database, so timing goes through search_rag itself."""

    def __init__(self, store: Store):
        self.store = store

    def registered(self):
        return [{"db": "bench", "createAt": "1970-01-01T00:00:00Z"}]

    def loaded(self):
        return ["bench"]

    def reader(self, name):
        return self.store if name == "bench" else None

    def problem(self, name):
        return None


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def timed(fn, queries: list[str]) -> tuple[list[float], list[int]]:
    times, counts = [], []
    for q in queries:
        t0 = time.perf_counter()
        result = fn(q)
        times.append((time.perf_counter() - t0) * 1000)
        counts.append(result)
    return times, counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--keep", action="store_true", help="keep the staging folder and database")
    ap.add_argument("--corpora", type=Path, default=Path(DEFAULT_CORPORA),
                    help="folder holding sympy_wheel/ and repos/ (default $CORPORA or ./corpora)")
    ap.add_argument("--work", type=Path, default=Path(DEFAULT_WORK), help="scratch folder for staging and database")
    args = ap.parse_args()
    corpora, work = args.corpora, args.work
    if not (corpora / "sympy_wheel").is_dir() or not (corpora / "repos").is_dir():
        print(f"no sympy_wheel/ and repos/ under {corpora} (see docs/benchmarks.md)", file=sys.stderr)
        return 2

    work.mkdir(parents=True, exist_ok=True)
    staging, db_path = work / "corpus", work / "data.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    files = stage(staging, corpora)
    raw_bytes = sum((staging / d.path).stat().st_size for d in walk_documents(staging))

    writer = KuraDatabase(db_path)
    t0 = time.perf_counter()
    report = sync_folder(writer, staging)
    index_s = time.perf_counter() - t0
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stats = kura_store.stats(writer)
    db_bytes = writer.size_bytes()

    reader = KuraDatabase(db_path, readonly=True)
    search = KuraSearch(_OneDb(reader))
    queries = make_queries(reader, args.queries)

    def fts(q: str) -> int:
        result = search.search_rag("bench", q, args.limit)
        return sum(len(g["matches"]) for g in result.get("keyword", []))

    def like(q: str) -> int:
        return len(kura_store.like_search(reader, q.split(), args.limit))

    for q in queries[:5]:  # warm both paths (page cache, statement cache)
        fts(q), like(q)
    fts_ms, fts_hits = timed(fts, queries)
    like_ms, like_hits = timed(like, queries)

    p50, p95 = percentile(fts_ms, 50), percentile(fts_ms, 95)
    l50, l95 = percentile(like_ms, 50), percentile(like_ms, 95)
    mean_ratio = statistics.mean(like_ms) / statistics.mean(fts_ms)
    print("Kura keyword search benchmark")
    print(f"  corpus          sympy {corpora / 'sympy_wheel'} + Markdown of {corpora / 'repos'}/*")
    print(f"  documents       {files} files staged, {stats.sources} indexed "
          f"({len(report.skipped)} skipped), {raw_bytes / 1e6:.1f} MB of text")
    print(f"  chunks          {stats.chunks}")
    print(f"  index time      {index_s:.1f} s  ({stats.sources / index_s:.0f} files/s)")
    print(f"  database size   {db_bytes / 1e6:.1f} MB  ({db_path})")
    print(f"  queries         {len(queries)} (1-3 keywords drawn from the corpus), limit {args.limit}")
    print(f"  search_rag      p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   mean {statistics.mean(fts_ms):6.2f} ms"
          f"   queries with hits {sum(1 for h in fts_hits if h)}/{len(queries)}")
    print(f"  LIKE baseline   p50 {l50:6.2f} ms   p95 {l95:6.2f} ms   mean {statistics.mean(like_ms):6.2f} ms"
          f"   queries with hits {sum(1 for h in like_hits if h)}/{len(queries)}")
    print(f"  speed-up        p50 {l50 / p50:.1f}x   p95 {l95 / p95:.1f}x   mean {mean_ratio:.1f}x")
    ok_p95 = p95 <= P95_TARGET_MS
    ok_ratio = min(l50 / p50, l95 / p95) >= SPEEDUP_TARGET
    print(f"  targets         p95 <= {P95_TARGET_MS:.0f} ms: {'met' if ok_p95 else 'MISSED'};"
          f"  >= {SPEEDUP_TARGET:.0f}x faster than LIKE: {'met' if ok_ratio else 'MISSED'}")
    reader.close()
    writer.close()
    if not args.keep:
        shutil.rmtree(staging, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
