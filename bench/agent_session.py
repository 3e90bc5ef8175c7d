"""Long coding-agent sessions through `memstrata serve`, billed by a caching provider, side by side.

One session per repository: 10+ tasks taken from its history (the history
cases of ``bench/proxy_fidelity.py``: a real commit message as the user's
request, then one Read per step -- two neighbouring files, then the files the
commit changed -- as ``cat -n`` tool results), one Anthropic request per step,
the conversation growing to 100k+ tokens.  Requests carry Claude Code's cache
breakpoints (the system block and the last block of the last message).

Every request goes twice, to two instances of the caching stand-in provider
``tests/caching_provider.py`` (it bills by Anthropic's published prompt
caching rules: breakpoints, 20-block lookback, 5-minute entries, reads 0.1x,
writes 1.25x): straight, and through a real ``memstrata serve`` subprocess.
Printed per session and mode (``safe``, ``aggressive``):

* requests, the two bills (USD, prompt and output), the share saved;
* current-task retention: of the functions each task's commit changed, the
  share whose every line is in the request after the task's last Read
  (verbatim, in order);
* the ledger's reported saving (``/status`` session ``dollar_saved``) and its
  error against the true difference of the two bills;
* errors (non-200 answers).

``--context-editing``: every request also asks the provider to clear old tool
results itself (Anthropic's ``clear_tool_uses_20250919`` with its published
defaults), which the stand-in applies; the ledger must then count the
provider's clearing as the provider's, not the proxy's, saving.

``--in-process`` is the quick loop for tuning: the compressor is called
directly on the same index instead of through ``serve`` (a session takes
seconds instead of minutes).  The bills and retention are those of the same
forwarded requests; the ledger is not run, so its columns and target are
left out.

Run from the repository root (the stand-ins live in ``tests/``)::

    python bench/agent_session.py --repos /work/corpora/repos/{click,rich,attrs,starlette,marshmallow,jinja}
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import proxy_fidelity as pf  # noqa: E402  (history cases, cat -n, retention, serve subprocess)

from memstrata.harness.proxy.analysis import prompt_tokens  # noqa: E402
from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor  # noqa: E402
from memstrata.indexer.workspace import Workspace  # noqa: E402
from tests.caching_provider import ANTHROPIC_RATES, CachingProvider  # noqa: E402
from tests.stub_provider import ServerThread  # noqa: E402

MODEL = "claude-sonnet-4-5"
MARK = {"type": "ephemeral"}
ANSWER = "Done: the change is in place and the tests pass."
SYSTEM = ("You are an interactive coding agent working in the user's repository. Read the files you need "
          "with the Read tool before changing them, keep changes minimal, follow the project's style, and "
          "explain what you changed and why in a short closing note. ") * 12
TARGETS = {"safe": (0.50, 0.30, 0.98), "aggressive": (0.70, None, 0.90)}  # saved overall, per session, retention
ERROR_TARGET = 0.05


@dataclass
class SessionResult:
    repo: str
    mode: str
    tasks: int = 0
    requests: int = 0
    errors: int = 0
    peak_tokens: int = 0
    bill_direct: float = 0.0
    bill_proxy: float = 0.0
    reported: float | None = 0.0          # None: no ledger (--in-process)
    gold: int = 0
    kept: int = 0
    parts_direct: dict | None = None   # USD by kind (cache_write, cache_write_1h, cache_read, input, output)
    parts_proxy: dict | None = None

    @property
    def saved(self) -> float:
        return 1 - self.bill_proxy / self.bill_direct if self.bill_direct else 0.0

    @property
    def true_saving(self) -> float:
        return self.bill_direct - self.bill_proxy

    @property
    def error(self) -> float | None:
        if self.reported is None:
            return None
        return (self.reported - self.true_saving) / abs(self.true_saving) if self.true_saving else 0.0

    @property
    def retention(self) -> float:
        return self.kept / self.gold if self.gold else 1.0


def session_requests(cases, checkout: Path):
    """(body, task index, gold of the task when this is its last Read) per step of the session."""
    msgs: list = []
    n = 0
    for t, case in enumerate(cases):
        msgs.append({"role": "user", "content": [{"type": "text", "text": case.query}]})
        reads = case.neighbours + case.files
        for k, f in enumerate(reads):
            n += 1
            tid = f"toolu_{n:03d}"
            msgs.append({"role": "assistant", "content": [
                {"type": "text", "text": f"Let me read {f}."},
                {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": str(checkout / f)}}]})
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                      "content": pf.cat_n(case.texts[f])}]})
            body = {"model": MODEL, "max_tokens": 1024,
                    "system": [{"type": "text", "text": SYSTEM, "cache_control": MARK}], "messages": msgs}
            # Claude Code's moving breakpoint: the last block of the last message, this request only.
            body = dict(body, messages=[*msgs[:-1], {**msgs[-1], "content": [
                *msgs[-1]["content"][:-1], {**msgs[-1]["content"][-1], "cache_control": MARK}]}])
            yield body, t, case.gold if k == len(reads) - 1 else None
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": ANSWER}]})


# ``--context-editing``: every request asks the provider to clear old tool results itself (Anthropic's
# server-side context editing, its published defaults: over 100,000 input tokens, all but the latest 3 tool
# uses), straight and through the proxy alike.
CONTEXT_EDITING = {"edits": [{"type": "clear_tool_uses_20250919"}]}
CONTEXT_EDITING_BETA = "context-management-2025-06-27"


def run_session(repo: str, cases, checkout: Path, mode: str, env: dict, show_losses: bool = False,
                in_process: bool = False, context_editing: bool = False) -> SessionResult:
    res = SessionResult(repo, mode, tasks=len(cases))
    through, direct = CachingProvider(answer=ANSWER), CachingProvider(answer=ANSWER)
    with ServerThread(through.app) as t, ServerThread(direct.app) as d, httpx.Client(timeout=600) as client:
        headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
        if context_editing:
            headers["anthropic-beta"] = CONTEXT_EDITING_BETA
        if in_process:
            ws = Workspace.open(checkout)
            compressor = Compressor(ws, CompressionSettings.for_mode(mode))

            def send(body: dict) -> httpx.Response:
                out = compressor.compress(copy.deepcopy(body), "anthropic")
                return client.post(t.url + "/v1/messages", json=out.body if out.changed else body)
        else:
            serve = pf.Serve(checkout, mode, t.url, env)

            def send(body: dict) -> httpx.Response:
                return client.post(serve.url + "/anthropic/v1/messages", json=body, headers=headers)
        try:
            if not in_process:
                serve.wait()
            for body, task, gold in session_requests(cases, checkout):
                if context_editing:
                    body = dict(body, context_management=CONTEXT_EDITING)
                res.requests += 1
                res.peak_tokens = max(res.peak_tokens, prompt_tokens(body, "anthropic"))
                r = send(body)
                r2 = client.post(d.url + "/v1/messages", json=body, headers=headers)
                res.errors += (r.status_code != 200) + (r2.status_code != 200)
                if gold is not None:
                    forwarded = through.received[-1]
                    for path, qual, lines in gold:
                        res.gold += 1
                        kept = pf.retained(forwarded, lines, True)
                        res.kept += kept
                        if show_losses and not kept:
                            size = prompt_tokens({"messages": [{"role": "user", "content": cases[task].texts[path]}]},
                                                 "anthropic")
                            print(f"  lost: task {task} {path}:{qual} ({len(lines)} lines; file {size:,} tokens)"
                                  f" asked {cases[task].query[:100]!r}",
                                  file=sys.stderr, flush=True)
            if in_process:
                res.reported = None
            else:
                time.sleep(0.5)  # the ledger row of the last answer is written by serve's recorder thread
                status = client.get(serve.url + "/status").json()
                res.reported = status["session"]["dollar_saved"] or 0.0
        finally:
            if in_process:
                ws.close()
            else:
                serve.stop()
    res.bill_direct = direct.total(ANTHROPIC_RATES)
    res.bill_proxy = through.total(ANTHROPIC_RATES)
    res.parts_direct, res.parts_proxy = parts(direct), parts(through)
    return res


KINDS = ("cache_write", "cache_write_1h", "cache_read", "input", "output")   # the stand-in's Bill fields


def parts(provider: CachingProvider) -> dict:
    """The provider's bill split by what each token was billed as (USD)."""
    return {k: sum(getattr(b, k) for b in provider.bills) * ANTHROPIC_RATES[k] / 1e6 for k in KINDS}


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_table(mode: str, results: list[SessionResult]) -> None:
    saved_all, saved_each, retention = TARGETS[mode]
    print(f"\n## {mode}\n")
    print(f"{'session':<12} {'tasks':>5} {'reqs':>5} {'peak tok':>9} {'bill direct':>12} {'bill proxy':>11} "
          f"{'saved':>7} {'retention':>9} {'ledger saved':>12} {'true saved':>10} {'error':>7} {'errs':>5}")
    for r in results:
        reported = f"{r.reported:>12.4f}" if r.reported is not None else f"{'-':>12}"
        error = f"{r.error:>+7.1%}" if r.error is not None else f"{'-':>7}"
        print(f"{r.repo:<12} {r.tasks:>5} {r.requests:>5} {r.peak_tokens:>9,} {r.bill_direct:>12.4f} "
              f"{r.bill_proxy:>11.4f} {r.saved:>6.1%} {r.retention:>9.3f} {reported} "
              f"{r.true_saving:>10.4f} {error} {r.errors:>5}")
    direct = sum(r.bill_direct for r in results)
    proxy = sum(r.bill_proxy for r in results)
    overall = 1 - proxy / direct if direct else 0.0
    gold = sum(r.gold for r in results)
    kept = sum(r.kept for r in results)
    print(f"{'overall':<12} {sum(r.tasks for r in results):>5} {sum(r.requests for r in results):>5} {'':>9} "
          f"{direct:>12.4f} {proxy:>11.4f} {overall:>6.1%} {kept / gold if gold else 1:>9.3f} "
          + (f"{sum(r.reported for r in results):>12.4f} " if all(r.reported is not None for r in results)
             else f"{'-':>12} ")
          + f"{direct - proxy:>10.4f} {'':>7} "
          f"{sum(r.errors for r in results):>5}")
    print()
    print(f"bill saved overall >= {saved_all:.0%}: {overall:.1%} {mark(overall >= saved_all)}")
    if saved_each is not None:
        low = min(r.saved for r in results)
        print(f"bill saved in every session >= {saved_each:.0%}: lowest {low:.1%} {mark(low >= saved_each)}")
    low_ret = min(r.retention for r in results)
    print(f"current-task retention >= {retention:.2f} in every session: lowest {low_ret:.3f} "
          f"{mark(low_ret >= retention)}")
    if mode == "safe" and all(r.error is not None for r in results):
        worst = max(abs(r.error) for r in results)
        print(f"reported saving within {ERROR_TARGET:.0%} of the true difference in every session: worst "
              f"{worst:.1%} {mark(worst <= ERROR_TARGET)}")
    elif mode == "safe":
        print(f"reported saving within {ERROR_TARGET:.0%} of the true difference: not measured (--in-process)")
    errors = sum(r.errors for r in results)
    print(f"errors = 0: {errors} {mark(errors == 0)}")
    print(f"\nwhere the money goes ({mode}, USD: cache writes at 1.25x, cache reads at 0.1x, uncached input, "
          f"output; direct -> through the proxy)\n")
    print(f"{'session':<12} " + " ".join(f"{k.replace('_', ' '):>21}" for k in KINDS))
    for r in results:
        if r.parts_direct is None:
            continue
        print(f"{r.repo:<12} " + " ".join(f"{r.parts_direct[k]:>9.4f} -> {r.parts_proxy[k]:>8.4f}" for k in KINDS))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repos", nargs="+", required=True, metavar="DIR", help="git repositories with full history")
    ap.add_argument("--tasks", type=int, default=10, help="tasks per session")
    ap.add_argument("--max-scan", type=int, default=2000)
    ap.add_argument("--max-gold-symbols", type=int, default=10)
    ap.add_argument("--min-query-words", type=int, default=3)
    ap.add_argument("--modes", default="safe,aggressive")
    ap.add_argument("--show-losses", action="store_true",
                    help="name each changed function a request lost (for the development half only)")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "memstrata-agent-session"))
    ap.add_argument("--in-process", action="store_true",
                    help="quick loop: call the compressor directly instead of going through serve (no ledger)")
    ap.add_argument("--context-editing", action="store_true",
                    help="requests ask for Anthropic's server-side tool result clearing (published defaults)")
    args = ap.parse_args(argv)
    args.cases_per_repo = args.tasks
    modes = args.modes.split(",")
    home = Path(args.scratch) / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MEMSTRATA_HOME=str(home))  # default provider rates, no user file
    results: dict[str, list[SessionResult]] = {m: [] for m in modes}
    for repo in args.repos:
        repo = Path(repo)
        cases, checkout = [], None
        for case, co, _ in pf.build_cases(repo, args, print):
            cases.append(case)
            checkout = co
        if len(cases) < args.tasks:
            print(f"{repo.name}: only {len(cases)} tasks found; skipped", file=sys.stderr)
            continue
        cases.reverse()  # oldest commit first, as a session would meet them
        for mode in modes:
            r = run_session(repo.name, cases, checkout, mode, env, args.show_losses, args.in_process,
                            args.context_editing)
            results[mode].append(r)
            print(f"{repo.name} {mode}: {r.requests} requests, saved {r.saved:.1%}, retention {r.retention:.3f}, "
                  + (f"ledger error {r.error:+.1%}" if r.error is not None else "no ledger (in process)"),
                  file=sys.stderr, flush=True)
    for mode in modes:
        if results[mode]:
            print_table(mode, results[mode])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
