"""What `memstrata serve` adds to a model call, for plain chat and for coding agents.

One run, one local stand-in provider (``tests/stub_provider.py``, the same
stub the tests use, served from its own process), targets side by side:

* ``direct`` -- the client talks to the stub;
* ``off``    -- through ``memstrata serve --compress off`` (forwarding, ledger, metrics);
* ``on``     -- through ``memstrata serve`` (``--compress safe``, the default).

**Forwarding** (a short chat request, OpenAI JSON and SSE, 1 and 32
clients): p50/p95 latency and time to first byte, added milliseconds,
errors.

**Agents** (Anthropic messages, streamed): each conversation is what a
coding agent sends, one request per tool call -- a system prompt, tool
definitions, the task, then Read tool_use / tool_result pairs (``cat -n``
text of real project files) -- resending the whole history every time.
Requests of 20-60k tokens are measured, for 1 client (conversations one
after the other) and for 32 distinct conversations at once, in ``--rounds``
rounds (default 3) of 32 new conversations each, the three targets taking
turns in a rotated order and each target's rounds pooled: the 32-client p95
of one pass moves with whatever else the machine did during it, and the
direct path's as much as the proxy's.  Printed next to their goals (issue 13):

* compression added to one agent request: p50(on) - p50(off), 1 client (<= 30 ms);
* 32 concurrent agents with compression on: p95 divided by the direct
  path's p95 at the same concurrency in the same run (<= 1.5x, issue 24),
  0 errors.  (Issue 13 divided by the single-client p50 instead: that
  ratio is still printed per target, but it measures the machine -- the
  direct path's own is far above the proxy's.)

Each agent row also shows the CPU milliseconds per request that the serve
process, the stub and the benchmark's own client spent over that run (Linux
``/proc``, ``getrusage``), and the load
average when it ended: wall-clock ratios move with the machine's load, the
proxy's CPU per request much less.  A request that fails is counted with
what the client saw (status and error body, or the exception and its cause),
listed under the tables.

The project defaults to a temporary copy of the sympy wheel
(``CORPORA/sympy_wheel``: ``pip download sympy==1.14.0 --no-deps`` and
unzip it); ``--project`` serves an existing project instead (its ledger gets
the benchmark's rows).  Before the serves start, the project is indexed and
its whole-file token counts made (what a serve works out in the background
once after its first start, and keeps in the index): the figures are those
of a serve that has settled, not of its first minute, whose background work
lands on every target of the run, the direct path's included.  ``--fresh``
measures that first minute instead: the first serve indexes, and both serves
count while the targets are measured.

    python bench/proxy_overhead.py --corpora CORPORA            # run from the repository root
    python bench/proxy_overhead.py --project PATH --conversations 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
LOW, HIGH = 20_000, 60_000          # agent requests measured: this many prompt tokens
SYSTEM = (
    "You are a coding agent working in the user's repository. Read files before you change them, keep "
    "changes small, run the tests after every change, and explain what you did in two sentences. Never "
    "invent APIs: when unsure, read the code. Prefer the project's own helpers over new ones. ") * 60
EPHEMERAL = {"type": "ephemeral"}
TOOL_NAMES = ("Read", "Edit", "Write", "Grep", "Glob", "Bash", "TodoWrite", "WebFetch", "Task", "NotebookEdit")


def cpu_seconds(proc: subprocess.Popen) -> float | None:
    """User + system CPU seconds the process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def own_cpu_seconds() -> float:
    """This process's user + system CPU seconds: the benchmark's own client."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 1800) -> None:
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
    port = int(proc.stdout.readline().split()[1])
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/v1/models", proc)
    return proc, url


def start_serve(project: Path, stub_url: str, mode: str, env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = [sys.executable, "-m", "memstrata", "serve", "--project", str(project), "--port", str(port),
            "--openai-upstream", stub_url + "/v1", "--anthropic-upstream", stub_url, "--no-watch", "--no-mcp",
            "--compress", mode]
    proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health", proc)
    return proc, url


# -- workloads ---------------------------------------------------------------------------------


def tools() -> list[dict]:
    out = []
    for name in TOOL_NAMES:
        props = {f"{name.lower()}_{k}": {"type": "string", "description": f"The {k} argument of {name}: "
                                         + "what it means, when to give it, and what happens otherwise. " * 3}
                 for k in ("path", "pattern", "content", "mode", "limit")}
        out.append({"name": name, "description": f"{name} tool. " + "Use it as documented; arguments below. " * 12,
                    "input_schema": {"type": "object", "properties": props, "required": [f"{name.lower()}_path"]}})
    return out


def cat_n(text: str) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))


def source_files(project: Path, limit: int) -> list[tuple[str, str]]:
    """Real files of the project of 2-8k tokens' worth of text, in a fixed order."""
    picked = []
    for path in sorted(project.rglob("*.py")):
        if ".memstrata" in path.parts or "test" in path.name:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if 8_000 <= len(text) <= 30_000:
            picked.append((str(path.relative_to(project)), text))
    picked.sort(key=lambda pt: zlib.crc32(pt[0].encode()))  # spread over the tree, same order every run
    return picked[:limit]


