"""The team ledger (issue 25): labels on every row, ``memstrata savings --by`` on both backends,
the dashboard's team view, and four ``serve --store postgresql://...`` processes killed mid-stream
with nothing lost.

Real serve subprocesses and a real PostgreSQL server (tests/pg_cluster.py); the model provider is
the stand-in (tests/stub_provider.py).
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from memstrata.storage import Store, ledger
from memstrata.storage.ledger import LedgerEntry

from tests.stub_provider import ServerThread, StubUpstream

from . import team_ledger
from .serve_helpers import Serve, cli_env, copy_project, memstrata


@pytest.fixture
def env(memstrata_home):
    return cli_env(memstrata_home)


@pytest.fixture(scope="module")
def upstream():
    stub = StubUpstream(record=False, slow_delay=0.005)
    with ServerThread(stub.app) as server:
        yield server.url


def index_shared(project, url: str, name: str, env: dict) -> None:
    res = memstrata("index", str(project), "--store", url, "--project-name", name, env=env)
    assert res.returncode == 0, res.stderr


def seed(store, user: str, host: str, n: int, t0: float, model: str = "gpt-4o") -> None:
    ledger.record(store, [LedgerEntry(
        time=t0 + i, endpoint="openai.chat", provider="openai", model=model, status=200,
        tokens_original=5_000 + i, tokens_forwarded=2_000, input_tokens=2_000, cf_input_tokens=5_000 + i,
        cf_cache_read_tokens=0, cf_cache_write_tokens=0, user_label=user, host_label=host) for i in range(n)])


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path, env):
    """(store options for the CLI, a function opening project ``name``'s store for writing)."""
    project = copy_project(tmp_path / "proj")
    if request.param == "sqlite":
        assert memstrata("index", str(project), env=env).returncode == 0
        return [str(project)], lambda name: Store(project / ".memstrata" / "index.db")
    url = request.getfixturevalue("pg_url")
    from memstrata.storage.postgres import PgStore

    for name in ("shop", "billing"):
        index_shared(project, url, name, env)
    return ["--store", url], lambda name: PgStore(url, name)


def test_savings_by_user_model_day_and_project(backend, env):
    options, open_store = backend
    now = time.time()
    shared = options[0] == "--store"
    with open_store("shop") as store:
        seed(store, "alice", "laptop-a", 3, now - 60)
        seed(store, "bob", "ci", 2, now - 30, model="gpt-4o-mini")
        seed(store, "alice", "laptop-a", 4, now - 400 * 86400)   # long before this billing cycle
        expected = {t.label: t.tokens_saved for t in ledger.totals(store, now - 3600, by_label="user")}
    if shared:
        with open_store("billing") as store:
            seed(store, "carol", "laptop-c", 1, now - 10)

    def savings(*extra: str) -> dict:
        res = memstrata("savings", *options, "--json", *extra, env=env)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    by_user = savings("--by", "user")
    got = {g["key"]: g for g in by_user["groups"]}
    assert by_user["store"] == ("postgresql" if shared else "sqlite") and by_user["by"] == "user"
    assert set(got) == {"alice", "bob", *(("carol",) if shared else ())}   # a shared store: every project
    assert got["alice"]["tokens_saved"] == expected["alice"] and got["alice"]["requests"] == 3
    assert got["bob"]["tokens_saved"] == expected["bob"]
    assert got["alice"]["dollar_saved"] > 0
    assert by_user["total"]["requests"] == sum(g["requests"] for g in by_user["groups"])
    assert [g["key"] for g in by_user["groups"]][0] == "alice"           # most saved first
    everything = savings("--by", "user", "--all")
    assert {g["key"]: g["requests"] for g in everything["groups"]}["alice"] == 7 and everything["since"] is None

    assert {g["key"] for g in savings("--by", "model")["groups"]} >= {"gpt-4o", "gpt-4o-mini"}
    assert len(savings("--by", "day", "--all")["groups"]) >= 2
    by_project = {g["key"]: g["requests"] for g in savings("--by", "project")["groups"]}
    assert by_project == ({"shop": 5, "billing": 1} if shared else {"proj": 5})
    if shared:   # --project-name narrows the team's view to one project
        one = savings("--by", "user", "--project-name", "billing")
        assert [g["key"] for g in one["groups"]] == ["carol"]

    text = memstrata("savings", *options, "--by", "host", env=env)
    assert text.returncode == 0 and "savings by host" in text.stdout and "laptop-a" in text.stdout
    bad = memstrata("savings", *options, "--by", "colour", env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_serve_labels_its_rows_and_sessions_never_from_headers(tmp_path, env, upstream):
    project = copy_project(tmp_path / "proj")
    env = {**env, "MEMSTRATA_HOST": "desk-7"}
    with Serve(project, env, "--openai-upstream", upstream + "/v1", "--no-watch", "--no-mcp",
               "--user-label", "dana") as serve:
        r = httpx.post(serve.url + "/v1/chat/completions", json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": "Bearer sk-secret-key", "x-user": "mallory"}, timeout=30)
        assert r.status_code == 200
        sid = serve.status()["session"]["id"]
        team = httpx.get(serve.url + "/api/team").json()   # SQLite: this project's ledger
        assert not team["shared"] and team["project"] == "proj"
        assert [(g["key"], g["requests"]) for g in team["by_user"]] == [("dana", 1)]
        assert [g["key"] for g in team["by_host"]] == ["desk-7"]
        assert [(g["key"], g["requests"]) for g in team["by_project"]] == [("proj", 1)]
    with Store(project / ".memstrata" / "index.db") as store:
        (row,) = ledger.entries(store, session_ids=[sid])
        assert (row.user_label, row.host_label) == ("dana", "desk-7")
        s = ledger.session(store, sid)
        assert (s.user_label, s.host_label) == ("dana", "desk-7")
        dump = json.dumps([list(r) for r in store.execute("SELECT * FROM ledger")])
        assert "sk-secret" not in dump and "mallory" not in dump
    bad = memstrata("serve", str(project), "--user-label", "a\tb", env=env)
    assert bad.returncode == 2 and "control characters" in bad.stderr and "Traceback" not in bad.stderr


def test_four_serves_on_one_shared_ledger_lose_nothing_when_killed(tmp_path, env, upstream, pg_url):
    project = copy_project(tmp_path / "proj")
    index_shared(project, pg_url, "team", env)
    procs = team_ledger.run_round(project, env, upstream, pg_url, processes=4, stop_after=15)
    for p in procs:
        print(f"{p.label}: {p.completed} completed, {p.rows} rows, {p.failed} cut off, "
              f"{p.rate:.1f} requests/s")
        assert p.completed >= 15
        assert p.rows >= p.completed, p             # nothing a client saw answered is lost
        assert p.labelled == p.rows                 # every row carries its process's labels
    assert len({p.session_id for p in procs}) == 4
    from memstrata.storage.postgres import PgStore

    # The next start sees the four killed sessions as crashed: nobody holds their locks any more.
    with team_ledger.start(project, env, upstream, pg_url, "next", "team") as serve:
        own = serve.status()["session"]["id"]
        with PgStore(pg_url, "team", readonly=True) as store:
            for p in procs:
                s = ledger.session(store, p.session_id)
                assert s.crashed and s.ended is not None, s
                assert not store.locked_elsewhere(ledger.ServerSessionLocks.name(p.session_id))
            assert [s.id for s in ledger.running_sessions(store)] == [own]
    with PgStore(pg_url, "team", readonly=True) as store:
        assert ledger.running_sessions(store) == []       # a stopped serve releases its lock too
        assert not ledger.session(store, own).crashed


def test_team_view_shows_users_hosts_and_projects(tmp_path, env, upstream, pg_url):
    from .test_dashboard import browser, wait_for

    project = copy_project(tmp_path / "proj")
    for name in ("shop", "billing"):
        index_shared(project, pg_url, name, env)
    from memstrata.storage.postgres import PgStore

    with PgStore(pg_url, "billing") as store:
        seed(store, "carol", "laptop-c", 2, time.time() - 5)
    with team_ledger.start(project, env, upstream, pg_url, "erin", "shop") as serve:
        for i in range(3):
            assert httpx.post(serve.url + "/v1/chat/completions", json={
                "model": "gpt-4o", "messages": [{"role": "user", "content": f"question {i}"}]},
                timeout=30).status_code == 200
        api = httpx.get(serve.url + "/api/team").json()
        assert api["shared"] and api["project"] == "shop"
        assert {g["key"]: g["requests"] for g in api["by_user"]} == {"erin": 3, "carol": 2}
        assert {g["key"]: g["requests"] for g in api["by_project"]} == {"shop": 3, "billing": 2}
        assert {g["key"] for g in api["by_host"]} == {"host-erin", "laptop-c"}
        assert api["total"]["requests"] == 5
        assert httpx.get(serve.url + "/api/team", headers={"host": "evil.example"}).status_code == 421
        assert httpx.get(serve.url + "/api/team", headers={"origin": "https://evil.example"}).status_code == 403

        driver = browser()
        try:
            driver.get(serve.url + "/")
            wait_for(driver, "return Number(document.body.dataset.teamLoaded || 0) >= 1", message="the team view")
            rows = driver.execute_script("""
                const out = {};
                for (const id of ["team-users", "team-hosts", "team-projects"])
                  out[id] = [...document.querySelectorAll("#" + id + " tbody tr")].map(
                      (tr) => [tr.dataset.key, Number(tr.dataset.tokensSaved), tr.cells[1].textContent]);
                out.empty = document.getElementById("team-empty").hidden;
                out.scope = document.getElementById("team-scope").textContent;
                return out;""")
            users = {k: (saved, n) for k, saved, n in rows["team-users"]}
            assert users.keys() == {"erin", "carol"} and users["erin"][1] == "3" and users["carol"][1] == "2"
            assert {k: saved for k, saved, _ in rows["team-users"]} == \
                {g["key"]: g["tokens_saved"] for g in api["by_user"]}
            assert [k for k, *_ in rows["team-projects"]] == [g["key"] for g in api["by_project"]]
            assert {k for k, *_ in rows["team-hosts"]} == {"host-erin", "laptop-c"}
            assert rows["empty"] and "every project" in rows["scope"]
            severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert severe == [], severe
        finally:
            driver.quit()
