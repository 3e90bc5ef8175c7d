"""Does `memstrata serve` keep the code a question needs, save tokens, and keep prompt caches hitting?

Cases are the history cases of ``bench/quality.py`` (a commit that modifies
1-3 source files; question = its message; gold = the innermost functions
and methods enclosing the changed lines, at the parent commit).  Each case
becomes two conversations, sent through a real ``memstrata serve`` (one per
mode, started on the parent checkout) to the stand-in provider
``tests/stub_provider.py``, which records what it received:

* **paste**: OpenAI chat; the commit message, then every changed file pasted
  whole in a fence;
* **agent**: Anthropic messages; the commit message, then Read tool_use /
  tool_result pairs (``cat -n`` text) of two neighbouring files and then of
  the changed files.

Each conversation then gets a second turn (the stub's answer and a
follow-up) to check that what was forwarded the first time is forwarded the
same way again.

Printed per style and mode (``safe``, the default, and ``aggressive``), per
repository and overall, each next to its target:

* **retention**: share of the changed functions whose every line is still in
  the forwarded first request, verbatim and in order (target >= 0.95);
* **tokens saved** over requests of 8k+ tokens (target >= 40 %) and over all
  (cl100k counts of the whole request: system, messages, tool calls);
* **prefix stable**: share of conversations whose second forwarded request
  starts with exactly the messages forwarded the first time (target 100 %);
* **compression latency** p50/p95: the same two requests compressed again
  in-process against the same index (fresh conversation state), which also
  checks that the serve forwarded exactly what the compressor produces.

Corpora (outside the repository): bare mirrors, e.g.
``git clone --mirror https://github.com/pallets/click CORPORA/repos/click``
(likewise encode/starlette, Textualize/rich, python-attrs/attrs,
sindresorhus/ky, spf13/cobra, twisted/twisted)::

    python bench/proxy_fidelity.py --repos CORPORA/repos/{click,starlette,rich,attrs,ky,cobra,twisted}

Run from the repository root (the stand-in provider lives in ``tests/``).
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import quality  # noqa: E402  (bench/quality.py: the history cases)

from memstrata.compressor.tokens import count_tokens  # noqa: E402
from memstrata.harness.proxy.analysis import prompt_texts  # noqa: E402
from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor  # noqa: E402
from memstrata.indexer.languages import language_for_path  # noqa: E402
from memstrata.indexer.scan import is_test_path  # noqa: E402
from memstrata.indexer.workspace import Workspace  # noqa: E402
from tests.stub_provider import ServerThread, StubUpstream  # noqa: E402

STYLES = ("paste", "agent")
FUNCTION_KINDS = ("function", "method")
BIG = 8000
FOLLOW_UP = "Thanks. Now write that change as a unified diff against these files."
ANSWER = "The change belongs in the functions named above; here is the approach."
FENCE_LANG = {"python": "python", "javascript": "js", "typescript": "ts", "tsx": "tsx", "go": "go",
              "rust": "rust", "java": "java"}


# -- cases -----------------------------------------------------------------------------


@dataclass
class Case:
    repo: str
    sha: str
    query: str
    files: list[str]
    neighbours: list[str]
    gold: list[tuple[str, str, list[str]]]  # (path, qualname, lines of the function at the parent)
    other_gold: int                         # changed classes / module code (not counted)
    texts: dict[str, str]


def neighbours_of(ws: Workspace, files: list[str], n: int = 2) -> list[str]:
    graph = ws.graph
    language = language_for_path(files[0])
    pool = sorted(p for p in graph.files() if language_for_path(p) == language and not is_test_path(p)
                  and p not in files)
    folder = files[0].rsplit("/", 1)[0] if "/" in files[0] else ""
    same = [p for p in pool if (p.rsplit("/", 1)[0] if "/" in p else "") == folder]
    ordered = same + [p for p in pool if p not in same]
    # The nearest names around the changed file, then anything else.
    key = files[0]
    ordered.sort(key=lambda p: (p not in same, abs(pool.index(p) - _position(pool, key))))
    return ordered[:n]


def _position(pool: list[str], path: str) -> int:
    for i, p in enumerate(pool):
        if p > path:
            return i
    return len(pool)


def build_cases(repo: Path, args, log):
    """Yield (case, checkout, workspace) one at a time, the checkout moved to the case's parent and indexed."""
    name = repo.name
    repo = repo.resolve()
    head = quality.git(repo, "rev-parse", "HEAD").strip()
    checkout = quality.prepare_checkout(repo, name, Path(args.scratch), False)
    ws = None
    built = 0
    try:
        for line in quality.git(repo, "rev-list", "--parents", f"--max-count={args.max_scan}", head).splitlines():
            if built >= args.cases_per_repo:
                break
            sha, *parents = line.split()
            if len(parents) != 1:
                continue
            parent = parents[0]
            files, _ = quality.source_changes(repo, parent, sha)
            if files is None:
                continue
            query = quality.commit_message(repo, sha)
            if quality.content_words(query) < args.min_query_words:
                continue
            quality.checkout(checkout, parent)
            if ws is None:
                ws = Workspace.open(checkout)
            ws.index()
            graph = ws.graph
            if any(f not in graph for f in files):
                continue
            symbols = quality.gold_symbols(ws, quality.changed_old_lines(repo, parent, sha, files))
            funcs = [g for g in symbols if g.kind in FUNCTION_KINDS]
            if not funcs or len(symbols) > args.max_gold_symbols:
                continue
            texts = {f: (checkout / f).read_text(encoding="utf-8", errors="replace") for f in files}
            neighbours = neighbours_of(ws, files)
            for p in neighbours:
                texts[p] = (checkout / p).read_text(encoding="utf-8", errors="replace")
            gold = []
            for g in funcs:
                path, _, qual = g.node.partition("::")
                lines = texts[path].split("\n")[g.start - 1:g.end]
                gold.append((path, qual, lines))
            built += 1
            yield Case(name, sha, query, files, neighbours, gold, len(symbols) - len(funcs), texts), checkout, ws
    finally:
        if ws is not None:
            ws.close()


