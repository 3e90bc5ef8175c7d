"""An index file SQLite cannot read (overwritten, damaged): every command says in one line
that the index is unreadable and how to rebuild it; a tool call on an index damaged while
``memstrata mcp`` serves it gets the same as its error, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..mcp_server.raw_jsonrpc import INIT, INITIALIZED, RawServer, call
from .serve_helpers import copy_project

REBUILD = "delete .memstrata/index.db and run memstrata index to rebuild it"


@pytest.fixture
def indexed(tmp_path, cli_env, memstrata_exe):
    project = copy_project(tmp_path / "proj")
    subprocess.run([memstrata_exe, "index", str(project)], env=cli_env, check=True, capture_output=True,
                   timeout=120)
    return project


@pytest.mark.parametrize("args", [("status",), ("status", "--json"), ("query", "AuthService.login"),
                                  ("index",), ("mcp",), ("savings",)])
def test_garbage_index_is_one_clear_line(indexed, cli_env, memstrata_exe, args):
    db = indexed / ".memstrata" / "index.db"
    db.write_bytes(b"garbage\n")
    res = subprocess.run([memstrata_exe, *args, str(indexed)], env=cli_env, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 2 and res.stdout == "", res.stdout
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert lines == [f"memstrata: the index .memstrata/index.db is unreadable (file is not a database); {REBUILD}"]
    assert db.read_bytes() == b"garbage\n"  # left for the user to look at


def test_index_damaged_while_serving(indexed, cli_env, memstrata_exe, tmp_path):
    server = RawServer([memstrata_exe, "mcp", "--no-watch", str(indexed)], env=cli_env,
                       stderr=tmp_path / "mcp.stderr")
    try:
        server.send(INIT)
        assert "result" in server.replies_until(0)[-1]
        server.send(INITIALIZED)
        # The server's catch-up run starts with it; the index is damaged once that is over.
        deadline = time.monotonic() + 60
        for rid in range(100, 10_000):
            server.send(call(rid, "index_status", {}))
            if server.replies_until(rid)[-1]["result"]["structuredContent"]["status"] == "ready":
                break
            assert time.monotonic() < deadline, "the catch-up run never finished"
            time.sleep(0.05)
        db = indexed / ".memstrata" / "index.db"
        size = db.stat().st_size
        with open(db, "r+b") as f:  # every page but the header overwritten in place
            f.seek(4096)
            f.write(b"garbage!" * ((size - 4096) // 8))
        server.send(call(2, "context_query", {"query": "something nobody wrote"}))
        result = server.replies_until(2)[-1]["result"]
        assert result["isError"], result
        text = result["content"][0]["text"]
        assert text.startswith("The index of this project is unreadable (") and REBUILD in text, text
        server.close_and_collect()
        assert server.proc.returncode == 0
    finally:
        server.stop()
    assert "Traceback" not in (tmp_path / "mcp.stderr").read_text()


def test_damaged_strata_database_is_not_called_an_index(tmp_path):
    """The Store's own message names the file, not the code index: `strata` passes it on."""
    db = tmp_path / "db"
    db.mkdir()
    (db / "strata.db").write_bytes(b"garbage\n")
    strata = str(Path(sys.executable).parent / "strata")
    res = subprocess.run([strata, str(db), "mcp", "serve"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines() == ["error: [failed_precondition.cli.open]: strata.db is unreadable "
                                       "(file is not a database)"]
