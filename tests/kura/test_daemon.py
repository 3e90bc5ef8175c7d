"""The kura daemon on an ephemeral loopback port: HTTP API, live watching,
bad databases, single-instance lock, and the Streamable HTTP MCP route."""

from __future__ import annotations

import json
import os
import re
import shutil
import time

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memstrata.kura.daemon import START_TIMEOUT

from .conftest import KuraEnv, wait_until

pytestmark = pytest.mark.timeout(180)


def search(kura, **params):
    return kura.get("/api/search", **params)


def sources(resp) -> list[str]:
    assert resp.status_code == 200, resp.text
    return [g["source"] for g in resp.json().get("keyword", [])]


def test_api_health_list_search_and_errors(kura, docs):
    kura.ok("add", "notes", str(docs))
    out = kura.ok()
    url = kura.url
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url) and url in out
    assert kura.get("/api/health").json()["status"] == "ok"
    # A second `kura` finds it running and prints the same address.
    assert url in kura.ok() and kura.url == url

    listing = kura.get("/api/list").json()
    assert listing["loaded"] == ["notes"]
    assert listing["registered"] == json.loads((kura.home / "db.json").read_text())

    resp = search(kura, db=" notes ", q=" backoff jitter ")
    assert resp.json() == {"keyword": [{"source": "notes.md", "matches": [
        {"chunk": 1, "content": "# Resilience\n\nExponential backoff with jitter avoids thundering herds."}]}]}
    assert sources(search(kura, db="notes", q="AuthService"))[0] == "code/auth.py"
    assert search(kura, db="notes", q="zzzzqqq").json() == {}
    for limit in ("abc", "0", "500", "-3", ""):
        assert search(kura, db="notes", q="alice bob city", limit=limit).status_code == 200
    assert sum(len(g["matches"]) for g in search(kura, db="notes", q="alice bob city", limit="1").json()["keyword"]) == 1
    assert search(kura, db="notes", q="backoff", mode="KEYWORD").status_code == 200

    bad = {
        (("q", "x"),): "invalid argument: db is required",
        (): "invalid argument: db is required; q is required",  # as the MCP surface joins them
        (("db", "notes"),): "invalid argument: q is required",
        (("db", "notes"), ("q", "   ")): "invalid argument: q is required",
        (("db", "nope"), ("q", "x")): 'invalid argument: "nope" not exist',
        (("db", "notes"), ("q", "x"), ("mode", "semantic")): 'invalid argument: mode "semantic" not supported (only "keyword")',
    }
    for params, message in bad.items():
        resp = search(kura, **dict(params))
        assert resp.status_code == 400 and resp.json() == {"error": message}

    big = search(kura, db="notes", q=("backoff " + "x" * 60 + " ") * 150)  # ~10 KB
    assert big.status_code == 200 and len(big.request.url.query) > 10_000
    with httpx.Client(trust_env=False) as c:  # DNS-rebinding: only loopback Host names
        assert c.get(url + "/api/list", headers={"Host": "evil.example"}).status_code == 421
    assert "kura stopped" in kura.ok("stop")
    assert not (kura.home / "endpoint").exists()


def test_watched_folders_follow_changes(kura, docs):
    kura.ok("add", "notes", str(docs))
    kura.ok("add", "drop")
    kura.start()
    inbox = kura.home / "drop" / "inbox"

    (inbox / "memo.txt").write_text("The quarterly zeppelin report.", encoding="utf-8")
    assert wait_until(lambda: sources(search(kura, db="drop", q="zeppelin")) == ["memo.txt"])
    (docs / "sub").mkdir()
    (docs / "sub" / "fresh.md").write_text("Pangolin sightings.", encoding="utf-8")
    assert wait_until(lambda: sources(search(kura, db="notes", q="pangolin")) == ["sub/fresh.md"])

    (docs / "notes.md").write_text("Nothing about retries any more.", encoding="utf-8")
    assert wait_until(lambda: search(kura, db="notes", q="jitter").json() == {})
    (inbox / "memo.txt").unlink()
    assert wait_until(lambda: search(kura, db="drop", q="zeppelin").json() == {})
    shutil.rmtree(docs / "sub")
    assert wait_until(lambda: search(kura, db="notes", q="pangolin").json() == {})

    # Databases added, renamed and removed while the daemon runs.
    kura.ok("add", "late")
    assert "late" in kura.get("/api/list").json()["loaded"]
    (kura.home / "late" / "inbox" / "a.md").write_text("okapi", encoding="utf-8")
    assert wait_until(lambda: sources(search(kura, db="late", q="okapi")) == ["a.md"])
    kura.ok("edit", "late", "later")
    assert sources(search(kura, db="later", q="okapi")) == ["a.md"]
    assert search(kura, db="late", q="okapi").status_code == 400
    kura.ok("remove", "later", "--yes")
    assert kura.get("/api/list").json()["loaded"] == ["notes", "drop"]


