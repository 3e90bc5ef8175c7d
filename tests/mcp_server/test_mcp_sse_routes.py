"""MCP Inspector's SSE mode: ``GET /sse`` + ``POST /messages/`` beside ``/mcp`` on a
real ``memstrata serve``, driven by the SDK's own SSE client (issue 14)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from .mcp_helpers import LOGIN_QUERY, TOOLS, child_env, memstrata_command, text_of, wait_ready

pytestmark = pytest.mark.timeout(180)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve(project: Path, tmp_path: Path):
    port = free_port()
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen([*memstrata_command(), "serve", "--project", str(project), "--port", str(port),
                                 "--no-watch"], env=child_env(), stdout=log, stderr=log)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if httpx.get(base + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "serve did not come up"
                time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


async def _sse_session(url: str):
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        await wait_ready(session)
        found = await session.call_tool("context_query", {"query": LOGIN_QUERY})
        bad = await session.call_tool("context_query", {"query": 5})
        return init, tools, found, bad


@pytest.mark.parametrize("path", ["/sse", "/mcp"])
def test_sse_client_on_serve(serve: str, path: str):
    init, tools, found, bad = anyio.run(_sse_session, serve + path)
    assert init.server_info.name == "memstrata"
    assert tuple(tools) == TOOLS
    assert not found.is_error and "def login" in found.structured_content["context"]
    assert bad.is_error and text_of(bad) == "query must be a string, got an integer"


def test_sse_endpoint_event_names_the_messages_route(serve: str):
    with httpx.Client(timeout=10) as h, h.stream("GET", serve + "/sse", headers={"Accept": "text/event-stream"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = []
        for line in r.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "event: endpoint" in lines and lines[-1].startswith("data: /messages/?session_id=")
    with httpx.Client(timeout=10) as h:  # the same guards as every other route
        assert h.get(serve + "/sse", headers={"Host": "evil.example.com"}).status_code == 421
        assert h.post(serve + "/messages/?session_id=00", json={},
                      headers={"Origin": "http://evil.example.com"}).status_code == 403