# -- requests ---------------------------------------------------------------------------


def paste_turns(case: Case) -> tuple[dict, dict]:
    parts = [case.query, ""]
    for f in case.files:
        parts.append(f"{f}:\n```{FENCE_LANG.get(language_for_path(f) or '', '')}\n{case.texts[f]}\n```")
    first = {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are a careful senior engineer."},
                                              {"role": "user", "content": "\n".join(parts)}]}
    second = dict(first, messages=first["messages"] + [{"role": "assistant", "content": ANSWER},
                                                       {"role": "user", "content": FOLLOW_UP}])
    return first, second


def cat_n(text: str) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))


def agent_turns(case: Case, checkout: Path) -> tuple[dict, dict]:
    msgs = [{"role": "user", "content": [{"type": "text", "text": case.query}]}]
    for n, f in enumerate(case.neighbours + case.files):
        tid = f"toolu_{n:02d}"
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Let me read {f}."},
            {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": str(checkout / f)}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                  "content": cat_n(case.texts[f])}]})
    first = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.",
             "messages": msgs}
    second = dict(first, messages=msgs + [{"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
                                          {"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]}])
    return first, second


def request_tokens(body: dict, api: str) -> int:
    return sum(count_tokens(t) for t in prompt_texts(body, api))


# -- measuring ----------------------------------------------------------------------------


def retained(forwarded: dict, gold_lines: list[str], numbered: bool) -> bool:
    """Every line of the function is in one forwarded text, verbatim and in order."""
    want = [ln.rstrip() for ln in gold_lines]
    while want and not want[-1].strip():
        want.pop()
    if not want:
        return True
    for text in _texts(forwarded):
        lines = text.split("\n")
        if numbered:
            lines = [ln.split("\t", 1)[1] if "\t" in ln and ln.split("\t", 1)[0].strip().isdigit() else ln
                     for ln in lines]
        lines = [ln.rstrip() for ln in lines]
        for i, ln in enumerate(lines):
            if ln == want[0] and lines[i:i + len(want)] == want:
                return True
    return False


def _texts(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)


@dataclass
class Tally:
    gold: int = 0
    kept: int = 0
    cases_whole: int = 0
    cases: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    big_in: int = 0
    big_out: int = 0
    big_requests: int = 0
    requests: int = 0
    stable: int = 0
    conversations: int = 0
    mismatched: int = 0
    latency: list[float] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    def add(self, other: "Tally") -> None:
        for k, v in vars(other).items():
            if isinstance(v, list):
                getattr(self, k).extend(v)
            else:
                setattr(self, k, getattr(self, k) + v)


def pct(values: list[float], q: float) -> float:
    return quality.pct(values, q * 100)


# -- serve ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, project: Path, mode: str, stub_url: str, env: dict):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memstrata", "serve", "--project", str(project), "--port", str(self.port),
             "--compress", mode, "--openai-upstream", stub_url + "/v1", "--anthropic-upstream", stub_url,
             "--no-watch", "--no-mcp"],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait(self, timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"memstrata serve exited early:\n{self.proc.stderr.read()[-2000:]}")
            try:
                httpx.get(self.url + "/health", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise SystemExit("memstrata serve did not come up")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def send(client: httpx.Client, serve: Serve, style: str, body: dict) -> None:
    path = "/v1/chat/completions" if style == "paste" else "/anthropic/v1/messages"
    headers = {"authorization": "Bearer sk-bench"} if style == "paste" else {"x-api-key": "sk-bench",
                                                                              "anthropic-version": "2023-06-01"}
    r = client.post(serve.url + path, json=body, headers=headers, timeout=600)
    if r.status_code != 200:
        raise SystemExit(f"{path} answered {r.status_code}: {r.text[:300]}")


def run_in_process(case: Case, checkout: Path, ws: Workspace, modes: list[str]) -> dict[tuple[str, str], Tally]:
    """The quick loop: the compressor called directly, without serve and stub."""
    out: dict[tuple[str, str], Tally] = {}
    for style in STYLES:
        api = "openai" if style == "paste" else "anthropic"
        first, second = paste_turns(case) if style == "paste" else agent_turns(case, checkout)
        for mode in modes:
            comp = Compressor(ws, CompressionSettings.for_mode(mode))
            got = [(comp.compress(b, api).body or b) for b in (first, second)]
            out[(style, mode)] = measure(case, style, api, mode, ws, (first, second), got)
    return out


def run_case(case: Case, checkout: Path, ws: Workspace, modes: list[str], stub: StubUpstream, stub_url: str,
             env: dict) -> dict[tuple[str, str], Tally]:
    serves = {m: Serve(checkout, m, stub_url, env) for m in modes}
    out: dict[tuple[str, str], Tally] = {}
    try:
        for s in serves.values():
            s.wait()
        with httpx.Client(trust_env=False) as client:
            for style in STYLES:
                api = "openai" if style == "paste" else "anthropic"
                first, second = paste_turns(case) if style == "paste" else agent_turns(case, checkout)
                for mode in modes:
                    stub.received.clear()
                    send(client, serves[mode], style, first)
                    send(client, serves[mode], style, second)
                    got = [r.json() for r in stub.received if r.path.endswith(("/chat/completions", "/messages"))]
                    out[(style, mode)] = measure(case, style, api, mode, ws, (first, second), got)
    finally:
        for s in serves.values():
            s.stop()
    return out


def measure(case: Case, style: str, api: str, mode: str, ws: Workspace, sent: tuple[dict, dict],
            got: list[dict]) -> Tally:
    t = Tally(cases=1, conversations=1)
    f1, f2 = got
    numbered = style == "agent"
    missed = []
    for path, qual, lines in case.gold:
        t.gold += 1
        if retained(f1, lines, numbered):
            t.kept += 1
        else:
            missed.append(f"{case.repo} {case.sha[:10]} {style}/{mode}: {path}::{qual}")
    t.cases_whole = int(not missed)
    t.missed = missed
    for body, fwd in zip(sent, got):
        a, b = request_tokens(body, api), request_tokens(fwd, api)
        t.requests += 1
        t.tokens_in += a
        t.tokens_out += b
        if a >= BIG:
            t.big_requests += 1
            t.big_in += a
            t.big_out += b
    n = len(f1["messages"])
    t.stable = int(f2["messages"][:n] == f1["messages"])
    # The same two requests, compressed in-process on the same index: latency, and a consistency check.
    comp = Compressor(ws, CompressionSettings.for_mode(mode))
    for body, fwd in zip(sent, got):
        t0 = time.perf_counter()
        res = comp.compress(body, api)
        t.latency.append((time.perf_counter() - t0) * 1000)
        if (res.body or body)["messages"] != fwd["messages"]:
            t.mismatched += 1
    return t


# -- report ----------------------------------------------------------------------------------


def row(name: str, t: Tally) -> str:
    ret = t.kept / t.gold if t.gold else float("nan")
    big = f"{1 - t.big_out / t.big_in:>7.1%}" if t.big_in else f"{'-':>7}"
    overall = 1 - t.tokens_out / t.tokens_in if t.tokens_in else float("nan")
    stable = t.stable / t.conversations if t.conversations else float("nan")
    return (f"{name:<10} {t.cases:>5} {t.gold:>5} | {ret:>6.3f} {t.cases_whole / max(t.cases, 1):>6.2f} | "
            f"{t.big_requests:>4} {big} {overall:>7.1%} | {stable:>7.1%} | "
            f"{pct(t.latency, .5):>7.1f} {pct(t.latency, .95):>7.1f} | {t.mismatched:>3}")


HEADER = (f"{'repo':<10} {'cases':>5} {'funcs':>5} | {'retain':>6} {'whole':>6} | {'8k+':>4} {'saved8k':>7} "
          f"{'saved':>7} | {'stable':>7} | {'p50 ms':>7} {'p95 ms':>7} | {'mis':>3}")


def report(tallies: dict[tuple[str, str, str], Tally], repos: list[str], modes: list[str], out) -> None:
    for style in STYLES:
        for mode in modes:
            print(f"\n{style} / {mode}{' (default)' if mode == 'safe' else ''}", file=out)
            print(HEADER, file=out)
            print("-" * len(HEADER), file=out)
            total = Tally()
            for repo in repos:
                t = tallies.get((repo, style, mode))
                if t is not None:
                    print(row(repo, t), file=out)
                    total.add(t)
            print("-" * len(HEADER), file=out)
            print(row("overall", total), file=out)
            tallies[("overall", style, mode)] = total
    print("\n(retain = share of changed functions kept whole in the first forwarded request; whole = share of "
          "cases with all of them; 8k+ = requests of 8k+ tokens, saved8k their tokens saved; stable = second "
          "request starts with the first one's forwarded messages; p50/p95 = compression latency in-process; "
          "mis = requests where the serve forwarded something else than the compressor produces)", file=out)
    print("\nTargets, default mode (safe):", file=out)
    for style in STYLES:
        t = tallies[("overall", style, "safe")] if ("overall", style, "safe") in tallies else None
        if t is None:
            continue
        ret = t.kept / t.gold if t.gold else float("nan")
        big = 1 - t.big_out / t.big_in if t.big_in else float("nan")
        stable = t.stable / t.conversations if t.conversations else float("nan")
        for name, value, goal, ok in (
                ("retention >= 0.95", f"{ret:.3f}", "", ret >= 0.95),
                ("tokens saved on 8k+ requests >= 40 %", f"{big:.1%}", "", big >= 0.40),
                ("prefix stable in 100 % of conversations", f"{stable:.1%}", "", stable >= 1.0)):
            print(f"  {'PASS' if ok else 'MISS'}  {style:<6} {name:<42} measured {value}{goal}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", nargs="+", required=True, metavar="DIR", help="git repositories with full history")
    ap.add_argument("--cases-per-repo", type=int, default=12)
    ap.add_argument("--max-scan", type=int, default=2000)
    ap.add_argument("--max-gold-symbols", type=int, default=10)
    ap.add_argument("--min-query-words", type=int, default=3)
    ap.add_argument("--modes", default="safe,aggressive")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "memstrata-proxy-fidelity"),
                    help="where the per-repository checkouts live")
    ap.add_argument("--show-missed", type=int, default=10, help="missed functions listed per style and mode")
    ap.add_argument("--json", type=Path, help="write the per-case figures here")
    ap.add_argument("--in-process", action="store_true",
                    help="quick loop: call the compressor directly instead of going through serve and the stub")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    home = Path(tempfile.mkdtemp(prefix="memstrata-fidelity-home-"))
    env = dict(os.environ, MEMSTRATA_HOME=str(home))
    stub = StubUpstream(answer=ANSWER)
    tallies: dict[tuple[str, str, str], Tally] = {}
    per_case = []
    repos = []
    try:
        with ServerThread(stub.app) as server:
            for repo in args.repos:
                name = Path(repo).name
                repos.append(name)
                t0 = time.perf_counter()
                n = 0
                for case, checkout, ws in build_cases(Path(repo), args, log):
                    res = (run_in_process(case, checkout, ws, modes) if args.in_process
                           else run_case(case, checkout, ws, modes, stub, server.url, env))
                    n += 1
                    for (style, mode), t in res.items():
                        tallies.setdefault((name, style, mode), Tally()).add(t)
                        per_case.append({"repo": name, "sha": case.sha, "style": style, "mode": mode,
                                         "gold": t.gold, "kept": t.kept, "tokens_in": t.tokens_in,
                                         "tokens_out": t.tokens_out, "stable": t.stable, "missed": t.missed})
                    log(f"  {name} {case.sha[:10]} files={len(case.files)} funcs={len(case.gold)} " + " ".join(
                        f"{s}/{m}:{t.kept}/{t.gold} {1 - t.tokens_out / max(t.tokens_in, 1):.0%}"
                        for (s, m), t in res.items()))
                log(f"{name}: {n} cases in {time.perf_counter() - t0:.0f} s")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    out = sys.stdout
    print(f"\nproxy fidelity: {len(repos)} repositories, modes {', '.join(modes)}; "
          f"cases per repository <= {args.cases_per_repo}", file=out)
    report(tallies, repos, modes, out)
    if args.show_missed:
        print("\nMissed functions (first few per style and mode):", file=out)
        for style in STYLES:
            for mode in modes:
                t = tallies.get(("overall", style, mode))
                for m in (t.missed if t else [])[:args.show_missed]:
                    print(f"  {m}", file=out)
    if args.json:
        args.json.write_text(json.dumps(per_case, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