def test_a_link_inside_the_folder_follows_the_file_it_shows(kura, docs):
    os.symlink("notes.md", docs / "alias.md")
    kura.ok("add", "notes", str(docs))
    kura.start()
    assert sorted(sources(search(kura, db="notes", q="jitter"))) == ["alias.md", "notes.md"]
    (docs / "notes.md").write_text("Now about zanzibar only.", encoding="utf-8")
    # The watcher reports notes.md alone; the link showing it is re-read with it.
    assert wait_until(lambda: sorted(sources(search(kura, db="notes", q="zanzibar"))) == ["alias.md", "notes.md"])
    assert search(kura, db="notes", q="jitter").json() == {}


def test_a_folder_holding_the_kura_home_never_indexes_it(tmp_path, monkeypatch, docs):
    home = docs / "kura_home"  # a non-hidden home inside the registered folder
    env = KuraEnv(home)
    monkeypatch.setenv("KURA_HOME", str(home))
    try:
        env.ok("add", "notes", str(docs))
        refused = env.run("add", "self", str(home))
        assert refused.returncode != 0 and "inside the Kura home" in refused.stderr
        env.start()
        (docs / "fresh.md").write_text("Pangolin sightings.", encoding="utf-8")
        assert wait_until(lambda: sources(search(env, db="notes", q="pangolin")) == ["fresh.md"])
        assert not any(s.startswith("kura_home/") for s in sources(search(env, db="notes", q="notes")))
        # The daemon's own log is not a document: writing it never wakes the watcher again.
        log = home / "kura.log"
        time.sleep(1.5)
        before = log.read_text().count("updated")
        time.sleep(1.5)
        assert log.read_text().count("updated") == before
    finally:
        env.cleanup()


def test_corrupt_and_deleted_databases_are_skipped_while_others_serve(kura, docs):
    kura.ok("add", "good", str(docs))
    kura.ok("add", "bad")
    kura.ok("add", "doomed")
    (kura.home / "bad" / "data.db").write_bytes(b"definitely not sqlite " * 500)
    kura.start()
    listing = kura.get("/api/list").json()
    assert listing["loaded"] == ["good", "doomed"]
    assert [r["db"] for r in listing["registered"]] == ["good", "bad", "doomed"]
    resp = search(kura, db="bad", q="x")
    assert resp.status_code == 400 and resp.json()["error"].startswith('invalid argument: "bad" not loaded')
    assert "bad\t" in kura.ok("list") and "not loaded" in kura.ok("list")

    shutil.rmtree(kura.home / "doomed")  # deleted by hand while the daemon runs
    assert wait_until(lambda: kura.get("/api/list").json()["loaded"] == ["good"])
    resp = search(kura, db="doomed", q="x")
    assert resp.status_code == 400 and "was deleted" in resp.json()["error"]
    assert not (kura.home / "doomed").exists()  # never re-created behind the user's back
    assert sources(search(kura, db="good", q="backoff")) == ["notes.md"]
    assert kura.get("/api/health").json()["status"] == "ok"
    log = (kura.home / "kura.log").read_text()
    assert "database bad skipped" in log and "Traceback" not in log


def test_two_daemons_started_at_once_one_wins(kura):
    kura.ok("add", "notes")
    procs = [kura.popen("daemon") for _ in range(2)]
    try:
        # As long as kura's own CLI waits for a daemon it started (two starting at once on a
        # loaded machine each take seconds to import and bind).
        url = wait_until(lambda: (kura.home / "endpoint").exists() and kura.url, timeout=START_TIMEOUT)
        assert url
        kura._remember_pid()
        loser = wait_until(lambda: next((p for p in procs if p.poll() is not None), None))
        assert loser is not None and loser.returncode == 0
        out = loser.stdout.read()
        assert f"kura is already running at {url}" in out
        winner = next(p for p in procs if p is not loser)
        assert winner.poll() is None
        assert kura.get("/api/health").json()["pid"] == winner.pid
        # Two `kura` CLIs at once also agree on one daemon.
        clis = [kura.popen() for _ in range(2)]
        outs = [c.communicate(timeout=60)[0] for c in clis]
        assert all(url in o for o in outs)
        kura.ok("stop")
        assert winner.wait(timeout=30) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def test_two_clis_starting_the_daemon_at_once_say_who_started_it(kura):
    clis = [kura.popen() for _ in range(2)]
    try:
        outs = sorted(c.communicate(timeout=60)[0].splitlines()[0] for c in clis)
        kura._remember_pid()
        url = kura.url
        assert outs == [f"kura running at {url}", f"kura started at {url}"], outs
    finally:
        kura.ok("stop")


