"""A shared index on PostgreSQL against the local SQLite index (issue 25).

    python bench/team_store.py [CORPUS ...] --store postgresql://USER@HOST/DB
    python bench/team_store.py [CORPUS ...] --private-cluster

CORPUS defaults to CORPORA/sympy_wheel (the largest corpus; see
docs/benchmarks.md for how to get it); any source folder works.  ``--store``
names a server the bench may create databases on: each cold index goes into
a database of its own, created for the run and dropped after it (when the
role may not create databases, into a fresh project of the URL's database,
whose schema is dropped after).  ``--private-cluster`` starts a throw-away
server instead (``initdb`` in a temporary folder, as the tests do; needs the
PostgreSQL server binaries).

The corpus is copied to a scratch folder first.  Printed, all measured in
this one run, on the same copy, with the same worker count:

* cold index: ``memstrata index`` in a subprocess into a fresh PostgreSQL
  database and into a fresh ``.memstrata/``, the seconds of each and their
  ratio (target <= 1.5 x), and the size of each index;
* whether ``memstrata index --store`` left a graph snapshot in the store,
  and a reader's start (opening the store and loading the graph, in a fresh
  process) on each backend;
* ``context_query`` latency over N questions taken from the corpus itself
  (symbol names and docstring first lines, fixed seed): one reader process
  over SQLite, one over PostgreSQL, then 8 concurrent reader processes over
  PostgreSQL (each its own ``Workspace.open_shared``, warmed before the
  clock starts), p50/p95 of each and the 8-reader p95 against SQLite's
  one-reader p95 (target <= 2 x); 8 concurrent readers over SQLite are
  measured too, the same load on the same cores, to tell the backend's cost
  from the machine's;
* correctness: every answer from PostgreSQL compared byte for byte with
  SQLite's answer to the same question (the slice text, tokens, baseline,
  sources, symbols and notes).

A line whose target is missed says MISSED with the figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Self
from urllib.parse import quote, urlsplit

from mcp_latency import (  # a sibling script of bench/ (its folder is on sys.path)
    memstrata_command,
    pct,
)

DEFAULT_CORPUS = Path(os.environ.get("CORPORA", "corpora")) / "sympy_wheel"
INDEX_TARGET = 1.5
LATENCY_TARGET = 2.0
READERS = 8
SEED = 25


def verdict(ratio: float, target: float) -> str:
    return f"(target <= {target:g} x)" if ratio <= target else f"MISSED: {ratio:.2f} x > {target:g} x"


# -- the server -----------------------------------------------------------------


def with_database(url: str, dbname: str) -> str:
    """``url`` pointing at another database of the same server."""
    parts = urlsplit(url)
    # By hand: urlunsplit drops the "//" of a URL with no host (a Unix socket given as ?host=).
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}/{quote(dbname, safe='')}{query}"


class Server:
    """Fresh places to index into on one PostgreSQL server: a database per
    index run when the role may create them, else a project of its own in
    the URL's database.  Everything made is dropped by :meth:`cleanup`."""

    def __init__(self, url: str, keep: bool = False):
        import psycopg

        self.psycopg = psycopg
        self.url = url
        self.keep = keep
        self.made_dbs: list[str] = []
        self.made_projects: list[tuple[str, str]] = []  # (url, project name)
        with psycopg.connect(url, autocommit=True) as conn:
            self.can_create = bool(conn.execute(
                "SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0])

    def fresh(self, label: str) -> tuple[str, str]:
        """(URL, project name) of a place nothing was indexed into yet."""
        from psycopg import sql

        tag = f"{label}_{os.getpid()}_{len(self.made_dbs) + len(self.made_projects)}"
        if self.can_create:
            name = f"memstrata_bench_{tag}"
            with self.psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            self.made_dbs.append(name)
            return with_database(self.url, name), label
        project = f"{label}-bench-{tag}"
        self.made_projects.append((self.url, project))
        return self.url, project

    def database_size(self, url: str) -> int:
        with self.psycopg.connect(url, autocommit=True) as conn:
            return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def cleanup(self) -> None:
        if self.keep:
            return
        from memstrata.storage.postgres import schema_name
        from psycopg import sql

        with self.psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.made_dbs:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            for _, project in self.made_projects:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(schema_name(project))))
                with contextlib.suppress(self.psycopg.Error):
                    conn.execute("DELETE FROM public.memstrata_projects WHERE name = %s", (project,))


