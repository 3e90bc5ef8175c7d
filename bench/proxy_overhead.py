"""What `memstrata serve` adds to a model call: latency and time to first byte.

One run, one local stand-in provider (``tests/stub_provider.py``, the same
stub the tests use, served from its own process), three targets side by side:

* ``direct``  — the client talks to the stub;
* ``off``     — through ``memstrata serve --no-compress`` (forwarding, ledger, metrics);
* ``on``      — through ``memstrata serve`` with compression on.

For OpenAI-format JSON and SSE streaming, with 1 and 32 concurrent clients,
it prints p50/p95 total latency and time to first byte, the added
milliseconds and the ratio to direct, and error counts.

The indexed project defaults to a temporary copy of the sympy wheel corpus
(CORPORA/sympy_wheel, with its index if it has one; see docs/benchmarks.md for
the download command) or, without it, of
fixtures/python_project.  The request pastes one project file and asks about
a function in it, so compression has something real to replace.

    python bench/proxy_overhead.py [--project PATH] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SYMPY = Path("/work/corpora/sympy_wheel")
FIXTURE = ROOT / "fixtures" / "python_project"
CASES = {  # project marker file -> (file to paste, question)
    "sympy/core/add.py": ("sympy/core/add.py",
                          "How does Add.flatten collect numeric coefficients of like terms? Answer briefly."),
    "app/auth/service.py": ("app/auth/service.py", "How does AuthService.login check the password?"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process exited early: {proc.args}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def start_stub() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.stub_provider", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    port = int(line.split()[1])
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/v1/models", proc)
    return proc, url


def start_serve(project: Path, stub_url: str, compress: bool, env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = [sys.executable, "-m", "memstrata", "serve", "--project", str(project), "--port", str(port),
            "--openai-upstream", stub_url + "/v1", "--no-watch", "--no-mcp"]
    if not compress:
        args.append("--no-compress")
    proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health", proc)
    return proc, url


@dataclass
class Result:
    latency: list[float] = field(default_factory=list)
    ttfb: list[float] = field(default_factory=list)
    errors: int = 0


async def one(client: httpx.AsyncClient, url: str, body: bytes, res: Result) -> None:
    t0 = time.perf_counter()
    first = None
    try:
        async with client.stream("POST", url, content=body, headers={
                "content-type": "application/json", "authorization": "Bearer sk-bench"}) as r:
            async for chunk in r.aiter_raw():
                if first is None and chunk:
                    first = time.perf_counter()
            ok = r.status_code == 200
    except httpx.HTTPError:
        ok = False
    end = time.perf_counter()
    if not ok:
        res.errors += 1
        return
    res.latency.append(end - t0)
    res.ttfb.append((first or end) - t0)


async def run(url: str, body: bytes, concurrency: int, total: int, warmup: int) -> Result:
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:
        scratch = Result()
        await asyncio.gather(*(one(client, url, body, scratch) for _ in range(min(warmup, concurrency) or 1)))
        for _ in range(warmup):
            await one(client, url, body, scratch)
        res = Result()
        per_worker = max(1, total // concurrency)

        async def worker():
            for _ in range(per_worker):
                await one(client, url, body, res)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return res


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return (values[lo] + (values[hi] - values[lo]) * (k - lo)) * 1000


def prepare_project(arg: str | None, tmp: Path) -> Path:
    if arg:
        return Path(arg).resolve()
    src = SYMPY if (SYMPY / "sympy" / "core" / "add.py").is_file() else FIXTURE
    dst = tmp / src.name
    print(f"copying {src} to a temporary folder (the ledger is written there, not in the corpus)...", flush=True)
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    return dst


def request_body(project: Path, stream: bool) -> bytes:
    for marker, (path, question) in CASES.items():
        if (project / marker).is_file():
            code = (project / path).read_text(encoding="utf-8")
            content = f"Here is {path}:\n```python\n{code}\n```\n{question}"
            break
    else:
        raise SystemExit("pass --project with a sympy or fixtures/python_project copy")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}], "stream": stream}
    return json.dumps(body).encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", default=None, help="indexed project to serve (default: a temp copy, see above)")
    ap.add_argument("--requests", type=int, default=200, help="measured requests per scenario without compression")
    ap.add_argument("--requests-on", type=int, default=64, help="measured requests per scenario with compression")
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memstrata-bench-"))
    env = dict(os.environ, MEMSTRATA_HOME=str(tmp / "home"))
    procs: list[subprocess.Popen] = []
    try:
        project = prepare_project(args.project, tmp)
        print("indexing / catching up (first serve)...", flush=True)
        stub, stub_url = start_stub()
        procs.append(stub)
        off, off_url = start_serve(project, stub_url, False, env)
        procs.append(off)
        on, on_url = start_serve(project, stub_url, True, env)
        procs.append(on)
        targets = {"direct": stub_url + "/v1/chat/completions", "off": off_url + "/v1/chat/completions",
                   "on": on_url + "/v1/chat/completions"}

        # what compression does to this request, once
        probe = httpx.post(targets["on"], content=request_body(project, False),
                           headers={"content-type": "application/json"}, timeout=120)
        probe.raise_for_status()

        rows = []
        for mode in ("json", "stream"):
            body = request_body(project, mode == "stream")
            for conc in (1, 32):
                base = None
                for name, url in targets.items():
                    total = args.requests_on if name == "on" else args.requests
                    res = asyncio.run(run(url, body, conc, max(total, conc), args.warmup))
                    row = {"mode": mode, "clients": conc, "target": name, "n": len(res.latency),
                           "errors": res.errors, "p50": pct(res.latency, .5), "p95": pct(res.latency, .95),
                           "ttfb50": pct(res.ttfb, .5), "ttfb95": pct(res.ttfb, .95)}
                    if name == "direct":
                        base = row
                    row["add50"] = row["p50"] - base["p50"]
                    row["addttfb"] = row["ttfb50"] - base["ttfb50"]
                    row["ratio"] = row["p50"] / base["p50"] if base["p50"] else float("nan")
                    rows.append(row)
                    print(f"  {mode:6} c={conc:<2} {name:6} done ({row['n']} ok, {row['errors']} errors)", flush=True)

        with httpx.Client(trust_env=False) as c:
            status = c.get(on_url + "/status").json()["session"]
        print()
        print(f"project: {project.name} ({status['requests']} requests through the compressing proxy; "
              f"{status['compressed_requests']} compressed; prompt tokens {status['tokens_original']} -> "
              f"{status['tokens_forwarded']})")
        print(f"request: one pasted file + a question, {len(request_body(project, False))} bytes; "
              f"stub answer: 8 SSE chunks / one JSON body; CPUs: {os.cpu_count()}")
        print()
        hdr = (f"{'mode':6} {'clients':>7} {'target':6} {'n':>5} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} "
               f"{'TTFB50':>8} {'TTFB95':>8} {'+p50 ms':>8} {'+TTFB ms':>9} {'x direct':>8}")
        print(hdr)
        print("-" * len(hdr))
        for r in rows:
            extra = ("" if r["target"] == "direct" else
                     f"{r['add50']:>8.2f} {r['addttfb']:>9.2f} {r['ratio']:>8.2f}")
            if r["target"] == "direct":
                extra = f"{'':>8} {'':>9} {'1.00':>8}"
            print(f"{r['mode']:6} {r['clients']:>7} {r['target']:6} {r['n']:>5} {r['errors']:>4} {r['p50']:>8.2f} "
                  f"{r['p95']:>8.2f} {r['ttfb50']:>8.2f} {r['ttfb95']:>8.2f} {extra}")
        print()
        c1 = {(r["mode"], r["target"]): r for r in rows if r["clients"] == 1}
        print("targets: compression off adds <= 5 ms p50; streaming first-byte overhead <= 5 ms; no errors at 32")
        print(f"  added p50, compression off, JSON, 1 client:   {c1[('json', 'off')]['add50']:.2f} ms")
        print(f"  added TTFB p50, compression off, stream, 1 client: {c1[('stream', 'off')]['addttfb']:.2f} ms")
        print(f"  errors at 32 concurrent streams: "
              f"{sum(r['errors'] for r in rows if r['clients'] == 32 and r['mode'] == 'stream')}")
        return 0
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
