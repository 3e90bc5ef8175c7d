"""context_query round trip over MCP stdio vs. the same call in-process.

    python bench/mcp_latency.py [CORPUS] [--rounds N] [--max-tokens N] [--commits REPO [--commit-questions N]]

CORPUS defaults to CORPORA/sympy_wheel (sympy 1.14.0 unpacked from its
PyPI wheel; see docs/benchmarks.md).  Its index lives in CORPUS/.memstrata/
and is built on first use.  ``--commits REPO`` adds real commit messages of
a git repository (e.g. sympy's own history) to the questions: the
issue 13 figure is their p95 over MCP stdio, goal <= 100 ms.  The script starts
`memstrata mcp --project CORPUS` as a subprocess, talks to it with the SDK's
own stdio client, and calls context_query with the same queries, rounds
interleaved, as it calls compressor.context_query on a Workspace of its own,
so both sides run on the same machine at the same time.  It prints p50/p95 of
each and their ratio; the difference is what the protocol costs (JSON-RPC
framing, the pipe, the server's worker thread, the client's validation of the
result against the tool's outputSchema).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from memstrata.compressor import context_query
from memstrata.indexer.workspace import Workspace

DEFAULT_CORPUS = Path(os.environ.get("CORPORA", "corpora")) / "sympy_wheel"
GOAL_P95_MS = 100.0
DISTINCT_GOAL_P95_MS = 60.0  # issue 24: distinct questions on a 750k-line index
QUERIES = [
    "Matrix.det and its callers",
    "simplify",
    "how does solve handle polynomial equations",
    "Integral.doit",
    "sympify string parsing",
    "Poly.factor_list",
]


def memstrata_command() -> list[str]:
    script = Path(sys.executable).with_name("memstrata")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memstrata"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def commit_questions(repo: Path, n: int) -> list[str]:
    """The newest ``n`` non-merge commit messages with at least three content
    words, cleaned as the quality bench cleans them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import quality

    return quality.commit_questions(repo, n, 3)


