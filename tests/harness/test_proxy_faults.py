"""Bad input and broken upstreams get clean answers (issue 15, items 6 and 9).

Real processes: `memstrata serve` and the stand-in provider run as
subprocesses; the provider is killed with SIGKILL mid-answer.
"""

import http.client
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.forward import ProxyConfig
from tests.stub_provider import ServerThread, StubUpstream

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "python_project"
GOOD = {"model": "gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def deep(levels: int) -> bytes:
    nested = "[" * levels + "]" * levels
    return ('{"model": "gpt-4o", "max_tokens": 5, "messages": [{"role": "user", "content": ' + nested + "}]}").encode()


@pytest.fixture(scope="module")
def stub():
    with StubUpstream().running() as s:
        yield s


@pytest.fixture
def proxy(python_ws, stub):
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False)
    app = build_app(python_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    # log_config=None: uvicorn's records reach the root logger, where caplog looks.
    with ServerThread(app, log_level="info", log_config=None) as server:
        yield server


@pytest.mark.parametrize("path,shape", [("/v1/chat/completions", "openai"), ("/anthropic/v1/messages", "anthropic")])
def test_deep_json_gets_400_and_the_connection_keeps_working(proxy, path, shape, caplog):
    caplog.set_level(logging.DEBUG)
    conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=30)
    headers = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"}
    for levels in (1000, 150, 100_000):
        conn.request("POST", path, body=deep(levels), headers=headers)
        r = conn.getresponse()
        body = json.loads(r.read())
        assert r.status == 400, body
        if shape == "openai":
            assert body["error"]["type"] == "invalid_request_error" and "nested" in body["error"]["message"]
        else:
            assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    # the next request on the same keep-alive connection is answered normally
    conn.request("POST", path, body=json.dumps(GOOD).encode(), headers=headers)
    r = conn.getresponse()
    r.read()
    assert r.status == 200
    conn.close()
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


def test_a_long_url_within_the_server_buffer_gets_414(proxy):
    for path in ("/v1/models", "/anthropic/v1/messages"):
        r = httpx.post(proxy.url + path + "?q=" + "a" * 9000, json=GOOD)
        assert r.status_code == 414
        assert "too long" in json.dumps(r.json())


# -- real processes ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve_env(tmp_path, memstrata_home):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root)
    env = dict(os.environ, MEMSTRATA_HOME=str(memstrata_home), PYTHONUNBUFFERED="1")
    return root, env


def start_stub() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.stub_provider", "--port", "0"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().split()[1])
    return proc, f"http://127.0.0.1:{port}"


