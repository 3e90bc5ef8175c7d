"""Idle keep-alive connections on both hops of the proxy.

A request sent on a pooled connection at the moment the other end closes it
for being idle fails ("closed the connection without an answer"); with 32
agents through `serve` that lost a request now and then (issue 24).  Each
hop is made safe by the side that keeps connections the longer: the proxy
holds its clients' connections well past their own idle limits, and drops
its upstream connections before the common 5 s server timer.
"""

import http.client
import json
import time

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.harness.proxy.http11 import ProxyH11Protocol
from memstrata.harness.proxy.upstream import UPSTREAM_KEEPALIVE_S
from tests.stub_provider import ServerThread, StubUpstream

GOOD = {"model": "gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
UVICORN_DEFAULT_KEEPALIVE_S = 5  # what a server closes idle connections after, unless told otherwise
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-test"}


def proxy_server(ws, upstream_url: str) -> ServerThread:
    cfg = ProxyConfig(openai_base=upstream_url + "/v1", anthropic_base=upstream_url, trust_env=False)
    # The HTTP protocol `memstrata serve` runs (harness/cli/serve.py).
    return ServerThread(build_app(ws, HarnessConfig(proxy=cfg, mount_mcp=False)), http=ProxyH11Protocol)


def test_a_client_connection_idle_past_the_usual_server_timer_still_carries_a_request(python_ws):
    stub = StubUpstream()
    with ServerThread(stub.app) as upstream:
        stub.url = upstream.url
        with proxy_server(python_ws, upstream.url) as proxy:
            conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=30)
            for pause in (0, UVICORN_DEFAULT_KEEPALIVE_S + 1):
                time.sleep(pause)
                # http.client does not reconnect: a connection the server closed meanwhile fails here.
                conn.request("POST", "/v1/chat/completions", body=json.dumps(GOOD), headers=HEADERS)
                r = conn.getresponse()
                assert r.status == 200, r.read()
                r.read()
            conn.close()


@pytest.fixture
def port_recording_upstream():
    """An OpenAI-shaped upstream that records the client port of each request (one per connection)."""
    ports: list[int] = []

    async def chat(request: Request) -> JSONResponse:
        await request.body()
        ports.append(request.client.port)
        return JSONResponse({"id": "c", "object": "chat.completion", "model": "gpt-4o",
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                          "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with ServerThread(app) as server:
        yield server, ports


def test_the_proxy_drops_an_idle_upstream_connection_before_the_server_would(python_ws, port_recording_upstream):
    upstream, ports = port_recording_upstream
    assert UPSTREAM_KEEPALIVE_S < UVICORN_DEFAULT_KEEPALIVE_S
    with proxy_server(python_ws, upstream.url) as proxy:
        conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=30)

        def ask() -> None:
            conn.request("POST", "/v1/chat/completions", body=json.dumps(GOOD), headers=HEADERS)
            r = conn.getresponse()
            assert r.status == 200, r.read()
            r.read()

        # Every upstream pool gets a connection, then each is reused at once ...
        for _ in range(16):
            ask()
        assert len(set(ports)) < len(ports)
        # ... but not after an idle pause between the proxy's limit and the server's.
        time.sleep((UPSTREAM_KEEPALIVE_S + UVICORN_DEFAULT_KEEPALIVE_S) / 2)
        seen = set(ports)
        for _ in range(16):
            ask()
        conn.close()
    assert not seen & set(ports[16:]), "a connection idle past the proxy's keep-alive was reused"
