"""One round of the team-ledger check (issue 25), shared by the test and ``bench/team_ledger.py``.

Several ``memstrata serve --store postgresql://...`` processes on one project
record into one shared ledger, each with its own user and host label, while
clients stream answers through each from the stand-in provider.  Once a
process has answered ``stop_after`` requests it is stopped: SIGKILL (the
crash case) or SIGTERM.  A request counts as *completed* when its client read
the whole response; afterwards every completed request must have its row in
its session: rows >= completed, per process.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from memstrata.storage import ledger

from .ledger_crash import request, send
from .serve_helpers import Serve

STREAMS_PER_PROCESS = 3


@dataclass
class Process:
    label: str
    session_id: int
    completed: int = 0     # responses its clients read to the end before the stop
    failed: int = 0        # requests cut off by the stop
    seconds: float = 0.0   # from the first request to the stop
    rows: int = 0          # ledger rows of its session afterwards
    labelled: int = 0      # ... of those, rows carrying its user label

    @property
    def missing(self) -> int:
        return max(self.completed - self.rows, 0)

    @property
    def rate(self) -> float:
        return self.completed / self.seconds if self.seconds else 0.0


def _request(i: int) -> tuple[str, dict]:
    """OpenAI and Anthropic, mostly streamed, each prompt some 1.5k tokens of its own."""
    return request(i, log_lines=400)


def start(project: Path, env: dict, upstream: str, url: str, label: str, name: str) -> Serve:
    return Serve(project, env, "--store", url, "--project-name", name, "--user-label", label,
                 "--host-label", f"host-{label}", "--openai-upstream", upstream + "/v1",
                 "--anthropic-upstream", upstream, "--no-watch", "--no-mcp")


def run_round(project: Path, env: dict, upstream: str, url: str, *, processes: int = 4, stop_after: int = 20,
              kill: bool = True, name: str = "team", timeout: float = 120, tag: str = "") -> list[Process]:
    serves = [start(project, env, upstream, url, f"user{i}{tag}", name) for i in range(processes)]
    procs = [Process(label=f"user{i}{tag}", session_id=s.status()["session"]["id"]) for i, s in enumerate(serves)]
    lock = threading.Lock()
    ids = itertools.count()
    stops = [threading.Event() for _ in serves]
    began = time.monotonic()

    def client(k: int) -> None:
        serve, proc = serves[k], procs[k]
        with httpx.Client(base_url=serve.url, timeout=30,
                          headers={"x-api-key": "k", "authorization": "Bearer k"}) as c:
            while not stops[k].is_set():
                ok = send(c, *_request(next(ids)))
                with lock:
                    if ok:
                        proc.completed += 1
                    else:
                        proc.failed += 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True)
               for k in range(processes) for _ in range(STREAMS_PER_PROCESS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    pending = set(range(processes))
    while pending and time.monotonic() < deadline:
        for k in sorted(pending):
            if procs[k].completed >= stop_after:
                procs[k].seconds = time.monotonic() - began
                os.kill(serves[k].proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
                stops[k].set()
                pending.discard(k)
        time.sleep(0.01)
    for k in pending:  # timed out: stop it anyway, the round's figures say how far it got
        procs[k].seconds = time.monotonic() - began
        os.kill(serves[k].proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        stops[k].set()
    for t in threads:
        t.join(60)
    for s in serves:
        if kill:
            s.kill()
        else:
            s.stop()
        s.__exit__(None, None, None)
    # A response read to its end after the kill was still delivered whole before it: it counts.
    from memstrata.storage.postgres import PgStore

    with PgStore(url, name, readonly=True) as store:
        for p in procs:
            rows = ledger.entries(store, limit=1_000_000, session_ids=[p.session_id])
            p.rows = len(rows)
            p.labelled = sum(1 for r in rows if r.user_label == p.label and r.host_label == f"host-{p.label}")
    return procs