def start_serve(root: Path, env: dict, upstream: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "memstrata", "serve", "--project", str(root), "--port", str(port),
                             "--openai-upstream", upstream + "/v1", "--anthropic-upstream", upstream, "--no-watch",
                             "--no-mcp"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            httpx.get(url + "/health", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("memstrata serve did not come up")


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


def raw_request(url: str, request_line_target: str) -> bytes:
    """Send one request with a huge target and read the whole answer (a reset raises)."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(f"GET {request_line_target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def test_a_very_long_url_gets_414_not_a_reset(serve_env):
    root, env = serve_env
    stub, stub_url = start_stub()
    serve, url = start_serve(root, env, stub_url)
    try:
        for size in (100_000, 1_000_000, 5_000_000):
            for prefix in ("/v1/models?q=", "/anthropic/v1/messages?q="):
                answer = raw_request(url, prefix + "a" * size)
                head, _, body = answer.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 414 "), head[:200]
                err = json.loads(body)
                if prefix.startswith("/anthropic"):
                    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
                else:
                    assert err["error"]["message"] == "the request URL is too long"
        assert httpx.get(url + "/health").status_code == 200
    finally:
        log = stop(serve)
        stop(stub)
    assert "Traceback" not in log


def kill_mid_answer(client: httpx.Client, url: str, stub: subprocess.Popen) -> None:
    """A chat answer through serve, the provider killed once part of it was relayed."""
    with client.stream("POST", url + "/v1/chat/completions", json=dict(GOOD, model="stub-stall"),
                       headers={"authorization": "Bearer k"}) as r:
        assert r.status_code == 200
        chunks = r.iter_raw()
        first = next(chunks)  # part of the answer has been relayed ...
        assert first.startswith(b'{"id": "stub"')
        stub.send_signal(signal.SIGKILL)  # ... when the provider dies
        stub.wait(timeout=30)
        with pytest.raises(httpx.RemoteProtocolError):
            for _ in chunks:
                pass


def test_an_upstream_killed_mid_body_logs_one_line(serve_env):
    root, env = serve_env
    stub, stub_url = start_stub()
    serve, url = start_serve(root, env, stub_url)
    try:
        with httpx.Client(timeout=30) as client:
            kill_mid_answer(client, url, stub)
        assert httpx.get(url + "/health").status_code == 200  # the proxy is fine
    finally:
        log = stop(serve)
        stop(stub)
    assert "Traceback" not in log
    lines = [ln for ln in log.splitlines() if "mid-answer" in ln or "ASGI" in ln or "Exception" in ln]
    assert len(lines) == 1, log
    assert "closed the connection mid-answer" in lines[0]


def test_credentials_in_an_upstream_url_are_never_shown(serve_env):
    """An upstream URL may carry user:password@ (and a key in its query); they go to the upstream
    and nowhere else: not into the banner, an error answer or a log line."""
    root, env = serve_env
    stub, stub_url = start_stub()
    host = stub_url.split("//", 1)[1]
    serve, url = start_serve(root, env, f"http://user:SECRETPW@{host}")
    try:
        with httpx.Client(timeout=30) as client:
            kill_mid_answer(client, url, stub)  # a warning naming the upstream is logged
            down = client.post(url + "/v1/chat/completions", json=GOOD, headers={"authorization": "Bearer k"})
        assert down.status_code == 502
        message = down.json()["error"]["message"]
        assert host in message and "SECRETPW" not in message and "user" not in message
    finally:
        log = stop(serve)
        stop(stub)
    assert "mid-answer" in log and host in log
    assert "SECRETPW" not in log and "user:" not in log


def test_a_wildcard_bind_answers_to_this_machines_names_only(serve_env):
    """--host 0.0.0.0 listens on every address: a request naming this machine (its address or its
    host name) is served, one naming any other host is still refused (DNS rebinding), and the
    banner gives an address a client can use, not the wildcard."""
    from memstrata.harness.cli.serve import wildcard_hosts

    root, env = serve_env
    stub, stub_url = start_stub()
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "memstrata", "serve", "--project", str(root), "--port", str(port),
                              "--host", "0.0.0.0", "--openai-upstream", stub_url + "/v1", "--no-watch", "--no-mcp"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert serve.poll() is None and time.monotonic() < deadline
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        names = wildcard_hosts("0.0.0.0")
        assert socket.gethostname() in names
        for host in ("127.0.0.1", "localhost", "0.0.0.0", socket.gethostname(), *names):
            shown = f"[{host}]" if ":" in host else host
            r = httpx.get(f"http://127.0.0.1:{port}/health", headers={"host": f"{shown}:{port}"})
            assert r.status_code == 200, host
        for host in ("evil.example", "192.0.2.250", f"{socket.gethostname()}.evil.example"):
            r = httpx.get(f"http://127.0.0.1:{port}/health", headers={"host": f"{host}:{port}"})
            assert r.status_code == 421, host
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=GOOD,
                       headers={"authorization": "Bearer k", "host": f"{socket.gethostname()}:{port}",
                                "origin": "http://evil.example"})
        assert r.status_code == 403
    finally:
        log = stop(serve)
        stop(stub)
    assert f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in log and "0.0.0.0:" not in log
    assert "not loopback" in log


def test_a_number_too_long_to_read_is_named_as_such(proxy):
    body = b'{"model": "gpt-4o", "max_tokens": 1' + b"0" * 5000 + b', "messages": []}'
    for path in ("/v1/chat/completions", "/anthropic/v1/messages"):
        r = httpx.post(proxy.url + path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400
        message = r.json()["error"]["message"]
        assert "more than 4,300 digits" in message and "UTF-8" not in message


def test_a_method_a_route_does_not_take_is_an_invalid_request(proxy):
    r = httpx.request("OPTIONS", proxy.url + "/v1/chat/completions", headers={"origin": proxy.url})
    assert r.status_code == 405 and r.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("url", ["http://u:pa?ss@host:8/v1?key=s", "http://u:p/a#s@host:8/v1", "http://u:p@ss@host:8/v1",
                                 "https://user:SECRET@host:8"])
def test_shown_upstreams_never_carry_credentials(url):
    from memstrata.harness.proxy.upstream import shown_host, shown_url

    assert shown_host(url) == "host:8"
    assert shown_url(url) in ("http://host:8/v1", "https://host:8")
    assert not any(secret in shown_url(url) for secret in ("pa", "ss", "SECRET", "key", "user", "u:"))


def test_the_depth_check_counts_containers_exactly():
    """The limit is the number of nested containers; scalars and strings add no level."""
    from memstrata.harness.proxy.forward import _too_deep

    def depth(v):
        inner = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        return 0 if inner is None else 1 + max((depth(x) for x in inner), default=0)

    values = [1, "[[[", None, [], {}, [[]], {"a": {"b": []}}, [1, "x", [2, [3]], {"k": [[[]]]}],
              {"a": 1, "b": [{"c": {"d": [None, {"e": "[]"}]}}]}, json.loads("[" * 120 + "]" * 120),
              {"deep": json.loads("[" * 99 + "]" * 99), "flat": list(range(50))}]
    for v in values:
        for limit in range(0, 125):
            assert _too_deep(v, limit) == (depth(v) > limit), (v, limit)


def test_the_body_reader_gives_what_the_standard_library_reads():
    """The fast reader (orjson) must give every body exactly the value, types and key order the
    standard library gives it, and hand what it reads otherwise (integers past 64 bits, which it
    would read as floats) or refuses to the standard library; its depth check is _too_deep's."""
    from memstrata.harness.proxy.forward import _parse, _parse_std, _too_deep

    def same(a, b):
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, float):
            return repr(a) == repr(b)
        return a == b

    edges = [2 ** 64 - 1, 2 ** 64, -(2 ** 63), -(2 ** 63) - 1, 2 ** 63, 10 ** 30, -(10 ** 25)]
    bodies = [json.dumps({"n": n, "m": [{"k": n}]}).encode() for n in edges]
    bodies += [b'{"a": 1, "a": 2, "b": [1.5, -0.0, 5e-324, 1.7976931348623157e308, 9.2e18, 1e19]}',
               b'{"t": 9223372036854775807.0}', b'{"x": "\\u00e9\\ud83d\\ude00 caf\\u00e9", "y": null, "z": true}',
               b'{"a": 1e400}', b'{"a": NaN}', b'{"s": "\\ud800"}', b'\xef\xbb\xbf{"a": 1}', b'7', b'1e19',
               b'[[[[1]]]]', json.dumps({"deep": json.loads("[" * 101 + "]" * 101)}).encode(),
               json.dumps(json.loads("[" * 100 + "2e19" + "]" * 100)).encode(), '{"u": 1}'.encode("utf-16")]
    for raw in bodies:
        body, plain, deep = _parse(raw)
        expected, expected_plain = _parse_std(raw)
        assert same(body, expected) and plain == expected_plain, raw
        assert deep is None or deep == _too_deep(body, 100), raw
    for raw in (b'{"a": ', b'{"a": "\xff"}', b'{"a": "\x01"}'):
        with pytest.raises((ValueError, UnicodeDecodeError)) as fast:
            _parse(raw)
        with pytest.raises((ValueError, UnicodeDecodeError)) as std:
            _parse_std(raw)
        assert type(fast.value) is type(std.value) and str(fast.value) == str(std.value)


def test_the_stand_in_provider_run_as_a_script_streams():
    # The benchmarks run it as a process of its own: everything its answers use is defined by then.
    proc, url = start_stub()
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", timeout=30,
                          json={"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as r:
            body = b"".join(r.iter_bytes())
        assert r.status_code == 200 and body.rstrip().endswith(b"data: [DONE]")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _odd_upstream():
    """A provider address answered by something else: a page in place of an answer, and a body in
    a coding the proxy cannot undo (what a non-compliant server may send)."""
    import gzip

    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def page(request):
        return Response(b"<html><body>Sign in to the network</body></html>", media_type="text/html")

    async def coded(request):
        body = json.dumps({"id": "x", "object": "chat.completion", "choices": [], "usage": {
            "prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()
        return Response(gzip.compress(body), media_type="application/json",
                        headers={"content-encoding": "x-unknown"})

    return Starlette(routes=[Route("/page/v1/chat/completions", page, methods=["POST"]),
                             Route("/coded/v1/chat/completions", coded, methods=["POST"])])


@pytest.mark.parametrize("route", ["page", "coded"])
def test_what_is_no_model_answer_is_relayed_as_it_came_and_saves_nothing(python_ws, route):
    from memstrata.storage import ledger

    with ServerThread(_odd_upstream()) as up:
        from memstrata.harness.proxy.compress_request import CompressionSettings

        cfg = ProxyConfig(openai_base=f"{up.url}/{route}/v1", anthropic_base=up.url, trust_env=False,
                          compression=CompressionSettings.for_mode("aggressive", min_tokens=50))
        app = build_app(python_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
        with ServerThread(app) as server:
            code = (FIXTURE / "app/auth/service.py").read_text() + "\n" + (FIXTURE / "app/reports.py").read_text()
            r = httpx.post(f"{server.url}/v1/chat/completions", timeout=30, json={**GOOD, "messages": [
                {"role": "user", "content": f"```python\n{code}\n```\nWhat does AuthService.logout do?"}]})
    assert r.status_code == 200
    if route == "page":
        assert b"Sign in" in r.content
        rows = ledger.entries(python_ws.store)
        assert rows[-1].error == "not_an_answer"
        assert rows[-1].tokens_original > rows[-1].tokens_forwarded  # compressed, yet nothing is saved
        assert all(t.tokens_saved == 0 for t in ledger.totals(python_ws.store))
    else:  # still coded: the client is told so and can undo it, never handed bytes labelled JSON
        assert r.headers.get("content-encoding") == "x-unknown"


def test_a_body_that_stops_arriving_gets_408_and_frees_the_connection(proxy, monkeypatch):
    from memstrata.harness.proxy import forward

    monkeypatch.setattr(forward, "BODY_IDLE_S", 1.0)
    with socket.create_connection((proxy.host, proxy.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 500\r\n\r\n" + b'{"model": "gpt-4o", ')
        t0 = time.monotonic()
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < int(
                re.search(rb"content-length: (\d+)", answer, re.I).group(1)):
            chunk = s.recv(65536)  # the headers and the body may come in two segments
            if not chunk:
                break
            answer += chunk
        assert time.monotonic() - t0 < 20
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"stopped arriving" in answer
    assert httpx.post(proxy.url + "/v1/chat/completions", json=GOOD, timeout=30).status_code == 200