@contextlib.contextmanager
def private_cluster():
    """A throw-away server, started the way the tests start theirs."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    try:
        from tests.pg_cluster import ClusterError, PgCluster
    except ImportError as exc:
        raise SystemExit(f"--private-cluster needs the repository's tests/pg_cluster.py ({exc})") from None
    try:
        cluster = PgCluster().start()
    except ClusterError as exc:
        raise SystemExit(f"could not start a private PostgreSQL server: {str(exc).splitlines()[0]}") from None
    try:
        yield cluster.socket_url("postgres")
    finally:
        cluster.stop()


# -- questions ------------------------------------------------------------------


def corpus_questions(index_db: Path, n: int, seed: int = SEED) -> tuple[list[str], list[str]]:
    """``n`` questions from the corpus's own text, plus a few others to warm
    readers with: half symbol names as a developer types them
    (``Class.method``), half the first line of a docstring."""
    db = sqlite3.connect(f"file:{index_db}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT s.qualname, s.kind, s.docstring FROM symbols s JOIN files f ON f.id = s.file_id "
            "WHERE f.is_test = 0 ORDER BY s.id").fetchall()
    finally:
        db.close()
    names, docs = set(), set()
    for qualname, kind, doc in rows:
        if kind in ("function", "method", "class") and not qualname.split(".")[-1].startswith("__"):
            names.add(qualname)
        if doc:
            line = next((ln.strip() for ln in doc.splitlines() if ln.strip()), "")
            words = line.split()
            # A sentence, not a doctest prompt or a lone reference: what a question reads like.
            if 3 <= len(words) <= 20 and re.search(r"[A-Za-z]{3}", line) and not line.startswith((">>>", "..")):
                docs.add(line)
    rng = random.Random(seed)
    picked_names = rng.sample(sorted(names), min(len(names), n // 2 + 3))
    picked_docs = rng.sample(sorted(docs), min(len(docs), n - n // 2 + 3))
    warm = picked_names[:3] + picked_docs[:3]
    questions = picked_names[3:] + picked_docs[3:]
    rng.shuffle(questions)
    return questions[:n], warm


# -- readers (each in a process of its own) ------------------------------------------


def answer_text(result) -> str:
    """Everything a caller sees of a slice, as one string to compare byte for byte."""
    return json.dumps(asdict(result), sort_keys=True, ensure_ascii=False)


def reader(kind: str, url: str | None, project: str | None, root: str, questions: list[str],
           warm: list[str], max_tokens: int, barrier, out, slot: int, keep: bool) -> None:
    """Open the index as a reader, load the graph, warm up, wait for the
    others, then time ``context_query`` on each question."""
    from memstrata.compressor import context_query
    from memstrata.compressor.errors import QueryError
    from memstrata.indexer.project import StoreChoice
    from memstrata.indexer.workspace import Workspace

    try:
        t0 = time.perf_counter()
        if kind == "postgresql":
            ws = Workspace.open_shared(StoreChoice(url, project), root, readonly=True)
        else:
            ws = Workspace.open(root)
        graph = ws.graph
        start = time.perf_counter() - t0
        graph_kind = type(graph).__name__
        for q in warm:
            with contextlib.suppress(QueryError):
                context_query(ws, q, max_tokens=max_tokens)
        if barrier is not None:
            barrier.wait(600)
        lat, answers = [], []
        for q in questions:
            t = time.perf_counter()
            try:
                text = answer_text(context_query(ws, q, max_tokens=max_tokens))
            except QueryError as exc:
                text = f"QueryError: {exc}"
            lat.append((time.perf_counter() - t) * 1000)
            answers.append(text if keep else None)
        ws.close()
        out.put((slot, None, start, graph_kind, lat, answers))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent, which does not wait forever
        if barrier is not None:
            barrier.abort()
        out.put((slot, f"{type(exc).__name__}: {exc}", 0.0, "", [], []))


def run_readers(kind: str, url: str | None, project: str | None, root: Path, questions: list[str],
                warm: list[str], max_tokens: int, readers: int, keep: bool) -> list[tuple]:
    """``readers`` processes, question ``i`` going to reader ``i % readers``;
    returns each reader's (start s, graph kind, latencies ms, answers)."""
    ctx = mp.get_context("spawn")  # a clean interpreter per reader, as a real process is
    out = ctx.Queue()
    barrier = ctx.Barrier(readers) if readers > 1 else None
    procs = [ctx.Process(target=reader, args=(kind, url, project, str(root), questions[i::readers], warm,
                                              max_tokens, barrier, out, i, keep), daemon=True)
             for i in range(readers)]
    for p in procs:
        p.start()
    results: dict[int, tuple] = {}
    try:
        for _ in procs:
            slot, error, start, graph_kind, lat, answers = out.get(timeout=3600)
            if error:
                raise SystemExit(f"a {kind} reader failed: {error}")
            results[slot] = (start, graph_kind, lat, answers)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return [results[i] for i in range(readers)]