def test_port_set_and_clear_restart_a_running_daemon(kura):
    kura.start()
    first = kura.url
    import socket

    with socket.socket() as s:  # a free port for the pinned setting
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = kura.ok("port", "set", str(port))
    assert f"http://127.0.0.1:{port}" in out and kura.url == f"http://127.0.0.1:{port}"
    assert kura.get("/api/health").status_code == 200
    kura.ok("port", "clear")
    assert kura.url != f"http://127.0.0.1:{port}" or kura.url == first
    assert kura.get("/api/health").status_code == 200


def test_pinned_port_in_use_is_a_clear_error(kura):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        kura.ok("port", "set", str(s.getsockname()[1]))
        proc = kura.run()
        assert proc.returncode == 1 and "cannot listen on 127.0.0.1" in proc.stderr


async def _mcp_session(url: str):
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        listed = await session.call_tool("list_rag", {})
        found = await session.call_tool("search_rag", {"db": "notes", "q": "backoff", "limit": "abc"})
        empty = await session.call_tool("search_rag", {"db": "notes", "q": "zzzzqqq"})
        unknown = await session.call_tool("search_rag", {"db": "x", "q": "y"})
        mode = await session.call_tool("search_rag", {"db": "notes", "q": "y", "mode": "vector"})
        return init, tools, listed, found, empty, unknown, mode


def test_remote_mcp_route_over_streamable_http(kura, docs):
    kura.ok("add", "notes", str(docs))
    kura.start()
    with httpx.Client(trust_env=False) as c:
        assert c.post(kura.url + "/mcp", json={}).status_code == 404  # off by default
    out = kura.ok("remote", "enable")  # restarts the running daemon
    assert f"{kura.url}/mcp" in out
    init, tools, listed, found, empty, unknown, mode = anyio.run(_mcp_session, kura.url + "/mcp")
    assert init.server_info.name == "kuradb" and "list_rag" in init.instructions
    assert tools == ["list_rag", "search_rag"]
    assert listed.structured_content == kura.get("/api/list").json()
    assert found.structured_content == search(kura, db="notes", q="backoff").json()
    assert found.structured_content["keyword"][0]["source"] == "notes.md"
    assert empty.structured_content == {} and not empty.is_error
    assert unknown.is_error and unknown.content[0].text == 'invalid argument: "x" not exist'
    assert mode.is_error and "not supported" in mode.content[0].text
    with httpx.Client(trust_env=False) as c:  # the SDK's DNS-rebinding protection stays on
        r = c.post(kura.url + "/mcp", json={}, headers={"Host": "evil.example:80"})
        assert r.status_code == 421
    kura.ok("remote", "disable")
    with httpx.Client(trust_env=False) as c:
        assert c.post(kura.url + "/mcp", json={}).status_code == 404


async def _sse_session(url: str):
    from mcp.client.sse import sse_client

    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        found = await session.call_tool("search_rag", {"db": "notes", "q": "backoff"})
        missing = await session.call_tool("search_rag", {"db": "notes"})
        return init, found, missing


def test_remote_mcp_over_sse_for_inspector(kura, docs):
    """MCP Inspector's SSE mode asks for GET /sse and posts to /messages/."""
    kura.ok("add", "notes", str(docs))
    kura.start()
    out = kura.ok("remote", "enable")  # restarts the running daemon
    assert f"{kura.url}/sse" in out
    for path in ("/sse", "/mcp"):
        init, found, missing = anyio.run(_sse_session, kura.url + path)
        assert init.server_info.name == "kuradb"
        assert found.structured_content["keyword"][0]["source"] == "notes.md"
        assert missing.is_error and missing.content[0].text == "invalid argument: q is required"
    kura.ok("remote", "disable")
    with httpx.Client(trust_env=False) as c:
        assert c.get(kura.url + "/sse").status_code == 404


def test_a_file_named_like_a_standard_module_where_kura_starts_is_never_run(kura, tmp_path):
    """The daemon starts from the current folder: a `logging.py` there must not stand in for the
    standard library's (it would run, and the daemon would never come up)."""
    here, marker = tmp_path / "here", tmp_path / "ran"
    here.mkdir()
    (here / "logging.py").write_text(f"open({str(marker)!r}, 'a').write('ran')\n"
                                     "raise ImportError('a file of this folder, not the standard library')\n")
    proc = kura.run(cwd=here)
    kura._remember_pid()
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert kura.get("/api/health").json()["status"] == "ok"
    assert not marker.exists()
