"""One round of the ledger crash check (issue 15 item 5), shared by the test and
``bench/ledger_crash.py``.

20 clients stream answers through a real ``memstrata serve`` from the stand-in
provider; once enough answers have completed, the serve process gets SIGKILL.
A request counts as *completed* when its client read the whole response (the
terminating chunk included).  Afterwards every completed request must have
its row in the ledger: rows >= completed.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from memstrata.storage import Store, ledger

from .serve_helpers import Serve

STREAMS = 20


@dataclass
class Round:
    completed: int          # responses the clients read to the end before the kill
    rows: int               # ledger rows of the killed session afterwards
    uncounted: int          # of those, rows whose token counts had not been written yet
    failed: int             # requests cut off by the kill

    @property
    def missing(self) -> int:
        return max(self.completed - self.rows, 0)


def request(i: int, log_lines: int = 2500) -> tuple[str, dict]:
    """Alternate the wire formats: OpenAI/Anthropic, streamed/JSON (mostly streamed).

    Each prompt carries text of its own (``log_lines`` lines: about 10k tokens
    by default), as agent requests do, so counting them keeps the recorder's
    thread busy while answers complete.
    """
    anthropic_api = i % 2 == 1
    stream = i % 4 != 3
    model = "stub-slow" if stream else "gpt-4o"
    log = " ".join(f"line{i}x{j} value={(i * 7919 + j) % 100003}" for j in range(log_lines))
    messages = [{"role": "user", "content": f"request {i}: what does AuthService.login do?\n{log}"}]
    if anthropic_api:
        return "/anthropic/v1/messages", {"model": model, "max_tokens": 64, "stream": stream, "messages": messages}
    return "/v1/chat/completions", {"model": model, "stream": stream, "messages": messages,
                                    **({"stream_options": {"include_usage": True}} if stream else {})}


def send(client: httpx.Client, path: str, body: dict) -> bool:
    """POST ``body`` and read its whole answer: True when it completed with 200."""
    try:
        with client.stream("POST", path, content=json.dumps(body),
                           headers={"content-type": "application/json"}) as r:
            for _ in r.iter_raw():
                pass
            return r.status_code == 200
    except httpx.HTTPError:
        return False


def run_round(project: Path, env: dict, upstream: str, *, kill_after: int = 60, timeout: float = 120) -> Round:
    serve = Serve(project, env, "--openai-upstream", upstream + "/v1", "--anthropic-upstream", upstream,
                  "--no-watch", "--no-mcp")
    session_id = serve.status()["session"]["id"]
    done = threading.Event()
    counts = {"completed": 0, "failed": 0}
    lock = threading.Lock()
    ids = itertools.count()

    def client() -> None:
        with httpx.Client(base_url=serve.url, timeout=30, headers={"x-api-key": "k", "authorization": "Bearer k"}) as c:
            while not done.is_set():
                ok = send(c, *request(next(ids)))
                with lock:
                    counts["completed" if ok else "failed"] += 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(STREAMS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    while counts["completed"] < kill_after and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(serve.proc.pid, signal.SIGKILL)
    done.set()
    for t in threads:
        t.join(30)
    serve.kill()
    serve.__exit__(None, None, None)
    # A response read to its end after the kill was still delivered whole before it: it counts.
    with Store(project / ".memstrata" / "index.db") as store:
        rows = ledger.entries(store, limit=1_000_000, session_ids=[session_id])
    return Round(completed=counts["completed"], rows=len(rows),
                 uncounted=sum(1 for r in rows if not r.counted), failed=counts["failed"])
