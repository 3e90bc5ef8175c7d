"""find_symbol, find_references and file_outline over real MCP sessions: stdio
(`memstrata mcp`, with a file edited while it runs) and Streamable HTTP."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import anyio
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memstrata.indexer.workspace import Workspace
from memstrata.mcp_server import IndexWarmup, build_server, mcp_http_app

from .mcp_helpers import stdio_session, text_of, wait_ready, wait_until

LOGIN = "app/auth/service.py::AuthService.login"


def _file_lines(path: Path, start: int, end: int) -> str:
    return "".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[start - 1 : end]).rstrip("\n")


async def _check_answers(s: ClientSession, project: Path) -> None:
    tools = {t.name: t for t in (await s.list_tools()).tools}
    assert tools["find_symbol"].input_schema["required"] == ["name"]
    assert tools["find_references"].input_schema["required"] == ["symbol"]
    assert tools["file_outline"].input_schema["required"] == ["path"]
    for name in ("find_symbol", "find_references", "file_outline"):
        assert tools[name].annotations.read_only_hint and tools[name].output_schema

    r = await s.call_tool("find_symbol", {"name": "AuthService.login", "include_body": True})
    assert not r.is_error, text_of(r)
    assert json.loads(text_of(r)) == r.structured_content
    [sym] = r.structured_content["symbols"]
    assert (sym["symbol"], sym["kind"], sym["start_line"], sym["end_line"]) == (LOGIN, "method", 20, 29)
    assert sym["body"] == _file_lines(project / "app/auth/service.py", 20, 29)

    r = await s.call_tool("find_references", {"symbol": "AuthService.login"})
    assert not r.is_error, text_of(r)
    got = [(x["path"], x["line"], x["kind"], x["symbol"]) for x in r.structured_content["references"]]
    assert got == [("app/routes.py", 11, "call", "app/routes.py::login_route"),
                   ("app/session.py", 15, "call", "app/session.py::SessionMiddleware.__call__"),
                   ("tests/test_auth.py", 7, "call", "tests/test_auth.py::test_login_accepts_right_password")]

    r = await s.call_tool("file_outline", {"path": "app/auth/service.py", "depth": 1})
    assert not r.is_error, text_of(r)
    assert r.structured_content["language"] == "python"
    assert [e["symbol"].split("::")[1] for e in r.structured_content["symbols"]] == [
        "MAX_ATTEMPTS", "InvalidCredentials", "AuthService"]


BAD = [
    ("find_symbol", {}, "name is required"),
    ("find_symbol", {"name": 5}, "name must be a string, got an integer"),
    ("find_symbol", {"name": ""}, "name is empty: give a symbol name such as 'AuthService.login', or the start "
                                  "of one followed by '*'"),
    ("find_symbol", {"name": "logn"}, "no symbol matches 'logn'; did you mean login?"),
    ("find_symbol", {"name": "login", "path": "/etc"}, "path is outside the project"),
    ("find_symbol", {"name": "login", "max_results": "lots"}, "max_results must be an integer, got 'lots'"),
    ("find_references", {"symbol": "__init__"}, "symbol '__init__' is ambiguous"),
    ("file_outline", {"path": "app/nothing.py"}, "app/nothing.py is not an indexed file of this project "
                                                 "(check the path, or run memstrata index)"),
    ("file_outline", {"path": "../../etc/passwd"}, "path is outside the project"),
    # Control characters of an argument are escaped, never echoed raw.
    ("file_outline", {"path": "args.go\u0000"}, "args.go\\x00 is not an indexed file of this project"),
    ("find_symbol", {"name": "login", "path": "app\u001b[2J\n"},
     "app\\x1b[2J is not an indexed file or folder of this project"),
    ("find_symbol", {"name": "lo\u0000gin"}, "no symbol matches 'lo\\x00gin'"),
]


async def _check_bad_input(s: ClientSession) -> None:
    for tool, args, expected in BAD:
        r = await s.call_tool(tool, args)
        assert r.is_error, (tool, args)
        text = text_of(r)
        assert text.startswith(expected), text
        assert text.isprintable() and "Traceback" not in text and "pydantic" not in text
    r = await s.call_tool("find_symbol", {"name": "_*", "max_results": 0})
    assert not r.is_error and len(r.structured_content["symbols"]) == 1 and r.structured_content["truncated"]


def test_navigation_over_stdio_follows_an_edit(project: Path, tmp_path: Path):
    async def main():
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_session(project, errlog) as (s, _init):
                await wait_ready(s)
                await _check_answers(s, project)
                await _check_bad_input(s)

                service = project / "app/auth/service.py"
                service.write_text("# one\n# two\n" + service.read_text(encoding="utf-8"), encoding="utf-8")
                # Answered right away (the file is read again) and after the watcher
                # caught up alike: the range is always the file's current one.
                r = await s.call_tool("find_symbol", {"name": LOGIN, "include_body": True})
                [sym] = r.structured_content["symbols"]
                assert (sym["start_line"], sym["end_line"]) == (22, 31)
                assert sym["body"] == _file_lines(service, 22, 31)

                async def caught_up():
                    r = await s.call_tool("index_status", {})
                    return r.structured_content["status"] == "ready"

                await wait_until(caught_up)
                r = await s.call_tool("find_references", {"symbol": "app/util/crypto.py::hash_password"})
                lines = [(x["path"], x["line"]) for x in r.structured_content["references"]]
                assert ("app/auth/service.py", 27) in lines and ("app/auth/service.py", 5) in lines
                r = await s.call_tool("file_outline", {"path": "app/auth/service.py"})
                assert r.structured_content["symbols"][0]["start_line"] == 8

    anyio.run(main)


def test_navigation_over_streamable_http(project: Path):
    ws = Workspace.open(project)
    warmup = IndexWarmup(ws, watch=False)
    app = mcp_http_app(build_server(ws, warmup=warmup))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)

    async def main():
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                ClientSession(read, write) as s:
            await s.initialize()
            await wait_ready(s)
            await _check_answers(s, project)
            await _check_bad_input(s)

    try:
        anyio.run(main)
    finally:
        uv.should_exit = True
        thread.join(timeout=15)
        sock.close()
        warmup.join(timeout=30)
        ws.close()