def merged_answers(results: list[tuple], n: int) -> list[str]:
    """The answers back in question order (reader i took questions i, i+R, ...)."""
    merged: list[str] = [""] * n
    for i, (_, _, _, answers) in enumerate(results):
        merged[i::len(results)] = answers
    return merged


# -- one corpus -----------------------------------------------------------------


def _cpu_of(pid: int) -> float | None:
    """User + system CPU seconds of a server backend of this machine (None
    when unreadable, or when the pid is not a PostgreSQL process here)."""
    try:
        if b"postgres" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _on_this_machine(url: str) -> bool:
    """Whether the server's pids are this machine's: a Unix socket or a loopback host."""
    import psycopg

    host = psycopg.conninfo.conninfo_to_dict(url).get("host") or ""
    return all(h.startswith("/") or h in ("", "localhost", "127.0.0.1", "::1") for h in str(host).split(","))


class ServerCpu:
    """CPU seconds the server's backends spent on one database while a
    command ran: sampled from /proc, so only for a server on this machine
    (a backend's figure is read until it exits)."""

    def __init__(self, url: str | None, dbname: str | None):
        self.url, self.dbname = url, dbname
        self.seen: dict[int, float] = {}
        self.readable = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self.url is not None and _on_this_machine(self.url):
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            mine = conn.info.backend_pid
            while True:
                pids = [r[0] for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s", (self.dbname, mine))]
                for pid in pids:
                    cpu = _cpu_of(pid)
                    if cpu is None:
                        self.readable = False
                    else:
                        self.seen[pid] = max(cpu, self.seen.get(pid, 0.0))
                if self._stop.wait(0.1):
                    return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def seconds(self) -> float | None:
        return sum(self.seen.values()) if self.readable and self.seen else None


def timed(cmd: list[str], server: tuple[str, str] | None = None) -> tuple[float, float, float | None, str]:
    """Run ``cmd``: (wall s, CPU s of it and its children, CPU s of the
    server's backends on ``server`` = (admin URL, database), last stdout line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with ServerCpu(*(server or (None, None))) as backends:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:2])} ... failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return elapsed, cpu, backends.seconds, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


def run(corpus: Path, server: Server, args) -> int:
    from memstrata.indexer.graph_snapshot import SNAPSHOT_FILE
    from memstrata.indexer.project import INDEX_FILE, StoreChoice
    from memstrata.indexer.scan import INDEX_DIR, scan_project
    from memstrata.indexer.workspace import Workspace
    from memstrata.storage.postgres import PgStore

    scratch = Path(tempfile.mkdtemp(prefix="memstrata-team-bench-", dir=args.scratch))
    root = scratch / corpus.name
    shutil.copytree(corpus, root, ignore=shutil.ignore_patterns(INDEX_DIR, ".git"))
    rc = 0
    try:
        scan = scan_project(root)
        n_bytes = sum(c.size for c in scan.files)
        n_lines = 0
        for c in scan.files:  # also brings every file into the page cache before either run
            n_lines += (root / c.path).read_bytes().count(b"\n")
        workers = args.workers or os.cpu_count() or 1
        print(f"corpus: {corpus.name}: {len(scan.files):,} files, {n_lines:,} lines, {n_bytes / 1e6:.1f} MB; "
              f"{os.cpu_count()} cores, {workers} parse workers")

        # 1. Cold index, the two backends alternating (each round: fresh places).
        memstrata = memstrata_command()
        sq_runs, pg_runs = [], []
        pg_url = pg_name = None
        for r in range(args.rounds):
            order = ("sqlite", "postgresql") if r % 2 == 0 else ("postgresql", "sqlite")
            for kind in order:
                if kind == "sqlite":
                    shutil.rmtree(root / INDEX_DIR, ignore_errors=True)
                    *figures, sq_summary = timed([*memstrata, "index", "--workers", str(workers), str(root)])
                    sq_runs.append(figures)
                else:
                    pg_url, pg_name = server.fresh(f"r{r}")
                    *figures, pg_summary = timed(
                        [*memstrata, "index", "--workers", str(workers), "--store", pg_url,
                         "--project-name", pg_name, str(root)],
                        (server.url, urlsplit(pg_url).path.lstrip("/")) if server.can_create else None)
                    pg_runs.append(figures)
        sq, pg = statistics.median(f[0] for f in sq_runs), statistics.median(f[0] for f in pg_runs)
        sq_cpu, pg_cpu = statistics.median(f[1] for f in sq_runs), statistics.median(f[1] for f in pg_runs)
        backend = [f[2] for f in pg_runs if f[2] is not None]
        pg_server = statistics.median(backend) if backend else None
        each = f" (median of {args.rounds}: SQLite {', '.join(f'{f[0]:.2f}' for f in sq_runs)}; " \
               f"PostgreSQL {', '.join(f'{f[0]:.2f}' for f in pg_runs)})" if args.rounds > 1 else ""
        print(f"cold index, SQLite:      {sq:7.2f} s   {sq_summary}")
        print(f"cold index, PostgreSQL:  {pg:7.2f} s   {pg_summary}")
        print(f"  PostgreSQL / SQLite:   {pg / sq:7.2f} x  {verdict(pg / sq, INDEX_TARGET)}{each}")
        server_cpu = f" + {pg_server:.1f} s in the server's backend = {(pg_cpu + pg_server) / sq_cpu:.2f} x" \
            if pg_server is not None else " (the server's own CPU is not visible from here)"
        print(f"  CPU: SQLite {sq_cpu:.1f} s (index process and its workers); PostgreSQL {pg_cpu:.1f} s "
              f"= {pg_cpu / sq_cpu:.2f} x{server_cpu}")

        index_db = root / INDEX_DIR / INDEX_FILE
        sq_size = index_db.stat().st_size + sum(
            p.stat().st_size for p in (root / INDEX_DIR).glob(INDEX_FILE + "-wal"))
        with PgStore(pg_url, pg_name, readonly=True, create=False) as store:
            pg_schema = store.size_bytes()
            snapshot_rows = store.execute("SELECT count(*) FROM derived")[0][0]
        whole = f", whole database {server.database_size(pg_url) / 1e6:.1f} MB" if server.can_create else ""
        print(f"index size: SQLite {INDEX_FILE} {sq_size / 1e6:.1f} MB; PostgreSQL project schema "
              f"(tables, indexes, TOAST) {pg_schema / 1e6:.1f} MB = {pg_schema / sq_size:.2f} x{whole}")

        questions, warm = corpus_questions(index_db, args.questions)
        n = len(questions)

        # 2. A reader's start right after the index runs: neither run saved
        # a graph snapshot unless the store shows one.
        sq_snapshot_before = (root / INDEX_DIR / SNAPSHOT_FILE).exists()
        first_sq = run_readers("sqlite", None, None, root, [], [], args.max_tokens, 1, False)[0]
        first_pg = run_readers("postgresql", pg_url, pg_name, root, [], [], args.max_tokens, 1, False)[0]
        print(f"first reader after the index run (open + graph): SQLite {first_sq[0]:.3f} s ({first_sq[1]}, "
              f"{'from the snapshot' if sq_snapshot_before else 'no snapshot: built, then saved'}), "
              f"PostgreSQL {first_pg[0]:.3f} s ({first_pg[1]})")
        if snapshot_rows and not sq_snapshot_before:
            # The PostgreSQL run also built the graph and stored its snapshot
            # (its readers cannot); SQLite leaves both to its first reader.
            both = sq + first_sq[0]
            print(f"  like for like, index run until a reader can start from a snapshot: SQLite {sq:.2f} + "
                  f"{first_sq[0]:.2f} s (its first reader builds and saves the graph) = {both:.2f} s; "
                  f"PostgreSQL {pg:.2f} s = {pg / both:.2f} x")
        if not snapshot_rows:
            # What `memstrata watch --store` does on the checkout: a writer's
            # graph load saves the snapshot readers then start from.
            t0 = time.perf_counter()
            with Workspace.open(root, store=StoreChoice(pg_url, pg_name)) as ws:
                ws.graph  # noqa: B018 - the property builds the graph and stores its snapshot
            print(f"  MISSED: memstrata index --store stored no graph snapshot, so every reader builds the "
                  f"graph from rows; the bench stored one from the checkout ({time.perf_counter() - t0:.1f} s, "
                  f"as memstrata watch --store does) for the figures below")

        # 3. Latency and answers.
        print(f"context_query, {n} questions from the corpus (seed {SEED}), max_tokens {args.max_tokens}; "
              f"reader start = open + first graph load in a fresh process:")
        sq1 = run_readers("sqlite", None, None, root, questions, warm, args.max_tokens, 1, True)
        pg1 = run_readers("postgresql", pg_url, pg_name, root, questions, warm, args.max_tokens, 1, True)
        pg8 = run_readers("postgresql", pg_url, pg_name, root, questions, warm, args.max_tokens, READERS, True)
        sq8 = None if args.skip_sqlite_concurrent else run_readers(
            "sqlite", None, None, root, questions, warm, args.max_tokens, READERS, False)

        def line(label: str, results: list[tuple], base: float | None, target: float | None = None) -> str:
            lat = [ms for r in results for ms in r[2]]
            starts = [r[0] for r in results]
            p95 = pct(lat, 0.95)
            start = f"start {max(starts):.3f} s" if len(starts) == 1 else \
                f"start {statistics.median(starts):.3f} s median, {max(starts):.3f} s max"
            kinds = "/".join(sorted({r[1] for r in results}))
            text = f"  {label:<24} p50 {statistics.median(lat):6.1f} ms  p95 {p95:6.1f} ms  {start} ({kinds})"
            if base is not None:
                ratio = p95 / base
                text += f"   p95 = {ratio:.2f} x SQLite 1-reader p95"
                if target is not None:
                    text += f"  {verdict(ratio, target)}"
            return text

        base = pct(sq1[0][2], 0.95)
        print(line("SQLite, 1 reader:", sq1, None))
        print(line("PostgreSQL, 1 reader:", pg1, base))
        print(line(f"PostgreSQL, {READERS} readers:", pg8, base, LATENCY_TARGET))
        if sq8 is not None:
            print(line(f"SQLite, {READERS} readers:", sq8, base) + "  (the same load on SQLite: reference)")
            same_load = pct([ms for r in pg8 for ms in r[2]], 0.95) / pct([ms for r in sq8 for ms in r[2]], 0.95)
            print(f"  PostgreSQL {READERS}-reader p95 / SQLite {READERS}-reader p95: {same_load:.2f} x "
                  f"(the backend's share; {os.cpu_count()} cores for {READERS} CPU-bound readers is the rest)")

        truth = sq1[0][3]
        compared = [("1 reader", pg1[0][3]), (f"{READERS} readers", merged_answers(pg8, n))]
        for label, answers in compared:
            diff = [i for i in range(n) if answers[i] != truth[i]]
            equal = n - len(diff)
            mark = "" if not diff else f"  MISSED: first differing question: {questions[diff[0]]!r}"
            print(f"answers equal byte for byte, PostgreSQL ({label}) vs SQLite: {equal} of {n}{mark}")
            if diff:
                rc = 1
        errors = sum(a.startswith("QueryError") for a in truth)
        if errors:
            print(f"  ({errors} of the questions are refused by context_query on both backends alike)")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"kept: {root}")
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="*", help=f"source folders, each reported on its own (default {DEFAULT_CORPUS})")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", metavar="URL", help="a postgresql://... URL of a server to create databases on")
    where.add_argument("--private-cluster", action="store_true",
                       help="start a throw-away PostgreSQL server for the run (needs initdb and postgres)")
    ap.add_argument("--questions", type=int, default=400, help="context_query questions per pass (default 400)")
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=0, help="parse workers of both index runs (default: CPU count)")
    ap.add_argument("--rounds", type=int, default=1, help="cold index runs per backend, alternating (median)")
    ap.add_argument("--skip-sqlite-concurrent", action="store_true",
                    help=f"skip the {READERS}-reader SQLite reference pass")
    ap.add_argument("--scratch", default=None, help="folder for the corpus copy (default: the system's temp)")
    ap.add_argument("--keep", action="store_true", help="keep the corpus copy and the databases")
    args = ap.parse_args()
    corpora = [Path(c) for c in args.corpus] or [DEFAULT_CORPUS]
    for corpus in corpora:
        if not corpus.is_dir():
            print(f"corpus not found: {corpus} (see docs/benchmarks.md for the download commands)", file=sys.stderr)
            return 2
    try:
        import psycopg  # noqa: F401
    except ImportError:
        print("this bench needs psycopg: pip install 'memstrata[postgres]'", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        url = args.store or stack.enter_context(private_cluster())
        try:
            server = Server(url, keep=args.keep)
        except Exception as exc:  # noqa: BLE001 - psycopg's message, with the URL's secrets out of it
            from memstrata.storage.postgres import _scrub, describe

            print(f"cannot use {describe(url)}: {_scrub(str(exc), url)}", file=sys.stderr)
            return 2
        stack.callback(server.cleanup)
        rc = 0
        for i, corpus in enumerate(corpora):
            if i:
                print()
            rc = max(rc, run(corpus, server, args))
    return rc


if __name__ == "__main__":
    sys.exit(main())
