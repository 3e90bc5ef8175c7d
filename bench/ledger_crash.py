"""Does the ledger keep every answered request when `memstrata serve` is killed?

Each round starts `memstrata serve` on a scratch copy of fixtures/python_project,
drives 20 concurrent clients (OpenAI and Anthropic, mostly streamed, each prompt
some 10k tokens of its own) through it to the stand-in provider
(``tests/stub_provider.py``), sends SIGKILL once 60 answers have completed, and
then counts the killed session's ledger rows.  A request is *completed* when its
client read the whole response.  Prints per round: completed, rows, rows whose
token counts were still pending, requests cut off by the kill, and missing
(completed without a row; the target is 0).  The next round's start closes the
killed session, as any restart does.

Run from the repository root (it imports the test helpers):

    python bench/ledger_crash.py [--rounds 10] [--kill-after 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness.ledger_crash import STREAMS, run_round  # noqa: E402
from tests.harness.serve_helpers import cli_env, copy_project  # noqa: E402
from tests.stub_provider import ServerThread, StubUpstream  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--kill-after", type=int, default=60, help="completed answers before the SIGKILL")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memstrata-ledger-crash-") as tmp:
        project = copy_project(Path(tmp) / "proj")
        env = cli_env(Path(tmp) / "home")
        stub = StubUpstream(record=False, slow_delay=0.01)
        print(f"{STREAMS} streams, SIGKILL after {args.kill_after} completed answers, {args.rounds} rounds")
        print(f"{'round':>5}  {'completed':>9}  {'rows':>5}  {'uncounted':>9}  {'cut off':>7}  {'missing':>7}")
        total = missing = 0
        with ServerThread(stub.app) as upstream:
            for i in range(1, args.rounds + 1):
                r = run_round(project, env, upstream.url, kill_after=args.kill_after)
                total += r.completed
                missing += r.missing
                print(f"{i:>5}  {r.completed:>9}  {r.rows:>5}  {r.uncounted:>9}  {r.failed:>7}  {r.missing:>7}")
        print(f"total: {total} completed requests, {missing} missing from the ledger")
    return 0 if missing == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
