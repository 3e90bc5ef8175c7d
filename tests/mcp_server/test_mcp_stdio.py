"""``memstrata mcp`` as a real subprocess, driven by the SDK's own stdio client."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from memstrata.indexer.workspace import Workspace
from .mcp_helpers import (
    LOGIN_QUERY, PROTOCOL_VERSIONS, TOOLS, memstrata_command, stdio_session, text_of, wait_ready,
    wait_until,
)
from memstrata import __version__


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
def test_handshake_tools_and_calls(project: Path, errlog, version: str):
    async def main():
        async with stdio_session(project, errlog, version) as (s, init):
            assert init.protocol_version == version
            assert init.server_info.name == "memstrata"
            assert init.server_info.version == __version__
            assert "context_query" in init.instructions and "index_status" in init.instructions

            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert tuple(sorted(tools)) == TOOLS
            cq = tools["context_query"].input_schema
            assert cq["required"] == ["query"]
            assert {k: (v["type"], v.get("default")) for k, v in cq["properties"].items()} == {
                "query": ("string", None), "max_tokens": ("integer", 4096), "include_tests": ("boolean", False)}
            assert tools["index_status"].input_schema["properties"] == {}
            assert tools["savings_summary"].input_schema["properties"] == {}
            assert "the tokens of the complete text of every file in `sources`" in tools["context_query"].description

            status = await wait_ready(s)
            assert status["project"] == str(project)
            assert status["files_indexed"] == 10
            assert status["last_indexed"].startswith("20")
            assert status["index_size_mb"] > 0

            r = await s.call_tool("context_query", {"query": LOGIN_QUERY, "max_tokens": 2048})
            assert not r.is_error, text_of(r)
            out = r.structured_content
            assert set(out) == {"context", "tokens", "baseline_tokens", "sources"}
            assert json.loads(text_of(r)) == out
            assert "def login" in out["context"]
            assert out["sources"][0] == "app/auth/service.py"
            assert "app/routes.py" in out["sources"]  # a caller
            assert 0 < out["tokens"] <= 2048
            assert out["baseline_tokens"] > 0

            r = await s.call_tool("savings_summary", {})
            assert not r.is_error, text_of(r)
            assert json.loads(text_of(r)) == r.structured_content
            assert set(r.structured_content) == {
                "session_tokens_saved", "session_dollar_saved", "cycle_tokens_saved", "cycle_dollar_saved",
                "provider_rate_per_token", "recall", "precision"}
            # A fresh project: the ledger is empty, so nothing was saved and nothing is measured.
            assert r.structured_content["session_tokens_saved"] == 0
            assert r.structured_content["recall"] is None

    anyio.run(main)


def test_edit_is_reflected_and_errors_keep_the_session(project: Path, errlog):
    async def main():
        async with stdio_session(project, errlog) as (s, _init):
            await wait_ready(s)
            service = project / "app" / "auth" / "service.py"
            service.write_text(service.read_text() + (
                "\n\ndef rotate_api_token(user: str) -> str:\n"
                "    \"\"\"Issue a fresh token.\"\"\"\n"
                "    return hash_password(user)[:16]\n"))

            async def reflected():
                r = await s.call_tool("context_query", {"query": "rotate_api_token"})
                return not r.is_error and "def rotate_api_token" in r.structured_content["context"]

            assert await wait_until(reflected, timeout=30), "the edit never reached context_query"

            r = await s.call_tool("no_such_tool", {})
            assert r.is_error and "Unknown tool" in text_of(r)

            for args, expected in [
                ({"query": ""}, "query is empty"),
                ({"query": "   "}, "query is empty"),
                ({"query": "login", "max_tokens": "abc"}, "max_tokens must be an integer"),
                ({"query": "login", "max_tokens": -1}, "max_tokens must be at least 1"),
                ({"query": "login", "max_tokens": 0}, "max_tokens must be at least 1"),
                ({"query": "login", "include_tests": "maybe"}, "include_tests must be true or false"),
                # Rejected by the SDK's own validation, worded by PlainMCPServer.
                ({"max_tokens": 100}, "query is required"),
                ({"query": 5}, "query must be a string, got an integer"),
            ]:
                r = await s.call_tool("context_query", args)
                assert r.is_error, args
                assert expected in text_of(r)
                assert "Traceback" not in text_of(r) and "pydantic" not in text_of(r)

            r = await s.call_tool("context_query", {"query": "login", "max_tokens": "300"})
            assert not r.is_error and r.structured_content["tokens"] <= 300

            # Still alive after all that, and the index settles (a watcher event of the edit that
            # comes late on a loaded machine may say "indexing" for a moment first).
            await wait_ready(s)

    anyio.run(main)


WRONG_TYPES = [  # every wrong type is answered with what it got, as docs/mcp.md words it
    ("context_query", {"query": "login", "max_tokens": 100.5}, "max_tokens must be an integer, got a number"),
    ("context_query", {"query": "login", "max_tokens": True}, "max_tokens must be an integer, got true"),
    ("context_query", {"query": "login", "max_tokens": None}, "max_tokens must be an integer, got null"),
    ("context_query", {"query": "login", "max_tokens": [1]}, "max_tokens must be an integer, got an array"),
    ("context_query", {"query": "login", "max_tokens": "abc"}, "max_tokens must be an integer, got 'abc'"),
    ("context_query", {"query": "login", "include_tests": "maybe"},
     "include_tests must be true or false, got a string"),
    ("context_query", {"query": "login", "include_tests": None}, "include_tests must be true or false, got null"),
    ("context_query", {"query": None}, "query must be a string, got null"),
    ("context_query", {"query": False}, "query must be a string, got false"),
    ("context_query", {"max_tokens": 100}, "query is required"),
    ("find_symbol", {"name": None}, "name must be a string, got null"),
    ("find_symbol", {"name": "login", "include_body": 3}, "include_body must be true or false, got an integer"),
    ("find_symbol", {"name": "login", "max_results": True}, "max_results must be an integer, got true"),
    ("find_symbol", {"name": "login", "max_results": 2.5}, "max_results must be an integer, got a number"),
    ("find_symbol", {"name": "login", "path": 5}, "path must be a string, got an integer"),
    ("find_symbol", {"name": "login", "kind": 5},
     "kind must be one of function, method, class, interface, struct, enum, type, constant, module; "
     "got an integer"),
    ("find_references", {"symbol": None}, "symbol must be a string, got null"),
    ("file_outline", {"path": None}, "path must be a string, got null"),
    ("file_outline", {"path": "app/auth/service.py", "depth": None}, "depth must be an integer, got null"),
]


def test_every_wrong_type_says_what_it_got(project: Path, errlog):
    async def main():
        async with stdio_session(project, errlog) as (s, _init):
            await wait_ready(s)
            for tool, args, expected in WRONG_TYPES:
                r = await s.call_tool(tool, args)
                assert r.is_error and text_of(r) == expected, (tool, args, text_of(r))

    anyio.run(main)


def test_without_a_watcher_files_changed_or_deleted_since_indexed_are_named(project: Path, errlog):
    """The four fields stay exactly the reference's; the agent is told, in a second text item,
    that what it sees of a file is the indexed text, not what the file holds now."""
    async def main():
        async with stdio_session(project, errlog, extra_args=("--no-watch",)) as (s, _init):
            await wait_ready(s)
            r = await s.call_tool("context_query", {"query": LOGIN_QUERY})
            assert [c.type for c in r.content] == ["text"]  # nothing to say while the files are as indexed
            service = project / "app" / "auth" / "service.py"
            service.write_text(service.read_text() + "\n# edited\n")
            routes = project / "app" / "routes.py"
            routes.unlink()
            r = await s.call_tool("context_query", {"query": LOGIN_QUERY})
            assert not r.is_error and set(r.structured_content) == {"context", "tokens", "baseline_tokens", "sources"}
            assert json.loads(text_of(r)) == r.structured_content
            assert {"app/auth/service.py", "app/routes.py"} <= set(r.structured_content["sources"])
            notes = r.content[1].text
            assert "app/auth/service.py changed on disk since indexed: shown as indexed" in notes
            assert "app/routes.py deleted since indexed" in notes

    anyio.run(main)


def test_index_in_error_state(project: Path, errlog):
    async def main():
        async with stdio_session(project, errlog) as (s, _init):
            await wait_ready(s)
            # What a failed run in another process leaves behind.
            with Workspace.open(project) as other:
                other.store.set_meta("status", "error")
            r = await s.call_tool("index_status", {})
            assert r.structured_content["status"] == "error"
            r = await s.call_tool("context_query", {"query": LOGIN_QUERY})
            assert r.is_error
            message = text_of(r)
            assert "error state" in message and "memstrata index" in message
            assert "Traceback" not in message

    anyio.run(main)


def _rpc(proc: subprocess.Popen, message: dict | str) -> None:
    proc.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    proc.stdin.flush()


def test_malformed_json_lines_are_answered_and_the_session_continues(project: Path, tmp_path: Path):
    err = tmp_path / "raw.stderr"
    with err.open("w") as errf:
        proc = subprocess.Popen([*memstrata_command(), "mcp", "--project", str(project)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errf, text=True)
        try:
            _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            init = json.loads(proc.stdout.readline())
            assert init["result"]["protocolVersion"] == "2025-06-18"
            _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _rpc(proc, "this is not json {")
            _rpc(proc, '{"jsonrpc": "2.0", "id": 2, "method": "tools/ca')
            _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"})
            replies = [json.loads(proc.stdout.readline()) for _ in range(3)]
            assert sorted((r["id"], r["error"]["code"]) for r in replies if r["id"] is None) == [
                (None, -32700), (None, -32700)]
            # The message cut short is placed on its own line, not on the one after it.
            assert replies[1]["error"]["message"] == (
                "Parse error: Unterminated string starting at (line 1, column 39)")
            assert replies[-1]["id"] == 3 and replies[-1]["error"]["code"] == -32601
            _rpc(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                        "params": {"name": "context_query", "arguments": {"query": LOGIN_QUERY}}})
            reply = json.loads(proc.stdout.readline())
            assert reply["id"] == 4
            assert "def login" in reply["result"]["structuredContent"]["context"]
            proc.stdin.close()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    assert "Traceback" not in err.read_text()


def test_bad_project_is_a_clear_error(tmp_path: Path):
    missing = tmp_path / "nope"
    done = subprocess.run([*memstrata_command(), "mcp", "--project", str(missing)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "project folder not found" in done.stderr and "Traceback" not in done.stderr
