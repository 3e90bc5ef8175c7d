"""``memstrata mcp`` spoken to in raw JSON-RPC lines (issue 15, item 7): every
malformed message gets the answer JSON-RPC 2.0 requires, and at end of input
every request already read is answered before the process exits."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.conftest import many_small_files

from .mcp_helpers import LOGIN_QUERY, child_env, memstrata_command
from .raw_jsonrpc import INIT, RawServer, call, check_malformed_session, check_stops_on_signal

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def server(project: Path, tmp_path: Path):
    srv = RawServer([*memstrata_command(), "mcp", "--project", str(project), "--no-watch"],
                    env=child_env(), cwd=str(project), stderr=tmp_path / "mcp.stderr")
    yield srv
    srv.stop()
    assert "Traceback" not in (tmp_path / "mcp.stderr").read_text()


def test_malformed_messages_are_answered_and_the_session_lives(server: RawServer):
    check_malformed_session(server)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_while_stdin_stays_open(server: RawServer, signum):
    check_stops_on_signal(server, signum, call(1, "index_status", {}))


def test_eof_right_after_a_call_still_answers_it(server: RawServer):
    """`printf '<initialize>\\n<tools/call>\\n' | memstrata mcp` on a project never indexed:
    the call waits for the first build, and its answer is written before the exit."""
    server.send(INIT, call(1, "context_query", {"query": LOGIN_QUERY}))
    replies = server.close_and_collect()
    assert [r["id"] for r in replies] == [0, 1]
    result = replies[1]["result"]
    assert not result.get("isError"), result
    assert "def login" in result["structuredContent"]["context"]
    assert server.proc.returncode == 0


def test_wrong_argument_types_get_one_sentence(server: RawServer):
    server.send(INIT)
    server.replies_until(0)
    cases = {
        "t1": ({"query": 5}, "query must be a string, got an integer"),
        "t2": ({"query": ["login"]}, "query must be a string, got an array"),
        "t3": ({}, "query is required"),
        "t4": ({"query": None, "max_tokens": 100}, "query must be a string, got null"),
        "t5": ({"query": "login", "max_tokens": [1]}, "max_tokens must be an integer, got an array"),
    }
    server.send(*(call(ident, "context_query", args) for ident, (args, _) in cases.items()))
    got = {}
    while len(got) < len(cases):
        r = server.reply()
        got[r["id"]] = r
    for ident, (_args, sentence) in cases.items():
        result = got[ident]["result"]
        text = result["content"][0]["text"]
        assert result["isError"] and text.startswith(sentence), (ident, text)
        assert "\n" not in text and "pydantic" not in text and "validation error" not in text, text
    assert json.loads(server.raw_lines[-1])  # the wire stayed clean JSON


def test_a_call_whose_arguments_are_no_object_is_told_so(server: RawServer):
    server.send(INIT)
    server.replies_until(0)
    server.send({"jsonrpc": "2.0", "id": "a", "method": "tools/call",
                 "params": {"name": "context_query", "arguments": ["login"]}},
                {"jsonrpc": "2.0", "id": "n", "method": "tools/call", "params": {"name": ["context_query"]}})
    got = {}
    while len(got) < 2:
        r = server.reply()
        got[r["id"]] = r["error"]
    assert got["a"] == {"code": -32602, "message":
                        "Invalid params: tools/call arguments must be an object of argument names to values"}
    assert got["n"] == {"code": -32602, "message": "Invalid params: tools/call needs the tool's name, a string"}


def test_oversized_line_is_refused_and_skipped(server: RawServer):
    server.send(INIT)
    server.replies_until(0)
    huge = b'{"jsonrpc": "2.0", "id": "huge", "method": "tools/call", "params": {"name": "context_query", ' \
           b'"arguments": {"query": "' + b"x" * (5 * 1024 * 1024) + b'"}}}'
    # The same with its id after the params: that id lies beyond what is read of the line.
    late = b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "context_query", ' \
           b'"arguments": {"query": "' + b"x" * (5 * 1024 * 1024) + b'"}}, "id": "late"}'
    server.send(huge, late, {"jsonrpc": "2.0", "id": "after", "method": "ping"})
    replies = server.replies_until("after")
    # The id written before the params is answered under (its sender awaits it); the other cannot be.
    assert [(r["id"], r["error"]["code"]) for r in replies if "error" in r] == [("huge", -32600), (None, -32600)]
    assert all("larger than 4 MiB" in r["error"]["message"] for r in replies if "error" in r)


def test_sigterm_during_the_first_index_exits_cleanly(tmp_path: Path):
    """Stopped during its first index, the server exits 0 with its worker processes ended: no
    traceback and no leaked semaphores reported (that the run stops at its next batch is
    the in-process test below)."""
    import time

    root = many_small_files(tmp_path / "big", packages=80)
    stderr = tmp_path / "mcp.stderr"
    srv = RawServer([*memstrata_command(), "mcp", "--project", str(root)], env=child_env(), cwd=str(root),
                    stderr=stderr)
    try:
        srv.send(INIT)  # the first session starts the catch-up
        srv.replies_until(0)
        time.sleep(1.0)  # under way: 8,000 files take many seconds on two cores
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=60) == 0
    finally:
        srv.stop()
    text = stderr.read_text()
    assert "Traceback" not in text and "resource_tracker" not in text and "leaked" not in text, text
    assert "indexed 8000 files" not in text  # stopped, not finished


def test_a_cancelled_catch_up_stops_between_batches_and_is_left_interrupted(tmp_path: Path):
    from memstrata.indexer.workspace import Workspace
    from memstrata.mcp_server import IndexWarmup

    root = many_small_files(tmp_path / "big", packages=40, functions=20)
    with Workspace.open(root) as ws:
        seen = []

        def progress(p) -> None:  # the server shuts down once two batches are in
            seen.append(p.done)
            if len(seen) == 2:
                warmup.cancel()

        warmup = IndexWarmup(ws, watch=False, progress=progress)
        warmup.start()
        assert warmup.join(timeout=120)
        assert warmup.error is None and 0 < ws.files_indexed() < 4000
        st = ws.status()
        assert st.status == "stale" and "interrupted" in st.message, st
        assert ws.index().files == 4000


def test_an_index_of_a_newer_memstrata_is_said_on_every_call(project: Path, tmp_path: Path):
    import sqlite3
    import subprocess

    assert subprocess.run([*memstrata_command(), "index", str(project)], env=child_env(),
                          capture_output=True).returncode == 0
    with sqlite3.connect(project / ".memstrata" / "index.db") as db:
        db.execute("PRAGMA user_version = 999")
    srv = RawServer([*memstrata_command(), "mcp", "--project", str(project)], env=child_env(), cwd=str(project),
                    stderr=tmp_path / "mcp.stderr")
    try:
        srv.send(INIT)
        srv.replies_until(0)
        srv.send(call(1, "index_status", {}))
        replies = {r["id"]: r for r in srv.replies_until(1)}
        srv.send(call(2, "context_query", {"query": LOGIN_QUERY}))
        replies.update({r["id"]: r for r in srv.replies_until(2)})
    finally:
        srv.stop()
    for ident in (1, 2):
        result = replies[ident]["result"]
        assert result["isError"] and "newer" in result["content"][0]["text"], result
        assert str(tmp_path) not in result["content"][0]["text"].replace(str(project), "")


def test_a_request_before_initialize_and_a_bad_initialize_are_told_what_is_wrong(server: RawServer):
    info = {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    server.send({"jsonrpc": "2.0", "id": "early", "method": "tools/list"},
                {"jsonrpc": "2.0", "id": "v42", "method": "initialize", "params": {"protocolVersion": 42, **info}},
                {"jsonrpc": "2.0", "id": "no-info", "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                                                                                       "capabilities": {}}},
                INIT, {"jsonrpc": "2.0", "id": "late", "method": "tools/list"},
                b'\xef\xbb\xbf{"jsonrpc": "2.0", "id": "bom", "method": "ping"}')
    replies = {r["id"]: r for r in server.close_and_collect()}
    assert replies["early"]["error"]["code"] == -32600
    assert "not initialized" in replies["early"]["error"]["message"]
    assert replies["v42"]["error"]["code"] == -32602 and "protocolVersion" in replies["v42"]["error"]["message"]
    assert "clientInfo" in replies["no-info"]["error"]["message"]
    assert replies[0]["result"]["serverInfo"]["name"] == "memstrata"
    assert any(t["name"] == "context_query" for t in replies["late"]["result"]["tools"])
    assert replies["bom"]["result"] == {}  # a byte-order mark before a message is skipped