@dataclass
class Conversation:
    requests: list[bytes] = field(default_factory=list)   # serialized, one per tool call
    tokens: list[int] = field(default_factory=list)


def agent_conversations(project: Path, n: int) -> list[Conversation]:
    from memstrata.compressor.tokens import count_tokens

    files = source_files(project, 200)
    if len(files) < 12:
        raise SystemExit("the project needs at least 12 source files of 8-30k characters")
    system_tokens = count_tokens(SYSTEM) + count_tokens(json.dumps(tools()))
    out = []
    for c in range(n):
        conv = Conversation()
        first = files[(c * 7) % len(files)][0]
        msgs = [{"role": "user", "content": [{"type": "text", "text": f"Task {c}: in {first}, find why the "
                                              f"main entry point returns the wrong value and fix it."}]}]
        tokens = system_tokens + 30
        k = 0
        while tokens < HIGH:
            path, text = files[(c * 7 + k) % len(files)]
            tid = f"toolu_{c:02d}_{k:02d}"
            msgs.append({"role": "assistant", "content": [
                {"type": "text", "text": f"Let me read {path}."},
                {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": str(project / path)}}]})
            result = cat_n(text)
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": result}]})
            tokens += count_tokens(result) + 40
            k += 1
            if tokens >= LOW and tokens <= HIGH:
                # Marked for prompt caching the way Claude Code does: the system prompt and the newest message.
                sent = [dict(m) for m in msgs]
                sent[-1] = {"role": "user", "content": [dict(msgs[-1]["content"][0], cache_control=EPHEMERAL)]}
                body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True,
                        "system": [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}],
                        "tools": tools(), "messages": sent}
                conv.requests.append(json.dumps(body).encode())
                conv.tokens.append(tokens)
        out.append(conv)
    return out


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Result:
    latency: list[float] = field(default_factory=list)
    ttfb: list[float] = field(default_factory=list)
    errors: int = 0
    why: Counter = field(default_factory=Counter)  # what each failed request saw, in one line

    def merge(self, other: "Result") -> None:
        self.latency += other.latency
        self.ttfb += other.ttfb
        self.errors += other.errors
        self.why.update(other.why)


def failure(exc: BaseException) -> str:
    """An exception as one line: its type, its message and what caused it (httpx wraps the socket's error)."""
    parts, seen = [], exc
    while seen is not None and len(parts) < 3:
        parts.append(f"{type(seen).__name__}: {seen}".strip().rstrip(":"))
        seen = seen.__cause__ or seen.__context__
    return " <- ".join(parts)[:300]


async def one(client: httpx.AsyncClient, url: str, body: bytes, res: Result, headers: dict) -> None:
    t0 = time.perf_counter()
    first = None
    why = None
    try:
        async with client.stream("POST", url, content=body, headers=headers) as r:
            head = b""
            async for chunk in r.aiter_raw():
                if first is None and chunk:
                    first = time.perf_counter()
                if r.status_code != 200 and len(head) < 300:
                    head += chunk
                elif b"event: error" in chunk:  # an error the proxy sent after the headers
                    why = why or "in-stream error: " + chunk.decode("utf-8", "replace")[:250]
            if r.status_code != 200:
                why = f"HTTP {r.status_code}: {head.decode('utf-8', 'replace')[:250]}"
    except httpx.HTTPError as exc:
        why = failure(exc)
    end = time.perf_counter()
    if why is not None:
        res.errors += 1
        res.why[why] += 1
        return
    res.latency.append(end - t0)
    res.ttfb.append((first or end) - t0)


OPENAI_HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
ANTHROPIC_HEADERS = {"content-type": "application/json", "x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}


async def run_repeated(url: str, body: bytes, concurrency: int, total: int, warmup: int) -> Result:
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    async with httpx.AsyncClient(timeout=300, limits=limits, trust_env=False) as client:
        scratch = Result()
        for _ in range(warmup):
            await one(client, url, body, scratch, OPENAI_HEADERS)
        res = Result()

        async def worker():
            for _ in range(max(1, total // concurrency)):
                await one(client, url, body, res, OPENAI_HEADERS)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return res


async def run_agents(url: str, conversations: list[Conversation], concurrency: int) -> Result:
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    res = Result()
    async with httpx.AsyncClient(timeout=600, limits=limits, trust_env=False) as client:
        queue = list(conversations)

        async def worker():
            while queue:
                conv = queue.pop(0)
                for body in conv.requests:  # one agent: its requests in order
                    await one(client, url, body, res, ANTHROPIC_HEADERS)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return res


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return (values[lo] + (values[hi] - values[lo]) * (k - lo)) * 1000


def prepare_project(args, tmp: Path) -> Path:
    if args.project:
        return Path(args.project).resolve()
    src = Path(args.corpora) / "sympy_wheel" if args.corpora else None
    if src is None or not (src / "sympy" / "core" / "add.py").is_file():
        raise SystemExit("give --corpora CORPORA (holding sympy_wheel, see the docstring) or --project PATH")
    dst = tmp / src.name
    print(f"copying {src.name} to a temporary folder (the ledger is written there, not in the corpus)...", flush=True)
    shutil.copytree(src, dst, copy_function=shutil.copy2, ignore=shutil.ignore_patterns(".memstrata"))
    return dst


def settle(project: Path) -> None:
    """Index ``project`` and make its whole-file token counts, as a serve does once after its first
    start (the counts are kept in the index, so every later serve finds them)."""
    from memstrata.compressor.file_counts import count_missing
    from memstrata.indexer.workspace import Workspace

    print("indexing and counting the project's files (a settled serve's state; --fresh skips this)...", flush=True)
    ws = Workspace.open(project)
    try:
        ws.index()
        count_missing(ws)
    finally:
        ws.close()


def compression_seconds(url: str) -> tuple[float, int]:
    """Sum and count of the proxy's own compression-time histogram."""
    text = httpx.get(url + "/metrics", timeout=30).text
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith("memstrata_compression_duration_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("memstrata_compression_duration_seconds_count"):
            count = float(line.split()[-1])
    return total, int(count)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", default=None, help="indexed project to serve (default: a copy of the sympy wheel)")
    ap.add_argument("--corpora", default=os.environ.get("CORPORA"), help="folder holding sympy_wheel")
    ap.add_argument("--requests", type=int, default=200, help="short chat requests per forwarding scenario")
    ap.add_argument("--conversations", type=int, default=32, help="agent conversations (and concurrency)")
    ap.add_argument("--single", type=int, default=6, help="agent conversations for the single-client figure")
    ap.add_argument("--rounds", type=int, default=3,
                    help="concurrent rounds, each of --conversations new conversations, pooled (default 3)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--fresh", action="store_true",
                    help="measure serves just started on an unindexed project (their background work included)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memstrata-bench-"))
    env = dict(os.environ, MEMSTRATA_HOME=str(tmp / "home"))
    procs: list[subprocess.Popen] = []
    try:
        project = prepare_project(args, tmp)
        if not args.fresh:
            settle(project)
        print("indexing / catching up (first serve)...", flush=True)
        stub, stub_url = start_stub()
        procs.append(stub)
        off, off_url = start_serve(project, stub_url, "off", env)
        procs.append(off)
        on, on_url = start_serve(project, stub_url, "safe", env)
        procs.append(on)
        chat = {"direct": stub_url + "/v1/chat/completions", "off": off_url + "/v1/chat/completions",
                "on": on_url + "/v1/chat/completions"}
        agents = {"direct": stub_url + "/v1/messages", "off": off_url + "/anthropic/v1/messages",
                  "on": on_url + "/anthropic/v1/messages"}

        rows = []
        for mode in ("json", "stream"):
            body = json.dumps({"model": "gpt-4o", "stream": mode == "stream",
                               "messages": [{"role": "user", "content": "Say hello in one word."}]}).encode()
            for conc in (1, 32):
                base = None
                for name, url in chat.items():
                    res = asyncio.run(run_repeated(url, body, conc, max(args.requests, conc), args.warmup))
                    row = {"what": f"chat {mode}", "clients": conc, "target": name, "n": len(res.latency),
                           "errors": res.errors, "p50": pct(res.latency, .5), "p95": pct(res.latency, .95),
                           "ttfb50": pct(res.ttfb, .5), "why": res.why}
                    base = base or row
                    row["add50"] = row["p50"] - base["p50"]
                    row["addttfb"] = row["ttfb50"] - base["ttfb50"]
                    rows.append(row)
                    print(f"  chat {mode:6} c={conc:<2} {name:6} done ({row['n']} ok, {row['errors']} errors)",
                          flush=True)

        print("building agent conversations...", flush=True)
        # Distinct conversations for every pass: the proxy sees every one of them for the first time.
        convs = agent_conversations(project, args.single + args.rounds * args.conversations)
        sizes = [t for c in convs for t in c.tokens]
        agent_rows = {}
        round_ratios = []  # per concurrent round: on p95 / direct p95
        serving = {"direct": None, "off": off, "on": on}
        passes = [(1, convs[:args.single], 0)] + [
            (args.conversations, convs[args.single + r * args.conversations:args.single + (r + 1) * args.conversations],
             r) for r in range(args.rounds)]
        for conc, pool, r in passes:
            # The targets take turns, in a rotated order each round: a minute of load elsewhere on the
            # machine then lands on every target alike instead of on whichever ran during it.
            names = list(agents)
            names = names[r % len(names):] + names[:r % len(names)]
            p95 = {}
            for name in names:
                url = agents[name]
                c0 = compression_seconds(on_url) if name == "on" else (0.0, 0)
                cpu0 = [cpu_seconds(p) if p else None for p in (serving[name], stub)] + [own_cpu_seconds()]
                res = asyncio.run(run_agents(url, pool, conc))
                cpu1 = [cpu_seconds(p) if p else None for p in (serving[name], stub)] + [own_cpu_seconds()]
                c1 = compression_seconds(on_url) if name == "on" else (0.0, 0)
                row = agent_rows.setdefault((conc, name), {"res": Result(), "compress": (0.0, 0),
                                                           "cpu_s": [0.0, 0.0, 0.0], "n": 0})
                row["res"].merge(res)
                row["compress"] = (row["compress"][0] + c1[0] - c0[0], row["compress"][1] + c1[1] - c0[1])
                row["cpu_s"] = [None if a is None or b is None or t is None else t + b - a
                                for t, a, b in zip(row["cpu_s"], cpu0, cpu1)]
                row["n"] += len(res.latency) + res.errors
                row["load"] = os.getloadavg()[0]
                p95[name] = pct(res.latency, .95)
                print(f"  agents c={conc:<2} {name:6} {'round ' + str(r + 1) if conc > 1 else '':8} done "
                      f"({len(res.latency)} ok, {res.errors} errors)", flush=True)
            if conc > 1 and p95.get("direct"):
                round_ratios.append(p95["on"] / p95["direct"])
        for row in agent_rows.values():
            n = row["n"]
            row["cpu"] = [t / n * 1000 if t is not None and n else None for t in row["cpu_s"]]

        print()
        print(f"project: {project.name}; CPUs: {os.cpu_count()}; stub answer: 8 SSE chunks / one JSON body; "
              f"{'serves just started (--fresh)' if args.fresh else 'settled serves (index and file counts made)'}")
        hdr = (f"{'workload':12} {'clients':>7} {'target':6} {'n':>5} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} "
               f"{'TTFB50':>8} {'+p50 ms':>8} {'+TTFB ms':>9}")
        print(hdr)
        print("-" * len(hdr))
        for r in rows:
            extra = "" if r["target"] == "direct" else f"{r['add50']:>8.2f} {r['addttfb']:>9.2f}"
            print(f"{r['what']:12} {r['clients']:>7} {r['target']:6} {r['n']:>5} {r['errors']:>4} {r['p50']:>8.2f} "
                  f"{r['p95']:>8.2f} {r['ttfb50']:>8.2f} {extra}")
        print()
        print(f"agent requests: {sum(len(c.requests) for c in convs[:args.single])} single-client, "
              f"{sum(len(c.requests) for c in convs[args.single:])} concurrent; {min(sizes):,}-{max(sizes):,} prompt tokens "
              f"(system + tool definitions + task + {LOW // 1000}-{HIGH // 1000}k of Read results)")
        hdr = (f"{'clients':>7} {'target':6} {'n':>5} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} "
               f"{'p95 / 1-client p50':>19} {'p95 / direct p95':>17} {'compress mean ms':>17} "
               f"{'CPU ms/req serve':>17} {'stub':>5} {'client':>6} {'load':>5}")
        print(hdr)
        print("-" * len(hdr))
        for (conc, name), a in agent_rows.items():
            res = a["res"]
            total, count = a["compress"]
            mean = f"{total / count * 1000:>17.2f}" if count else f"{'':>17}"
            single = pct(agent_rows[(1, name)]["res"].latency, .5)
            ratio = f"{pct(res.latency, .95) / single:>18.1f}x" if conc > 1 and single else f"{'':>19}"
            direct95 = pct(agent_rows[(conc, "direct")]["res"].latency, .95)
            vs_direct = f"{pct(res.latency, .95) / direct95:>16.2f}x" if direct95 else f"{'':>17}"
            serve_cpu, stub_cpu, client_cpu = a["cpu"]
            cpu = (f"{serve_cpu:>17.1f}" if serve_cpu is not None else f"{'':>17}") + \
                  (f" {stub_cpu:>5.1f}" if stub_cpu is not None else f" {'':>5}") + f" {client_cpu:>6.1f}"
            print(f"{conc:>7} {name:6} {len(res.latency):>5} {res.errors:>4} {pct(res.latency, .5):>8.2f} "
                  f"{pct(res.latency, .95):>8.2f} {ratio} {vs_direct} {mean} {cpu} {a['load']:>5.2f}")
        print(f"({args.conversations}-client rows pool {args.rounds} rounds of {args.conversations} distinct "
              f"conversations, the targets taking turns; on p95 / direct p95 per round: "
              f"{', '.join(f'{x:.2f}x' for x in round_ratios)};")
        print(" direct's own ratio is what this machine allows the whole chain, client and stub included;")
        print(" CPU ms/req: CPU time of the serve process, of the stub and of this benchmark's client over the run,")
        print(" per request;")
        print(" load: the 1-minute load average when the run ended)")
        print()
        c1 = {(r["what"], r["target"]): r for r in rows if r["clients"] == 1}
        single_on = pct(agent_rows[(1, "on")]["res"].latency, .5)
        added = single_on - pct(agent_rows[(1, "off")]["res"].latency, .5)
        conc_on = agent_rows[(args.conversations, "on")]["res"]
        conc_direct = agent_rows[(args.conversations, "direct")]["res"]
        direct95 = pct(conc_direct.latency, .95)
        ratio = pct(conc_on.latency, .95) / direct95 if direct95 else float("nan")
        errors = sum(a["res"].errors for (conc, _), a in agent_rows.items() if conc > 1)
        chat_errors = sum(r["errors"] for r in rows if r["clients"] == 32)
        checks = [
            ("compression added to one agent request (p50 on - off, 1 client)", f"{added:.1f} ms", "<= 30 ms",
             added <= 30),
            (f"{args.conversations} concurrent agents, compression on: p95 / direct p95 at {args.conversations}",
             f"{ratio:.2f}x", "<= 1.5x", ratio <= 1.5),
            (f"errors with {args.conversations} concurrent agents", str(errors), "0", errors == 0),
            ("forwarding, compression off: added p50 (chat JSON, 1 client)",
             f"{c1[('chat json', 'off')]['add50']:.2f} ms", "<= 5 ms", c1[("chat json", "off")]["add50"] <= 5),
            ("streaming first-byte overhead, compression off (1 client)",
             f"{c1[('chat stream', 'off')]['addttfb']:.2f} ms", "<= 5 ms", c1[("chat stream", "off")]["addttfb"] <= 5),
            ("errors at 32 concurrent chat clients", str(chat_errors), "0", chat_errors == 0),
        ]
        failed = Counter()
        for r in rows:
            failed.update({f"chat {r['what']} c={r['clients']} {r['target']}: {k}": v for k, v in r["why"].items()})
        for (conc, name), a in agent_rows.items():
            failed.update({f"agents c={conc} {name}: {k}": v for k, v in a["res"].why.items()})
        if failed:
            print("failed requests, by what the client saw:")
            for what, n in failed.most_common():
                print(f"  {n:4}  {what}")
            print()
        print("targets:")
        for name, value, goal, ok in checks:
            print(f"  {'PASS' if ok else 'MISS'}  {name:<66} {value:>9}   goal {goal}")
        return 0
    finally:
        for p in reversed(procs):
            stop_serve(p)
        shutil.rmtree(tmp, ignore_errors=True)


def stop_serve(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()


if __name__ == "__main__":
    raise SystemExit(main())
