"""The HTTP transports (SSE at GET /mcp, Streamable HTTP at POST /mcp) on a real
uvicorn bound to an ephemeral loopback port, driven by the SDK's own clients."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from memstrata.harness.proxy.savings import savings_summary
from memstrata.indexer.workspace import Workspace
from .mcp_helpers import FIXTURE, LOGIN_QUERY, PROTOCOL_VERSIONS, TOOLS, open_session, text_of, wait_ready, wait_until
from memstrata.mcp_server import IndexWarmup, build_server, mcp_http_app

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
POST_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class LiveServer:
    def __init__(self, project: Path, base: str, port: int):
        self.project, self.base, self.port = project, base, port
        self.url = f"{base}/mcp"


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    project = tmp_path_factory.mktemp("http") / "python_project"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    ws = Workspace.open(project)
    warmup = IndexWarmup(ws, watch=True)
    started = time.time()
    server = build_server(ws, savings=lambda: savings_summary(ws, since=started), warmup=warmup)
    app = mcp_http_app(server)

    # IPPROTO_TCP explicitly: asyncio enables TCP_NODELAY on accepted connections
    # only then, and without it every response waits ~40 ms on Nagle/delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield LiveServer(project, f"http://127.0.0.1:{port}", port)
    finally:
        uv.should_exit = True
        thread.join(timeout=15)
        sock.close()
        warmup.join(timeout=30)
        ws.close()


@contextlib.asynccontextmanager
async def http_session(transport: str, url: str, version: str | None):
    client = sse_client if transport == "sse" else streamable_http_client
    async with client(url) as (read, write), ClientSession(read, write) as session:
        init = await open_session(session, version)
        yield session, init


@pytest.mark.parametrize("transport", ["sse", "streamable"])
@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
def test_tools_over_http(live: LiveServer, transport: str, version: str):
    async def main():
        async with http_session(transport, live.url, version) as (s, init):
            assert init.protocol_version == version
            assert init.server_info.name == "memstrata"
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert tuple(sorted(tools)) == TOOLS
            assert tools["context_query"].input_schema["required"] == ["query"]

            status = await wait_ready(s)
            assert status["project"] == str(live.project) and status["files_indexed"] >= 10

            r = await s.call_tool("context_query", {"query": LOGIN_QUERY})
            assert not r.is_error, text_of(r)
            assert "def login" in r.structured_content["context"]
            assert r.structured_content["sources"][0] == "app/auth/service.py"
            assert json.loads(text_of(r)) == r.structured_content

            r = await s.call_tool("savings_summary", {})
            assert not r.is_error and r.structured_content["session_tokens_saved"] == 0

            r = await s.call_tool("no_such_tool", {})
            assert r.is_error and "Unknown tool" in text_of(r)
            r = await s.call_tool("context_query", {"query": "login", "max_tokens": "abc"})
            assert r.is_error and "max_tokens must be an integer" in text_of(r)
            r = await s.call_tool("index_status", {})  # the session survived both
            assert not r.is_error

    anyio.run(main)


def test_edit_is_reflected_over_streamable_http(live: LiveServer):
    async def main():
        async with http_session("streamable", live.url, None) as (s, _init):
            await wait_ready(s)
            routes = live.project / "app" / "routes.py"
            routes.write_text(routes.read_text() + "\n\ndef health_route(request: dict) -> dict:\n"
                              "    return {\"ok\": service is not None}\n")

            async def reflected():
                r = await s.call_tool("context_query", {"query": "health_route"})
                return not r.is_error and "def health_route" in r.structured_content["context"]

            assert await wait_until(reflected, timeout=30)

    anyio.run(main)


def test_sse_endpoint_event_points_at_its_post_route(live: LiveServer):
    with httpx.Client(timeout=10) as h, h.stream("GET", live.url, headers={"Accept": "text/event-stream"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = []
        for line in r.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "event: endpoint" in lines
    assert lines[-1].startswith("data: /mcp/messages/?session_id=")


def test_streamable_post_is_served_on_the_exact_path(live: LiveServer):
    with httpx.Client(timeout=10, follow_redirects=False) as h:
        r = h.post(live.url, json=INIT, headers=POST_HEADERS)
        assert r.status_code == 200
        assert r.headers.get("mcp-session-id")
        session = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        # A malformed body is a JSON-RPC parse error, and the session lives on.
        r = h.post(live.url, content=b"{not json", headers={**POST_HEADERS, **session})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        r = h.post(live.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers={**POST_HEADERS, **session})
        assert r.status_code == 202
        r = h.post(live.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "index_status", "arguments": {}}},
                   headers={**POST_HEADERS, **session})
        assert r.status_code == 200
        data = [line[5:].strip() for line in r.text.splitlines() if line.startswith("data:")]
        reply = json.loads(data[-1])
        assert reply["id"] == 2 and reply["result"]["structuredContent"]["project"] == str(live.project)
        # A request without a session is refused without naming a session that was never opened.
        r = h.post(live.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=POST_HEADERS)
        assert r.status_code == 400 and "mcp-session-id" not in r.headers


def test_bodies_that_are_no_single_message_get_json_rpc_words(live: LiveServer):
    """A batch, a bare value, a wrong version or a lone surrogate: HTTP 400 with the JSON-RPC error
    in plain words, as over stdio (the SDK's own answer was its validation dump)."""
    cases = [
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', [(1, -32600)], "batches are not supported"),
        (b'[{"jsonrpc": "2.0", "method": "notifications/initialized"}]', (None, -32600), "batches are not supported"),
        (b"42", (None, -32600), "a JSON-RPC message is a JSON object"),
        (b'{"jsonrpc": "1.0", "id": "v", "method": "ping"}', ("v", -32600), '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "id": "s", "method": "ping", "params": {"x": "\\ud800"}}', ("s", -32600),
         "lone surrogate"),
    ]
    with httpx.Client(timeout=10) as h:
        for body, expected, words in cases:
            r = h.post(live.url, content=body, headers=POST_HEADERS)
            assert r.status_code == 400, body
            got = r.json()
            pairs = [(e["id"], e["error"]["code"]) for e in got] if isinstance(got, list) else \
                (got["id"], got["error"]["code"])
            assert pairs == expected, body
            messages = [e["error"]["message"] for e in (got if isinstance(got, list) else [got])]
            assert all(words in m for m in messages), messages
            assert "pydantic" not in r.text and "validation error" not in r.text.lower()
        # A good request right after is served.
        r = h.post(live.url, json=INIT, headers=POST_HEADERS)
        assert r.status_code == 200 and r.headers.get("mcp-session-id")


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:{port}", "127.0.0.1.nip.io:{port}"])
def test_foreign_host_is_refused(live: LiveServer, host: str):
    host = host.format(port=live.port)
    with httpx.Client(timeout=10) as h:
        r = h.post(live.url, json=INIT, headers={**POST_HEADERS, "Host": host})
        assert r.status_code == 421
        with h.stream("GET", live.url, headers={"Accept": "text/event-stream", "Host": host}) as r:
            assert r.status_code == 421
        r = h.post(f"{live.base}/mcp/messages/?session_id=00", json=INIT, headers={**POST_HEADERS, "Host": host})
        assert r.status_code == 421


def test_foreign_origin_is_refused_and_loopback_names_are_allowed(live: LiveServer):
    with httpx.Client(timeout=10) as h:
        r = h.post(live.url, json=INIT, headers={**POST_HEADERS, "Origin": "http://evil.example.com"})
        assert r.status_code == 403
        for host in (f"localhost:{live.port}", "127.0.0.1"):
            r = h.post(live.url, json=INIT, headers={**POST_HEADERS, "Host": host})
            assert r.status_code == 200, host
        r = h.post(live.url, json=INIT, headers={**POST_HEADERS, "Origin": f"http://localhost:{live.port}"})
        assert r.status_code == 200
