"""Savings sessions: one ``memstrata serve`` process is one session, recorded as such.

Real serve subprocesses against the stand-in provider; SIGKILL for the crash case.
"""

import json
import os
import signal

import openai
import pytest

from memstrata.harness.proxy.savings import savings_report
from memstrata.storage import Store, ledger
from tests.stub_provider import ServerThread, StubUpstream

from .serve_helpers import Serve, cli_env, copy_project, memstrata


@pytest.fixture
def env(memstrata_home):
    return cli_env(memstrata_home)


@pytest.fixture
def project(tmp_path):
    return copy_project(tmp_path / "proj")


@pytest.fixture(scope="module")
def upstream():
    stub = StubUpstream(record=False)
    with ServerThread(stub.app) as server:
        yield server.url


def paste_request(project) -> list[dict]:
    code = (project / "app/auth/service.py").read_text() + "\n" + (project / "app/reports.py").read_text()
    return [{"role": "user", "content": f"```python\n{code}\n```\nWhat does AuthService.logout do?"}]


def traffic(serve: Serve, project, n: int) -> None:
    client = openai.OpenAI(base_url=serve.url + "/v1", api_key="k", max_retries=0)
    for _ in range(n):
        client.chat.completions.create(model="gpt-4o", messages=paste_request(project))


def serve(project, env, upstream, **kw) -> Serve:
    # aggressive: the small pastes of these tests are compressed (safe mode would leave them whole)
    return Serve(project, env, "--openai-upstream", upstream + "/v1", "--compress", "aggressive",
                 "--min-tokens", "50", "--no-watch", **kw)


def test_the_running_session_is_reported_not_the_latest(project, env, upstream):
    with serve(project, env, upstream) as main:
        traffic(main, project, 3)
        main_saved = main.status()["session"]["tokens_saved"]
        assert main_saved > 0
        # a short throwaway serve on the same project, started later and stopped
        with serve(project, env, upstream) as throwaway:
            traffic(throwaway, project, 1)
            both = memstrata("savings", str(project), env=env).stdout
            # Two sessions running: the figures under them are said to be the two together.
            assert both.count("running since") == 2 and "these 2 sessions together:" in both, both
        assert throwaway.proc.returncode == 0
        res = memstrata("savings", str(project), "--json", "--detail", env=env)
        assert res.returncode == 0, res.stderr
        detail = json.loads(res.stdout)
        assert [s["pid"] for s in detail["sessions"]] == [main.proc.pid]  # only the one that runs
        assert detail["summary"]["session_tokens_saved"] == main_saved
        assert detail["session"]["requests"] == 3
        assert detail["cycle"]["requests"] == 4
        text = memstrata("savings", "--project", str(project), env=env).stdout
        assert text.count("running since") == 1 and f"pid {main.proc.pid}" in text
        assert main.url in text
        for figure in ("tokens saved:", "dollars saved:"):
            assert text.count(figure) == 2  # once for the session, once for the cycle
        assert "n/a" not in text
    res = memstrata("savings", str(project), env=env)
    assert "memstrata serve: not running; last session" in res.stdout
    assert json.loads(memstrata("savings", str(project), "--json", env=env).stdout)["session_tokens_saved"] == 0


def test_killed_session_is_closed_by_the_next_start(project, env, upstream):
    first = serve(project, env, upstream)
    traffic(first, project, 2)
    first_id = first.status()["session"]["id"]
    os.kill(first.proc.pid, signal.SIGKILL)
    first.kill()
    db = project / ".memstrata" / "index.db"
    with Store(db) as store:
        (s,) = [x for x in ledger.sessions(store) if x.id == first_id]
        assert s.ended is None                           # nobody closed it...
        assert ledger.running_sessions(store) == []      # ...but it is known not to run
        last_time = max(e.time for e in ledger.entries(store, session_ids=[first_id]))
    text = memstrata("savings", str(project), env=env).stdout
    assert f"not running; last session {first_id} started" in text and "died without stopping" in text
    with serve(project, env, upstream) as second:
        second_id = second.status()["session"]["id"]
        with Store(db) as store:
            closed = ledger.session(store, first_id)
            assert closed.crashed and closed.ended == pytest.approx(last_time)
            running = ledger.running_sessions(store)
            assert [r.id for r in running] == [second_id]
            assert not ledger.session(store, second_id).crashed
    text = memstrata("savings", str(project), env=env).stdout
    assert f"last session {second_id} ran" in text and "(stopped)" in text
    with Store(db) as store:
        stopped = ledger.session(store, second_id)
        assert stopped.ended is not None and not stopped.crashed
        assert store.integrity_ok()


def test_two_serves_at_once_are_two_sessions(project, env, upstream):
    with serve(project, env, upstream) as a, serve(project, env, upstream) as b:
        traffic(a, project, 2)
        traffic(b, project, 1)
        sa, sb = a.status()["session"], b.status()["session"]
        assert sa["id"] != sb["id"] and (sa["requests"], sb["requests"]) == (2, 1)
        with Store(project / ".memstrata" / "index.db") as store:
            assert {s.id for s in ledger.running_sessions(store)} == {sa["id"], sb["id"]}
            both = savings_report(store).session
            assert both.requests == 3 and both.tokens_saved == sa["tokens_saved"] + sb["tokens_saved"]


def test_memstrata_mcp_reports_the_running_serve_session(project, env, upstream, memstrata_exe):
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def summary() -> dict:
        params = StdioServerParameters(command=memstrata_exe, args=["mcp", str(project), "--no-watch"], env=env)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return (await s.call_tool("savings_summary", {})).structured_content

    with serve(project, env, upstream) as running:
        traffic(running, project, 2)
        expected = running.status()["savings"]
        got = anyio.run(summary)
        assert got["session_tokens_saved"] == expected["session_tokens_saved"] > 0
        assert got["session_dollar_saved"] == pytest.approx(expected["session_dollar_saved"])
    stopped = anyio.run(summary)
    assert stopped["session_tokens_saved"] == 0 and stopped["cycle_tokens_saved"] == expected["cycle_tokens_saved"]


def test_a_session_starting_is_never_closed_by_another_start(tmp_path, monkeypatch):
    """Two serves starting at once: the second one's sweep of dead sessions runs at the
    worst moment of the first one's start (its session row written, its lock about to be
    taken) and must leave that session open."""
    import subprocess
    import sys

    path = tmp_path / ".memstrata" / "index.db"
    store = Store(path)
    sweep = ("import sys; from memstrata.storage import Store, ledger; "
             "s = Store(sys.argv[1]); print(ledger.close_dead_sessions(s)); s.close()")
    swept = []
    real_hold = ledger.SessionLocks.hold

    def hold_after_another_start_swept(self, session_id):
        proc = subprocess.run([sys.executable, "-c", sweep, str(path)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        swept.append(json.loads(proc.stdout))
        return real_hold(self, session_id)

    monkeypatch.setattr(ledger.SessionLocks, "hold", hold_after_another_start_swept)
    try:
        sid = ledger.start_session(store, 100.0, pid=os.getpid())
        assert swept == [[]]
        s = ledger.session(store, sid)
        assert s.ended is None and not s.crashed
        assert [x.id for x in ledger.running_sessions(store)] == [sid]
    finally:
        store.close()