def distinct_questions(ws: Workspace, n: int) -> list[str]:
    """``n`` questions drawn from the index itself, as quality.py's latency bench draws them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import quality

    return [q for _, q in quality.index_questions(ws.graph, n)]


@contextlib.asynccontextmanager
async def mcp_session(corpus: Path):
    """`memstrata mcp --project CORPUS` over stdio, initialized and its index ready."""
    cmd = memstrata_command()
    # The whole environment, PYTHONPATH included: the SDK passes only a few variables by default,
    # and the server would then run whatever code is installed, not the code under test.
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--project", str(corpus)],
                                   env=dict(os.environ))
    with open(corpus / ".memstrata" / "bench-mcp.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            t0 = time.perf_counter()
            init = await s.initialize()
            print(f"stdio server {init.server_info.name} {init.server_info.version}, protocol "
                  f"{init.protocol_version}, initialize answered in {(time.perf_counter() - t0) * 1000:.0f} ms")
            while (await s.call_tool("index_status", {})).structured_content["status"] != "ready":
                await anyio.sleep(0.2)
            print(f"stdio server index ready after {time.perf_counter() - t0:.1f}s")
            yield s


class PlainStdio:
    """`memstrata mcp` spoken to with bare JSON-RPC lines: the round trip without the SDK client's
    own work (its tasks and streams, pydantic models, the outputSchema check), so that the
    server's share of the MCP figure can be told apart."""

    def __init__(self, corpus: Path):
        cmd = memstrata_command()
        self.errlog = open(corpus / ".memstrata" / "bench-mcp-plain.stderr", "w")
        self.proc = subprocess.Popen([*cmd, "mcp", "--project", str(corpus)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.errlog)
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "mcp_latency", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        while self.tool("index_status", {})["status"] != "ready":
            time.sleep(0.2)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.next_id:
                return answer

    def tool(self, name: str, arguments: dict) -> dict:
        result = self.call("tools/call", {"name": name, "arguments": arguments})["result"]
        assert not result.get("isError"), result["content"][0]["text"]
        return result["structuredContent"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.errlog.close()


async def run_distinct(corpus: Path, n: int, max_tokens: int, plain: bool = False) -> None:
    """Each question asked once: what an agent's session looks like, every
    question new to the server (only the first, a warm-up, is not timed).

    Each server is measured while it is the only one running, as a user's
    server is: a fresh server builds its full graph in the background, and
    two of them doing it on a two-core machine slow each other's questions
    (and the in-process ones) down.  The in-process side asks every question
    right after the server has answered it, in the same process as the SDK
    client."""
    t0 = time.perf_counter()
    ws = Workspace.open(corpus)
    summary = ws.index()
    questions = distinct_questions(ws, n + 1)
    print(f"in-process workspace: {summary.files:,} files, catch-up {summary.parsed} parsed, "
          f"ready in {time.perf_counter() - t0:.1f}s")
    warm = {"query": questions[0], "max_tokens": max_tokens}
    context_query(ws, questions[0], max_tokens=max_tokens)
    stdio: list[float] = []
    inproc: list[float] = []
    answers: list[dict] = []
    async with mcp_session(corpus) as s:
        await s.call_tool("context_query", warm)
        for q in questions[1:]:
            a = {"query": q, "max_tokens": max_tokens}
            t = time.perf_counter()
            r = await s.call_tool("context_query", a)
            stdio.append(time.perf_counter() - t)
            assert not r.is_error, r.content[0].text
            t = time.perf_counter()
            local = context_query(ws, q, max_tokens=max_tokens)
            inproc.append(time.perf_counter() - t)
            assert r.structured_content == local.api_fields(), "stdio and in-process slices differ"
            answers.append(r.structured_content)
    plain_stdio: list[float] = []
    if plain:
        bare = PlainStdio(corpus)
        bare.tool("context_query", warm)
        for q, expected in zip(questions[1:], answers):
            t = time.perf_counter()
            answer = bare.tool("context_query", {"query": q, "max_tokens": max_tokens})
            plain_stdio.append(time.perf_counter() - t)
            assert answer == expected, "the two servers' slices differ"
        bare.close()
    ws.close()
    ms = lambda v: v * 1000  # noqa: E731
    p95 = ms(pct(stdio, 0.95))
    print(f"\ncorpus {corpus}: {len(stdio)} distinct questions, each asked once, max_tokens={max_tokens}")
    def row(label: str, v: list[float]) -> None:
        print(f"{label:30}{ms(statistics.median(v)):>10.1f}{ms(pct(v, 0.95)):>10.1f}{ms(max(v)):>10.1f}")

    print(f"{'':30}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}")
    row("in-process", inproc)
    if plain_stdio:
        row("MCP stdio, bare JSON-RPC client", plain_stdio)
    row("MCP stdio round trip (SDK)", stdio)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"MCP stdio p95 {p95:.1f} ms: {'met' if p95 <= DISTINCT_GOAL_P95_MS else 'MISSED'} "
          f"(goal <= {DISTINCT_GOAL_P95_MS:.0f} ms)")


async def run(corpus: Path, rounds: int, max_tokens: int, questions: list[str]) -> None:
    t0 = time.perf_counter()
    ws = Workspace.open(corpus)
    summary = ws.index()
    _ = ws.graph
    print(f"in-process workspace: {summary.files:,} files, catch-up {summary.parsed} parsed, "
          f"ready in {time.perf_counter() - t0:.1f}s")

    async with mcp_session(corpus) as s:
        args = [{"query": q, "max_tokens": max_tokens} for q in questions]
        # Warm both sides (graph caches, name index, file token counts).
        sizes = []
        for a in args:
            local = context_query(ws, a["query"], max_tokens=max_tokens)
            remote = await s.call_tool("context_query", a)
            assert not remote.is_error, remote.content[0].text
            assert remote.structured_content == local.api_fields(), "stdio and in-process slices differ"
            sizes.append((local.tokens, len(remote.content[0].text.encode())))

        inproc: list[float] = []
        stdio: list[float] = []
        commit_stdio: list[float] = []
        for _ in range(rounds):
            for i, a in enumerate(args):
                t = time.perf_counter()
                context_query(ws, a["query"], max_tokens=max_tokens)
                inproc.append(time.perf_counter() - t)
                t = time.perf_counter()
                r = await s.call_tool("context_query", a)
                stdio.append(time.perf_counter() - t)
                if i >= len(QUERIES):
                    commit_stdio.append(stdio[-1])
                assert not r.is_error
    ws.close()

    n = len(inproc)
    ms = lambda v: v * 1000  # noqa: E731
    p50_i, p95_i = ms(statistics.median(inproc)), ms(pct(inproc, 0.95))
    p50_s, p95_s = ms(statistics.median(stdio)), ms(pct(stdio, 0.95))
    mean_tokens = statistics.mean(t for t, _ in sizes)
    mean_bytes = statistics.mean(b for _, b in sizes)
    print()
    print(f"corpus {corpus}  ({len(questions)} queries x {rounds} rounds = {n} calls per side, "
          f"max_tokens={max_tokens}; slices avg {mean_tokens:,.0f} tokens, {mean_bytes / 1024:,.1f} KiB of JSON text)")
    print(f"{'':24}{'p50 ms':>10}{'p95 ms':>10}")
    print(f"{'in-process':24}{p50_i:>10.1f}{p95_i:>10.1f}")
    print(f"{'MCP stdio round trip':24}{p50_s:>10.1f}{p95_s:>10.1f}")
    print(f"{'ratio stdio/in-process':24}{p50_s / p50_i:>10.2f}{p95_s / p95_i:>10.2f}")
    print(f"protocol overhead at p50: {p50_s - p50_i:.1f} ms per call")
    if commit_stdio:
        p95_c = ms(pct(commit_stdio, 0.95))
        print(f"commit-message questions over MCP stdio ({len(commit_stdio)} calls): "
              f"p50 {ms(statistics.median(commit_stdio)):.1f} ms  p95 {p95_c:.1f} ms  "
              f"{'PASS' if p95_c <= GOAL_P95_MS else 'MISS'} (goal p95 <= {GOAL_P95_MS:.0f} ms)")


def main() -> int:
    ap = argparse.ArgumentParser(description="context_query latency over MCP stdio vs in-process")
    ap.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS,
                    help=f"project to query (default {DEFAULT_CORPUS})")
    ap.add_argument("--rounds", type=int, default=20, help="rounds over the query list (default 20)")
    ap.add_argument("--max-tokens", type=int, default=4096, help="token budget per slice (default 4096)")
    ap.add_argument("--commits", type=Path, help="git repository whose commit messages join the questions")
    ap.add_argument("--commit-questions", type=int, default=24, help="commit messages taken (default 24)")
    ap.add_argument("--distinct", type=int, metavar="N", default=0,
                    help="instead of rounds: N distinct questions drawn from the index, each asked once "
                    f"(the issue 24 figure: p95 <= {DISTINCT_GOAL_P95_MS:.0f} ms on a 750k-line index)")
    ap.add_argument("--plain-client", action="store_true",
                    help="with --distinct: then ask a second server (started once the first has stopped) "
                    "through bare JSON-RPC lines, the round trip without the SDK client's own work")
    args = ap.parse_args()
    corpus = args.corpus.expanduser()
    if not corpus.is_dir():
        print(f"corpus not found: {corpus}\n"
              "unpack a large Python package there first (or set CORPORA), e.g.:\n"
              "  pip download --no-deps sympy==1.14.0 -d /tmp/wheels\n"
              f"  unzip -q /tmp/wheels/sympy-1.14.0-py3-none-any.whl -d {corpus}", file=sys.stderr)
        return 2
    if args.distinct:
        anyio.run(run_distinct, corpus.resolve(), args.distinct, args.max_tokens, args.plain_client)
        return 0
    questions = list(QUERIES)
    if args.commits:
        questions += commit_questions(args.commits.resolve(), args.commit_questions)
    anyio.run(run, corpus.resolve(), args.rounds, args.max_tokens, questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
