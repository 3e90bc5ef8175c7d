"""Does a ledger shared by several `memstrata serve` processes keep every answered request?

Four `memstrata serve --store URL --project-name NAME` processes (each with its
own user label) serve one project, indexed into the PostgreSQL database at URL;
three clients per process stream answers through it from the stand-in
provider (``tests/stub_provider.py``).  Phase 1: each process is killed
(SIGKILL) once its clients have read ``--stop-after`` answers.  Phase 2: four
processes are started again (their start closes the killed sessions as
crashed), fed the same way, and stopped with SIGTERM.  A request is
*completed* when its client read the whole response.

Prints per process: completed, ledger rows of its session, requests cut off,
requests per second; then "nothing lost: N of N" (rows found of the completed
requests expected; any shortfall is a loss) and whether the killed sessions
were all marked crashed.  Only PostgreSQL is measured (the single-file SQLite
ledger's kill check is bench/ledger_crash.py): the figures are counts against
the target "every answered request has its row", not a ratio.

Run from the repository root (it imports the test helpers), with a database the
bench may fill (it creates project NAME in it):

    python bench/team_ledger.py postgresql://user@host/db [--stop-after 40] [--name team-ledger-bench]

``main()`` returns the results, so bench/team_store.py can call it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness import team_ledger
from tests.harness.serve_helpers import cli_env, copy_project
from tests.stub_provider import ServerThread, StubUpstream


def _phase(title: str, procs) -> None:
    print(title)
    for p in procs:
        print(f"  {p.label:>8}: {p.completed:4d} completed, {p.rows:4d} rows, {p.failed:2d} cut off, "
              f"{p.rate:6.1f} requests/s")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="the PostgreSQL database (postgresql://...)")
    ap.add_argument("--name", default=f"team-ledger-bench-{int(time.time())}", help="the project name to use")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--stop-after", type=int, default=40, help="answers per process before it is stopped")
    args = ap.parse_args(argv)
    from memstrata.storage import ledger
    from memstrata.storage.postgres import PgStore, describe

    with tempfile.TemporaryDirectory(prefix="memstrata-team-ledger-") as tmp:
        project = copy_project(Path(tmp) / "proj")
        env = cli_env(Path(tmp) / "home")
        res = subprocess.run([sys.executable, "-m", "memstrata", "index", str(project), "--store", args.url,
                              "--project-name", args.name], env=env, capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stderr.strip(), file=sys.stderr)
            raise SystemExit(2)
        stub = StubUpstream(record=False, slow_delay=0.005)
        with ServerThread(stub.app) as server:
            print(f"{args.processes} serve processes on {describe(args.url)} project {args.name!r}, "
                  f"{team_ledger.STREAMS_PER_PROCESS} clients each")
            killed = team_ledger.run_round(project, env, server.url, args.url, processes=args.processes,
                                           stop_after=args.stop_after, kill=True, name=args.name)
            _phase("phase 1: each process killed (SIGKILL) mid-stream", killed)
            restarted = team_ledger.run_round(project, env, server.url, args.url, processes=args.processes,
                                              stop_after=args.stop_after, kill=False, name=args.name,
                                              tag="-again")
            _phase("phase 2: restarted, then stopped (SIGTERM)", restarted)
    with PgStore(args.url, args.name, readonly=True) as store:
        crashed = [ledger.session(store, p.session_id).crashed for p in killed]
        found = ledger.count(store)
    procs = killed + restarted
    expected = sum(p.completed for p in procs)
    in_sessions = sum(min(p.rows, p.completed) for p in procs)
    rate = sum(p.rate for p in procs) / len(procs)
    print(f"nothing lost: {in_sessions} of {expected} answered requests have their row "
          f"({found} rows in the ledger, {sum(p.failed for p in procs)} requests cut off by the stops)")
    print(f"killed sessions marked crashed by the restart: {sum(crashed)} of {len(crashed)}")
    print(f"per-process rate: {rate:.1f} requests/s (mean of {len(procs)} process runs)")
    return {"expected": expected, "found": in_sessions, "rows": found, "crashed": sum(crashed),
            "killed": len(crashed), "rate_per_process": rate}


if __name__ == "__main__":
    out = main()
    sys.exit(0 if out["found"] == out["expected"] and out["crashed"] == out["killed"] else 1)
