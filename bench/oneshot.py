"""One-shot `memstrata query` wall time: through a warm daemon, when it has to start one, in-process.

    python bench/oneshot.py [CORPUS] [--runs N] [--max-tokens N]

CORPUS defaults to CORPORA/sympy_wheel (index it first: `memstrata index
CORPORA/sympy_wheel`).  Each round asks one new question three ways, one
after the other, so the three share the machine's state:

- **warm daemon**: a daemon of this build is serving the project;
- **starts one**: no daemon runs (stopped beforehand, not timed); the call
  answers in-process and starts one in the background (then waited for,
  not timed);
- **in-process**: ``MEMSTRATA_DAEMON=off``, the path every call falls back to
  when the daemon cannot answer.

Each is the wall time of a whole `memstrata query` process, start-up to exit.
It also checks that the warm daemon's answer is byte for byte the in-process
one (stdout, stderr and exit code).  Issue 24's goals: warm p50 <= 0.3 s,
starting p50 <= 0.8 s, in-process unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_CORPUS = Path(os.environ.get("CORPORA", "corpora")) / "sympy_wheel"
GOAL_WARM_S = 0.3
GOAL_START_S = 0.8
# Questions in the styles agents ask: a name and its neighbours, a behaviour in
# plain words, a dotted path.  They only need to be distinct, so that no
# answer comes from a cache of the previous one.
QUESTIONS = [
    "Matrix.det and its callers", "how does simplify handle trigonometric functions",
    "sympify string parsing", "Poly.factor_list", "Integral.doit", "solve a system of polynomial equations",
    "latex printing of Integral", "how are rational functions integrated", "Add.flatten", "series expansion at infinity",
    "lambdify with numpy", "groebner basis computation", "Symbol assumptions positive", "limit of sin(x)/x",
    "pretty printer for matrices", "dsolve ordinary differential equations", "Rational arithmetic and gcd",
    "FiniteSet union and intersection", "nsimplify floats to rationals", "Piecewise evaluation",
    "expand_trig", "diophantine equations", "Function.fdiff", "codegen C code printer",
]


def memstrata() -> list[str]:
    exe = Path(sys.executable).with_name("memstrata")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "memstrata"]


def call(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([*memstrata(), *args], capture_output=True, env=env, timeout=600)
    return time.perf_counter() - t0, proc


def daemon_status(root: Path, env: dict[str, str]) -> dict:
    _, proc = call(["daemon", "status", str(root), "--json"], env)
    return json.loads(proc.stdout)


def wait_serving(root: Path, env: dict[str, str], timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = daemon_status(root, env)
        if st.get("same_build") and st.get("served") is not None:
            return st
        time.sleep(0.1)
    raise SystemExit("the daemon did not come up (see .memstrata/daemon.log)")


def stop_daemon(root: Path, env: dict[str, str]) -> None:
    """Stop the daemon and wait until its process is gone: the lock is let go
    before the interpreter's own teardown, which would share the processor with
    the next, timed call."""
    pid = daemon_status(root, env).get("pid")
    call(["daemon", "stop", str(root)], env)
    deadline = time.monotonic() + 30
    while pid and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--runs", type=int, default=12, help="questions, each asked the three ways (default 12)")
    ap.add_argument("--max-tokens", type=int, default=4096)
    args = ap.parse_args(argv)
    root = args.corpus.resolve()
    if not (root / ".memstrata" / "index.db").is_file():
        raise SystemExit(f"{root} is not indexed: run `memstrata index {root}` first")
    env = dict(os.environ, MEMSTRATA_DAEMON="on")
    env.pop("MEMSTRATA_DAEMON_IDLE", None)
    off = dict(env, MEMSTRATA_DAEMON="off")
    questions = (QUESTIONS * (args.runs // len(QUESTIONS) + 1))[: args.runs]

    # Untimed: the graph snapshot and token caches exist, as after any first query.
    call(["query", "warm up", str(root)], off)
    call(["daemon", "start", str(root)], env)
    wait_serving(root, env)

    warm, start, inproc = [], [], []
    same = 0
    load = os.getloadavg()[0]
    for q in questions:
        query = ["query", q, str(root), "--max-tokens", str(args.max_tokens)]
        before = wait_serving(root, env)["served"]
        t_warm, via_daemon = call(query, env)
        if daemon_status(root, env).get("served") != before + 1:
            raise SystemExit("the warm call was not answered by the daemon")
        t_off, here = call(query, off)
        same += (via_daemon.returncode, via_daemon.stdout, via_daemon.stderr) == (here.returncode, here.stdout,
                                                                                  here.stderr)
        stop_daemon(root, env)
        t_start, started = call(query, env)
        if started.stdout != here.stdout:
            raise SystemExit("the call that started a daemon answered differently")
        wait_serving(root, env)
        warm.append(t_warm)
        start.append(t_start)
        inproc.append(t_off)
    stop_daemon(root, env)

    n = len(questions)
    print(f"one-shot `memstrata query` on {root} ({n} questions, max_tokens={args.max_tokens}, "
          f"load average {load:.1f} at the start, python {sys.version.split()[0]})")
    print(f"{'':34}{'p50 s':>8}{'p95 s':>8}{'max s':>8}  ratio p50 to in-process")
    rows = [("warm daemon", warm, GOAL_WARM_S), ("has to start one", start, GOAL_START_S),
            ("in-process (MEMSTRATA_DAEMON=off)", inproc, None)]
    base = statistics.median(inproc)
    for name, values, goal in rows:
        p50 = statistics.median(values)
        verdict = ""
        if goal is not None:
            verdict = f"  goal p50 <= {goal} s  {'PASS' if p50 <= goal else 'MISS'}"
        print(f"{name:<34}{p50:8.3f}{pct(values, 0.95):8.3f}{max(values):8.3f}  {p50 / base:5.2f}{verdict}")
    print(f"answers through the daemon identical to in-process (stdout, stderr, exit code): {same}/{n}")
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
