"""Kura never reads, writes or serves outside its home and the folders a user
registered (issue 15, items 2, 3, 4 and Kura's part of 9), on real ``kura``
processes: the CLI, ``kura mcp`` over stdio and the daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from memstrata.kura.store import KuraDatabase

from .conftest import KURA, KuraEnv, wait_until

pytestmark = pytest.mark.timeout(180)


def tree(root: Path) -> set[str]:
    """Every path below ``root``, relative (what a stray file would show up in)."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


async def _mcp_calls(env: dict, calls: list[tuple[str, dict]], errlog) -> list:
    params = StdioServerParameters(command=KURA, args=["mcp"], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [await session.call_tool(name, args) for name, args in calls]


def mcp_calls(kura: KuraEnv, calls, tmp_path: Path) -> list:
    with open(tmp_path / "kura-mcp.stderr", "a") as errlog:
        return anyio.run(_mcp_calls, kura.env, calls, errlog)


def make_victim(path: Path, word: str) -> None:
    """A Kura-shaped database somewhere else on the machine (another user's, say)."""
    path.parent.mkdir(parents=True)
    with KuraDatabase(path) as store:
        from memstrata.kura import store as kura_store

        rec = kura_store.SourceRecord("diary.md", 1, 1, "h", "prose", 0.0)
        with store.write() as conn:
            kura_store.replace_source(conn, rec, [f"the {word} is hidden here"])


# -- item 2: path traversal through names and the home -------------------------------------


@pytest.mark.parametrize("name", ["x%2f..%2f..%2fother%2fhome", "a..b", "..", "50%", "x/../y", "bell\x07"])
def test_database_names_that_could_leave_the_home_are_refused(kura, docs, name):
    kura.ok("add", "x")  # so that "x/.." would resolve
    proc = kura.run("add", name, str(docs))
    assert proc.returncode == 1, proc.stdout
    assert "invalid database name" in proc.stderr and "Traceback" not in proc.stderr
    assert [e["db"] for e in json.loads((kura.home / "db.json").read_text())] == ["x"]


def test_overlong_name_is_refused(kura):
    proc = kura.run("add", "n" * 101)
    assert proc.returncode == 1 and "longer than 100 characters" in proc.stderr
    proc = kura.run("add", "€" * 100)  # 100 characters but 300 bytes
    assert proc.returncode == 1 and "longer than" in proc.stderr


def test_percent_encoded_name_never_reads_another_database(kura, tmp_path):
    """A name that percent-decodes to a path elsewhere, planted in db.json by hand,
    is refused by the daemon and by ``kura mcp``; the other database stays unread."""
    make_victim(tmp_path / "other" / "home" / "data.db", "zeppelin")
    kura.ok("add", "x")
    planted = "x%2f..%2f..%2fother%2fhome"
    (kura.home / planted).mkdir()
    with KuraDatabase(kura.home / planted / "data.db"):
        pass  # an empty Kura store, so only the decoded path could find the word
    registry = json.loads((kura.home / "db.json").read_text())
    registry.append({"db": planted, "createAt": registry[0]["createAt"]})
    (kura.home / "db.json").write_text(json.dumps(registry))

    listed, found = mcp_calls(kura, [("list_rag", {}), ("search_rag", {"db": planted, "q": "zeppelin"})], tmp_path)
    assert listed.structured_content["loaded"] == ["x"]
    assert found.is_error and "invalid database name" in found.content[0].text
    assert "zeppelin" not in found.content[0].text

    kura.start()
    resp = kura.get("/api/search", db=planted, q="zeppelin")
    assert resp.status_code == 400 and "invalid database name" in resp.json()["error"]
    assert "not loaded" in kura.ok("list")


def test_store_read_only_open_takes_the_path_literally(tmp_path):
    """storage.Store: ``%2f`` in a folder name is a folder name, never a separator."""
    make_victim(tmp_path / "victim" / "data.db", "walrus")
    (tmp_path / "x").mkdir()
    literal = tmp_path / "x%2f..%2fvictim" / "data.db"
    literal.parent.mkdir()
    with KuraDatabase(literal) as store:
        store.set_meta("who", "literal")
    with KuraDatabase(literal, readonly=True) as store:
        assert store.get_meta("who") == "literal"


@pytest.mark.parametrize("home_name", ["home#frag", "home?mode=rwc", "home%25x", "h#o?m%25e"])
def test_odd_home_folder_keeps_read_only_opens_read_only(tmp_path, docs, home_name):
    """KURA_HOME with '#', '?' or '%25': every surface works and no stray file appears."""
    base = tmp_path / "base"
    base.mkdir()
    kura = KuraEnv(base / home_name)
    try:
        kura.ok("add", "notes", str(docs))
        before = tree(base)
        listing = kura.ok("list")  # opens data.db read-only (no daemon)
        assert "notes\t" in listing and "files" in listing
        (found,) = mcp_calls(kura, [("search_rag", {"db": "notes", "q": "backoff"})], tmp_path)
        assert not found.is_error, found.content[0].text
        assert found.structured_content["keyword"][0]["source"] == "notes.md"
        kura.start()
        assert kura.get("/api/search", db="notes", q="backoff").json()["keyword"][0]["source"] == "notes.md"
        kura.ok("stop")
        after = tree(base)
        # Only the daemon's own files may appear, and only inside the home.
        new = {p for p in after - before if not p.startswith(home_name + os.sep)}
        assert new == set(), f"stray files outside the home: {sorted(new)}"
        assert sorted(os.listdir(base)) == [home_name]
    finally:
        kura.cleanup()


# -- item 3: symlinks leading outside the folder ------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.md").write_text("The nebulosity passphrase is hunter2.", encoding="utf-8")
    return secret


def test_symlink_out_of_the_folder_is_skipped_and_never_served(kura, docs, outside, tmp_path):
    (docs / "leak.md").symlink_to(outside / "secret.md")
    (docs / "leakdir").symlink_to(outside, target_is_directory=True)
    (docs / "inside.txt").write_text("A marmot lives here.", encoding="utf-8")
    (docs / "alias.md").symlink_to(docs / "inside.txt")  # inside: indexed like any file
    out = kura.ok("add", "notes", str(docs))
    assert "2 symlink_outside_project" in out

    found, alias = mcp_calls(kura, [("search_rag", {"db": "notes", "q": "nebulosity passphrase"}),
                                    ("search_rag", {"db": "notes", "q": "marmot"})], tmp_path)
    assert found.structured_content == {}
    assert {g["source"] for g in alias.structured_content["keyword"]} == {"inside.txt", "alias.md"}

    kura.start()
    assert kura.get("/api/search", db="notes", q="nebulosity").json() == {}
    status = kura.get("/api/status").json()["databases"][0]
    assert status["skipped"]["symlink_outside_project"] == 2
    # Made while the daemon watches: the watcher's path is refused the same way.
    (docs / "late.md").symlink_to(outside / "secret.md")
    (docs / "fresh.md").write_text("A pangolin appears.", encoding="utf-8")
    assert wait_until(lambda: kura.get("/api/search", db="notes", q="pangolin").json() != {})
    assert kura.get("/api/search", db="notes", q="nebulosity").json() == {}
    # A file that was indexed and is now a symlink leading outside drops out.
    (docs / "notes.md").unlink()
    (docs / "notes.md").symlink_to(outside / "secret.md")
    assert wait_until(lambda: kura.get("/api/search", db="notes", q="jitter").json() == {})
    assert kura.get("/api/search", db="notes", q="nebulosity").json() == {}


# -- item 9: skipped folders are counted ------------------------------------------------------------


def test_skipped_folders_and_files_are_counted(kura, docs):
    for folder in ("build", "dist", "vendor", "node_modules"):
        (docs / folder).mkdir()
        (docs / folder / "generated.md").write_text("generated okapi text", encoding="utf-8")
    out = kura.ok("add", "notes", str(docs))
    # docs also holds image.png (binary extension) and blob.dat (NUL bytes).
    assert "4 excluded_dir" in out and "2 binary" in out, out
    assert "4 excluded_dir" in kura.ok("list")
    kura.start()
    status = kura.get("/api/status").json()["databases"][0]
    assert status["skipped"] == {"binary": 2, "excluded_dir": 4}
    assert kura.get("/api/search", db="notes", q="okapi").json() == {}


# -- item 4: foreign Origin and Host on every route ------------------------------------------------


ROUTES = [("GET", "/api/health"), ("GET", "/api/list"), ("GET", "/api/search?db=notes&q=backoff"),
          ("POST", "/api/reload"), ("GET", "/api/status"), ("POST", "/mcp"), ("GET", "/sse"),
          ("GET", "/nonexistent")]


def test_daemon_refuses_foreign_origin_and_host_everywhere(kura, docs):
    kura.ok("add", "notes", str(docs))
    kura.ok("remote", "enable")
    url = kura.start()
    port = url.rsplit(":", 1)[1]
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
        for method, path in ROUTES:
            for origin in ("http://evil.example.com", "null", "http://127.0.0.1.evil.example:80",
                           f"http://localhost.evil.example:{port}", "file://"):
                r = c.request(method, path, headers={"Origin": origin})
                assert r.status_code == 403, (method, path, origin, r.status_code)
            for host in ("evil.example.com", f"evil.example.com:{port}", "127.0.0.1.nip.io"):
                r = c.request(method, path, headers={"Host": host})
                assert r.status_code == 421, (method, path, host, r.status_code)
        # A foreign Origin beside a local one is refused whichever comes first (httpx sends both).
        for pair in ([("Origin", url), ("Origin", "http://evil.example.com")],
                     [("Origin", "http://evil.example.com"), ("Origin", url)]):
            assert c.get("/api/status", headers=httpx.Headers(pair)).status_code == 403, pair
        # Local pages and tools that send no Origin are served.
        for origin in (None, url, f"http://localhost:{port}", f"http://[::1]:{port}"):
            r = c.post("/api/reload", headers={"Origin": origin} if origin else {})
            assert r.status_code == 200, origin
        assert c.get("/api/search", params={"db": "notes", "q": "backoff"},
                     headers={"Origin": url}).json()["keyword"][0]["source"] == "notes.md"
