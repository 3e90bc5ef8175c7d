"""The proxy end to end: official SDKs -> uvicorn(memstrata app) -> uvicorn(stub provider)."""

import json
import logging
import shutil
import socket
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from memstrata.harness.proxy.analysis import prompt_tokens
from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.compress_request import CompressionSettings
from memstrata.harness.proxy.forward import ProxyConfig
from tests.stub_provider import ServerThread, StubUpstream
from memstrata.indexer.workspace import Workspace
from memstrata.storage import ledger

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "python_project"
SENTINEL = "sk-SENTINEL-7f3a9c1e-do-not-log"
ANSWER = "Use AuthService.login: it calls hash_password and constant_time_eq, then audit."

BILLING = '''"""Billing: invoices, taxes and discounts (unrelated to authentication)."""

from dataclasses import dataclass, field


@dataclass
class LineItem:
    sku: str
    quantity: int
    unit_price_cents: int

    def total_cents(self) -> int:
        return self.quantity * self.unit_price_cents


@dataclass
class Invoice:
    customer: str
    items: list[LineItem] = field(default_factory=list)
    discount_percent: float = 0.0

    def add(self, sku: str, quantity: int, unit_price_cents: int) -> None:
        self.items.append(LineItem(sku, quantity, unit_price_cents))

    def subtotal_cents(self) -> int:
        return sum(item.total_cents() for item in self.items)

    def discount_cents(self) -> int:
        return int(round(self.subtotal_cents() * self.discount_percent / 100))

    def tax_cents(self, rate_percent: float) -> int:
        taxable = self.subtotal_cents() - self.discount_cents()
        return int(round(taxable * rate_percent / 100))

    def total_with_tax_cents(self, rate_percent: float) -> int:
        return self.subtotal_cents() - self.discount_cents() + self.tax_cents(rate_percent)


def format_cents(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def render_invoice(invoice: Invoice, rate_percent: float) -> str:
    lines = [f"Invoice for {invoice.customer}"]
    for item in invoice.items:
        lines.append(f"  {item.sku:<12} x{item.quantity:>3}  {format_cents(item.total_cents()):>10}")
    lines.append(f"  subtotal        {format_cents(invoice.subtotal_cents()):>10}")
    lines.append(f"  discount        {format_cents(-invoice.discount_cents()):>10}")
    lines.append(f"  tax             {format_cents(invoice.tax_cents(rate_percent)):>10}")
    lines.append(f"  total           {format_cents(invoice.total_with_tax_cents(rate_percent)):>10}")
    return "\\n".join(lines)
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj") / "shop"
    shutil.copytree(FIXTURE, root)
    (root / "app" / "billing.py").write_text(BILLING)
    ws = Workspace.open(root)
    ws.index()
    yield ws
    ws.close()


@pytest.fixture(scope="module")
def stub():
    with StubUpstream(answer=ANSWER, hang_seconds=2).running() as s:
        yield s


def make_app(ws, stub_url, **proxy_kw):
    # Thresholds scaled to the fixture's small files (the defaults are for real projects).
    settings = CompressionSettings.for_mode("safe", min_tokens=100, paste_cap=0, result_cap=300)
    cfg = ProxyConfig(openai_base=stub_url + "/v1", anthropic_base=stub_url, compression=settings,
                      trust_env=False, **proxy_kw)
    return build_app(ws, HarnessConfig(proxy=cfg))


@pytest.fixture(scope="module")
def proxy(project, stub):
    app = make_app(project, stub.url)
    # log_config=None: uvicorn's records reach the root logger, where the key test looks.
    with ServerThread(app, log_level="debug", log_config=None, access_log=True) as server:
        server.app = app
        yield server


@pytest.fixture
def fresh(stub):
    stub.received.clear()
    stub.gate.clear()
    stub.gate_timed_out = False
    return stub


def oai(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=SENTINEL, max_retries=0)


def ant(proxy):
    return anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=SENTINEL, max_retries=0)


def pasted_request(project) -> str:
    root = project.root
    code = "\n\n".join((root / p).read_text() for p in ("app/auth/service.py", "app/billing.py", "app/reports.py"))
    return f"Here is my code:\n```python\n{code}\n```\nHow does AuthService.login check the password? Keep it short."


def metric(proxy, name, **labels) -> float:
    text = httpx.get(proxy.url + "/metrics").text
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0


def rows(project):
    return ledger.entries(project.store, limit=1000)


# -- compression + forwarding ----------------------------------------------------------


def test_openai_request_compressed_and_answer_passed_through(project, proxy, fresh):
    question = pasted_request(project)
    body = {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are terse."},
                                            {"role": "user", "content": question}]}
    raw = oai(proxy).chat.completions.with_raw_response.create(**body)
    sent = fresh.received[-1]
    forwarded = sent.json()
    # still a valid request: same shape, same system prompt, instructions kept, smaller
    assert forwarded["model"] == "gpt-4o" and len(forwarded["messages"]) == 2
    assert forwarded["messages"][0] == body["messages"][0]
    text = forwarded["messages"][1]["content"]
    assert text.startswith("Here is my code:")
    assert text.rstrip().endswith("How does AuthService.login check the password? Keep it short.")
    assert "[memstrata:" in text and "def login" in text
    assert "def render_invoice" not in text  # unrelated pasted code is gone
    assert prompt_tokens(forwarded, "openai") < prompt_tokens(body, "openai")
    # the client got the upstream's bytes: replay the forwarded request directly
    direct = httpx.post(fresh.url + "/v1/chat/completions", content=sent.body,
                        headers={"content-type": "application/json"})
    assert raw.http_response.content == direct.content
    assert raw.parse().choices[0].message.content == ANSWER
    assert raw.http_response.headers["x-request-id"] == "req_stub"


def test_nothing_compressible_is_forwarded_byte_for_byte(proxy, fresh):
    raw = json.dumps({
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Explain:\n```python\ndef not_from_this_project(x):\n    return x * 42\n"
                                     "class Elsewhere:\n    pass\n```"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]}],
        "temperature": 0.2,
    }, indent=1).encode()
    r = httpx.post(proxy.url + "/v1/chat/completions", content=raw,
                   headers={"authorization": f"Bearer {SENTINEL}", "content-type": "application/json"})
    assert r.status_code == 200
    assert fresh.received[-1].body == raw


def test_edited_project_code_is_not_touched(project, proxy, fresh):
    code = (project.root / "app/auth/service.py").read_text().replace("return ok", "return not ok  # my change")
    msg = f"```python\n{code}\n```\nWhy does AuthService.login fail?"
    oai(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": msg}])
    assert "return not ok  # my change" in fresh.received[-1].json()["messages"][0]["content"]


def test_anthropic_tool_result_compressed_structure_kept(project, stub, fresh):
    files = "\n".join((project.root / p).read_text() for p in ("app/billing.py", "app/auth/service.py"))
    numbered = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(files.splitlines(), 1))
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What does AuthService.login do on failure?"}, image]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me read the files."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "app/auth/service.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": numbered}]},
    ]
    # aggressive: the latest tool result is cut too (safe keeps it whole below result_cap); here
    # even the read of a file the question is probably about (likely_file 0: no such exception)
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False,
                      compression=CompressionSettings.for_mode("aggressive", min_tokens=100, result_cap=200,
                                                              likely_file=0.0))
    with ServerThread(build_app(project, HarnessConfig(proxy=cfg))) as server:
        msg = ant(server).messages.create(model="claude-3-7-sonnet-20250219", max_tokens=200, system="Be brief.",
                                          messages=messages)
    assert msg.content[0].text == ANSWER
    fwd = fresh.received[-1].json()
    assert fresh.received[-1].headers["anthropic-version"]
    assert fwd["system"] == "Be brief." and fwd["messages"][:2] == messages[:2]
    result = fwd["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01"
    assert "[memstrata:" in result["content"] and len(result["content"]) < len(numbered)


# -- streaming ------------------------------------------------------------------------------


def test_openai_stream_arrives_incrementally(proxy, fresh):
    stream = oai(proxy).chat.completions.create(model="stub-gated", stream=True,
                                                messages=[{"role": "user", "content": "hi"}],
                                                stream_options={"include_usage": True})
    chunks = iter(stream)
    first = next(chunks)  # arrives while the upstream is still holding the rest back
    assert first.choices[0].delta.role == "assistant"
    assert not fresh.gate.is_set()
    fresh.gate.set()
    rest = list(chunks)
    assert not fresh.gate_timed_out
    assert "".join(c.choices[0].delta.content or "" for c in rest if c.choices) == ANSWER
    assert rest[-1].usage is not None


def test_anthropic_stream_event_types(proxy, fresh):
    client = ant(proxy)
    with client.messages.stream(model="stub-gated", max_tokens=50,
                                messages=[{"role": "user", "content": "hi"}]) as s:
        events = iter(s)
        assert next(events).type == "message_start"
        assert not fresh.gate.is_set()
        fresh.gate.set()
        types = [e.type for e in events]
        final = s.get_final_message()
    assert {"content_block_start", "content_block_delta", "content_block_stop", "message_delta",
            "message_stop"} <= set(types)
    assert final.content[0].text == ANSWER and final.usage.output_tokens > 0


def test_raw_sse_bytes_unchanged(proxy, fresh):
    body = {"model": "stub-slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    via = httpx.post(proxy.url + "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {SENTINEL}"})
    direct = httpx.post(fresh.url + "/v1/chat/completions", json=body)
    assert via.headers["content-type"].startswith("text/event-stream")
    assert via.content == direct.content and via.content.endswith(b"data: [DONE]\n\n")


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model,exc,status", [
    ("stub-401", openai.AuthenticationError, 401),
    ("stub-429", openai.RateLimitError, 429),
    ("stub-529", openai.APIStatusError, 529),
])
def test_openai_upstream_errors_pass_through(proxy, fresh, model, exc, status):
    with pytest.raises(exc) as info:
        oai(proxy).chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == status


@pytest.mark.parametrize("model,exc,status,kind", [
    ("stub-401", anthropic.AuthenticationError, 401, "authentication_error"),
    ("stub-429", anthropic.RateLimitError, 429, "rate_limit_error"),
    ("stub-529", anthropic.APIStatusError, 529, "overloaded_error"),
])
def test_anthropic_upstream_errors_pass_through(proxy, fresh, model, exc, status, kind):
    with pytest.raises(exc) as info:
        ant(proxy).messages.create(model=model, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == status
    assert info.value.body["error"]["type"] == kind
    if status == 429:
        assert info.value.response.headers["retry-after"] == "7"


def test_dropped_stream_surfaces_as_error(proxy, fresh):
    with pytest.raises(openai.APIError, match="closed the connection"):
        for _ in oai(proxy).chat.completions.create(model="stub-drop", stream=True,
                                                    messages=[{"role": "user", "content": "hi"}]):
            pass
    with pytest.raises(anthropic.APIError, match="closed the connection"):
        with ant(proxy).messages.stream(model="stub-drop", max_tokens=5,
                                        messages=[{"role": "user", "content": "hi"}]) as s:
            s.until_done()
    with pytest.raises(openai.APIConnectionError):  # a cut JSON body: the client sees the cut too
        oai(proxy).chat.completions.create(model="stub-drop", messages=[{"role": "user", "content": "hi"}])


def test_a_stream_that_ends_early_or_loses_its_client_is_recorded_as_such(project, proxy, fresh):
    h = proxy.app.state.harness
    h.flush()
    before = len(rows(project))
    headers = {"authorization": f"Bearer {SENTINEL}", "x-api-key": SENTINEL, "content-type": "application/json",
               "anthropic-version": "2023-06-01"}
    hi = [{"role": "user", "content": "hi"}]
    # The upstream closes cleanly before its final event: relayed as it came.
    for path, body in (("/v1/chat/completions", {"model": "stub-short", "stream": True, "messages": hi}),
                       ("/anthropic/v1/messages", {"model": "stub-short", "stream": True, "max_tokens": 5,
                                                   "messages": hi})):
        r = httpx.post(proxy.url + path, json=body, headers=headers)
        assert r.status_code == 200 and "[DONE]" not in r.text and "message_stop" not in r.text
    # The client goes away after the first event, while the upstream is still answering (the
    # stand-in holds the rest until the gate opens, once the proxy has seen the client leave).
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", headers=headers,
                      json={"model": "stub-gated", "stream": True, "messages": hi}) as r:
        next(r.iter_bytes())
    for _ in range(200):
        h.flush()
        new = rows(project)[before:]
        if len(new) == 3:
            break
        time.sleep(0.05)
    fresh.gate.set()
    assert sorted((e.model, e.status, e.error) for e in new) == [
        ("stub-gated", 200, "client_gone"), ("stub-short", 200, "incomplete"), ("stub-short", 200, "incomplete")]


def test_a_client_leaving_before_the_answer_cancels_the_upstream_call(project, proxy, fresh):
    """The upstream stops generating (and billing) for nobody, and the row says so."""
    before, abandoned = len(rows(project)), fresh.abandoned
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.APITimeoutError):
        openai.OpenAI(base_url=proxy.url + "/v1", api_key=SENTINEL, max_retries=0, timeout=0.3) \
            .chat.completions.create(model="stub-hang", messages=hi)
    with pytest.raises(anthropic.APITimeoutError):
        anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=SENTINEL, max_retries=0, timeout=0.3) \
            .messages.create(model="stub-hang", max_tokens=5, messages=hi, stream=True)
    h = proxy.app.state.harness
    for _ in range(100):  # the stand-in hangs 2 s unless its caller hangs up first
        h.flush()
        new = rows(project)[before:]
        if len(new) == 2 and fresh.abandoned == abandoned + 2:
            break
        time.sleep(0.02)
    assert fresh.abandoned == abandoned + 2
    assert sorted((e.model, e.status, e.error) for e in new) == [("stub-hang", None, "client_gone")] * 2
    assert metric(proxy, "memstrata_requests_total", status="499") >= 2


def test_compressed_request_bodies_are_decoded_compressed_and_forwarded_plain(project, proxy, fresh):
    import gzip
    import zlib

    import zstandard

    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": pasted_request(project)}]}
    raw = json.dumps(body).encode()
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    encodings = {
        "gzip": gzip.compress(raw),
        "deflate": zlib.compress(raw),
        "Deflate": raw_deflate.compress(raw) + raw_deflate.flush(),  # raw deflate, as some clients send
        "zstd": zstandard.ZstdCompressor().compress(raw),
        "gzip, identity": gzip.compress(raw),
    }
    for name, data in encodings.items():
        r = httpx.post(proxy.url + "/v1/chat/completions", content=data,
                       headers={"authorization": f"Bearer {SENTINEL}", "content-type": "application/json",
                                "content-encoding": name})
        assert r.status_code == 200, (name, r.text)
        sent = fresh.received[-1]
        assert "content-encoding" not in sent.headers
        forwarded = sent.json()  # plain JSON upstream, and compressed like any request
        assert "[memstrata:" in forwarded["messages"][0]["content"] and "def render_invoice" not in sent.body.decode()
    headers = {"content-type": "application/json"}
    r = httpx.post(proxy.url + "/anthropic/v1/messages", content=b"x", headers={**headers, "content-encoding": "br"})
    assert r.status_code == 415 and r.json()["error"]["message"] == (
        "request body Content-Encoding 'br' is not supported (the proxy reads gzip, deflate, zstd and plain bodies)")
    r = httpx.post(proxy.url + "/v1/chat/completions", content=gzip.compress(raw)[:-20],
                   headers={**headers, "content-encoding": "gzip"})
    assert r.status_code == 400 and "gzip" in r.json()["error"]["message"]
    bomb = zstandard.ZstdCompressor().compress(b" " * (65 * 1024 * 1024))  # a few KB that decode past the limit
    r = httpx.post(proxy.url + "/v1/chat/completions", content=bomb, headers={**headers, "content-encoding": "zstd"})
    assert r.status_code == 413


def test_malformed_json_gets_provider_shaped_400(proxy):
    r = httpx.post(proxy.url + "/v1/chat/completions", content=b'{"model": "gpt-4o", "messages": [',
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(proxy.url + "/v1/chat/completions", content=b'{"model": "a\x01b"}')
    assert r.json()["error"]["message"] == "request body is not valid JSON: Invalid control character at line 1 column 13"
    for body in (b"[1, 2]", b"null"):  # JSON null is not an object either (nor "nested too deep")
        r = httpx.post(proxy.url + "/anthropic/v1/messages", content=body)
        assert r.status_code == 400
        assert r.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": "request body must be a JSON object"}}


def test_refused_and_timed_out_upstreams(project, stub):
    closed = ServerThread(StubUpstream().app)  # bound, never started, then closed: nothing listens
    dead_url = closed.url
    closed.sock.close()
    app = make_app(project, dead_url)
    with ServerThread(app) as server:
        with pytest.raises(openai.APIStatusError) as info:
            oai(server).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 502 and "could not connect" in info.value.message
        with pytest.raises(anthropic.APIStatusError) as ainfo:
            ant(server).messages.create(model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert ainfo.value.status_code == 502 and ainfo.value.body["type"] == "error"
    app = make_app(project, stub.url, read_timeout=0.3)
    with ServerThread(app) as server:
        with pytest.raises(openai.APIStatusError) as info:
            oai(server).chat.completions.create(model="stub-hang", messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 504
        assert "Traceback" not in info.value.response.text and "/" not in info.value.message.split("(")[0]
        server.app = app
        app.state.harness.flush()
        assert metric(server, "memstrata_upstream_errors_total", kind="timeout") == 1.0


def test_an_upstream_url_with_a_query_string_keeps_it_a_query(project, stub, fresh):
    """An Azure-style base URL (`.../v1?api-version=...`): each call goes to its own path, the
    base's query first and the request's own after it, as an SDK given that base URL sends it."""
    app = build_app(project, HarnessConfig(proxy=ProxyConfig(
        openai_base=stub.url + "/v1?api-version=2024-10-21", anthropic_base=stub.url, trust_env=False,
        compression=CompressionSettings.for_mode("safe"))))
    with ServerThread(app) as server:
        oai(server).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        httpx.get(server.url + "/v1/models?limit=2", timeout=10)
    calls = [(r.path, r.query) for r in fresh.received]
    assert calls == [("/v1/chat/completions", "api-version=2024-10-21"),
                     ("/v1/models", "api-version=2024-10-21&limit=2")]


def test_foreign_host_and_origin_refused(proxy):
    refused = metric(proxy, "memstrata_requests_total", status="421"), metric(proxy, "memstrata_requests_total",
                                                                              status="403")
    for path in ("/health", "/v1/chat/completions", "/mcp", "/metrics"):
        r = httpx.get(proxy.url + path, headers={"host": "evil.example:8080"})
        assert r.status_code == 421 and "DNS-rebinding" in r.text
    r = httpx.get(proxy.url + "/status", headers={"origin": "https://evil.example"})
    assert r.status_code == 403
    r = httpx.post(proxy.url + "/anthropic/v1/messages", json={}, headers={"origin": "https://evil.example"})
    assert r.status_code == 403
    # Refusals on the proxied paths are counted like every other answer there (one each here).
    assert (metric(proxy, "memstrata_requests_total", status="421"),
            metric(proxy, "memstrata_requests_total", status="403")) == (refused[0] + 1, refused[1] + 1)
    assert httpx.get(proxy.url + "/health", headers={"host": "localhost:1234"}).status_code == 200


def test_a_capitalised_extra_host_reaches_mcp(project, stub):
    # A non-loopback --host spelled with capitals (a machine name): /mcp, behind the MCP SDK's
    # exact-string lists, answers it as the other routes do, in any spelling.
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False)
    app = build_app(project, HarnessConfig(proxy=cfg, allowed_hosts=("MyBox.Lan",)))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    with ServerThread(app) as server:
        for host in ("MyBox.Lan", "mybox.lan", "MYBOX.LAN"):
            headers = {"host": f"{host}:{server.port}", "accept": "application/json, text/event-stream"}
            assert httpx.get(server.url + "/health", headers=headers).status_code == 200, host
            r = httpx.post(server.url + "/mcp", json=init, headers=headers)
            assert r.status_code == 200 and "serverInfo" in r.text, (host, r.status_code, r.text[:200])


def test_host_and_origin_names_are_case_insensitive_on_every_route(proxy):
    # Host names are case-insensitive: /mcp (behind the MCP SDK's own exact-string check) must
    # agree with the other routes.
    port = proxy.url.rsplit(":", 1)[1]
    headers = {"host": f"LocalHost:{port}", "origin": f"HTTP://LOCALHOST:{port}"}
    assert httpx.get(proxy.url + "/health", headers=headers).status_code == 200
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    r = httpx.post(proxy.url + "/mcp/", json=init, follow_redirects=True,
                   headers={**headers, "accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    assert "serverInfo" in r.text


def test_origin_null_and_non_web_origins_are_cross_site(proxy):
    # Sandboxed frames and file: pages send "Origin: null"; like the SDK's /mcp guard and
    # the Kura daemon, every route refuses it (and any origin that is not an http(s) local page).
    port = proxy.url.rsplit(":", 1)[1]
    for origin in ("null", "file://", "chrome-extension://localhost", f"ftp://127.0.0.1:{port}"):
        for path in ("/status", "/api/dashboard", "/metrics"):
            r = httpx.get(proxy.url + path, headers={"origin": origin})
            assert r.status_code == 403, (origin, path, r.status_code)
    for origin in (proxy.url, f"http://localhost:{port}", f"http://[::1]:{port}", "https://localhost"):
        assert httpx.get(proxy.url + "/status", headers={"origin": origin}).status_code == 200, origin


def raw_get(url: str, path: str, headers: list[tuple[str, str]]) -> bytes:
    """One GET with exactly ``headers`` (repeats included, which HTTP clients merge); the answer's status line."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers)
        s.sendall(f"GET {path} HTTP/1.1\r\n{lines}Connection: close\r\n\r\n".encode("latin-1"))
        answer = b""
        while data := s.recv(65536):
            answer += data
    return answer.split(b"\r\n", 1)[0]


def test_every_copy_of_origin_and_host_must_be_local(proxy):
    # A foreign Origin is refused whether it comes before or after a local one, on every route.
    port = proxy.url.rsplit(":", 1)[1]
    host = ("Host", f"127.0.0.1:{port}")
    for origins in (["https://evil.example", f"http://localhost:{port}"],
                    [f"http://localhost:{port}", "https://evil.example"], ["null", "http://localhost"]):
        for path in ("/status", "/api/dashboard", "/metrics", "/mcp"):
            status = raw_get(proxy.url, path, [host, *(("Origin", o) for o in origins)])
            assert status.startswith(b"HTTP/1.1 403 "), (origins, path, status)
    ok = raw_get(proxy.url, "/status", [host, ("Origin", f"http://localhost:{port}"), ("Origin", "http://[::1]")])
    assert ok.startswith(b"HTTP/1.1 200 "), ok
    # Two Hosts are refused before anything is served (the HTTP parser refuses them)...
    for hosts in (["evil.example", f"127.0.0.1:{port}"], [f"127.0.0.1:{port}", "evil.example"]):
        status = raw_get(proxy.url, "/status", [("Host", h) for h in hosts])
        assert status.split(b" ")[1] in (b"400", b"421"), (hosts, status)
    # ... and the guard refuses them too, whichever comes first, where a server hands both on.
    import anyio

    from memstrata.harness.proxy.app import HostGuard

    async def status_of(headers: list[tuple[bytes, bytes]]) -> int:
        sent = []

        async def app(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/status", "raw_path": b"/status", "query_string": b"",
                 "headers": headers, "http_version": "1.1", "scheme": "http"}
        await HostGuard(app)(scope, receive, send)
        return sent[0]["status"]

    assert anyio.run(status_of, [(b"host", b"evil.example"), (b"host", b"localhost")]) == 421
    assert anyio.run(status_of, [(b"host", b"localhost"), (b"host", b"evil.example")]) == 421
    assert anyio.run(status_of, [(b"host", b"localhost"), (b"host", b"127.0.0.1:1")]) == 200
    assert anyio.run(status_of, [(b"origin", b"http://localhost")]) == 421  # no Host at all


def test_passthrough_endpoints(proxy, fresh):
    models = oai(proxy).models.list()
    assert [m.id for m in models.data] == ["gpt-4o"]
    count = ant(proxy).messages.count_tokens(model="claude-3-7-sonnet-20250219",
                                             messages=[{"role": "user", "content": "hello there"}])
    assert count.input_tokens > 0
    assert [r.path for r in fresh.received] == ["/v1/models", "/v1/messages/count_tokens"]


@pytest.mark.parametrize("path,endpoint", [("/anthropic//v1/messages", "anthropic.messages"),
                                           ("/v1/chat/completions/", "openai.chat")])
def test_a_model_endpoint_with_a_doubled_or_trailing_slash_is_still_compressed_and_recorded(
        project, proxy, fresh, path, endpoint):
    h = proxy.app.state.harness
    h.flush()
    before = len(rows(project))
    body = {"model": "gpt-4o" if endpoint == "openai.chat" else "claude-3-7-sonnet-20250219", "max_tokens": 20,
            "messages": [{"role": "user", "content": pasted_request(project)}]}
    r = httpx.post(proxy.url + path, json=body, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
                   timeout=60)
    assert r.status_code == 200, r.text
    h.flush()
    new = rows(project)[before:]
    assert [e.endpoint for e in new] == [endpoint] and new[0].compressed
    assert fresh.received[-1].path in ("/v1/messages", "/v1/chat/completions")


# -- ledger, metrics, status -----------------------------------------------------------------


def test_ledger_and_metrics_move_by_the_right_amounts(project, proxy, fresh):
    h = proxy.app.state.harness
    h.flush()
    before_rows = len(rows(project))
    sent0 = metric(proxy, "memstrata_tokens_sent_total", project="shop")
    saved0 = metric(proxy, "memstrata_tokens_saved_total", project="shop")
    ok0 = metric(proxy, "memstrata_requests_total", status="200")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": pasted_request(project)}]}
    oai(proxy).chat.completions.create(**body)
    h.flush()
    new = rows(project)[before_rows:]
    assert len(new) == 1
    e = new[0]
    assert e.endpoint == "openai.chat" and e.model == "gpt-4o" and e.status == 200 and e.compressed
    assert e.tokens_original == prompt_tokens(body, "openai")
    assert e.tokens_forwarded == prompt_tokens(fresh.received[-1].json(), "openai")
    assert 0 < e.tokens_saved == e.tokens_original - e.tokens_forwarded
    # the files whose code was forwarded in a changed form: the two the question does not point at
    assert e.sources == ["app/billing.py", "app/reports.py"]
    assert e.output_tokens == len(ANSWER.split())  # as the provider reported
    # measured answer symbols: login, hash_password, constant_time_eq, audit, AuthService
    assert e.answer_symbols >= 4
    assert metric(proxy, "memstrata_tokens_sent_total", project="shop") - sent0 == e.tokens_forwarded
    assert metric(proxy, "memstrata_tokens_saved_total", project="shop") - saved0 == e.tokens_saved
    assert metric(proxy, "memstrata_requests_total", status="200") - ok0 == 1
    assert metric(proxy, "memstrata_compression_duration_seconds_count") >= 1
    status = httpx.get(proxy.url + "/status").json()
    assert {"project", "files_indexed", "last_indexed", "index_size_mb", "status"} <= set(status)
    assert status["status"] == "ready" and status["files_indexed"] >= 10
    s = status["savings"]
    assert s["session_tokens_saved"] >= e.tokens_saved and s["recall"] is not None
    assert s["provider_rate_per_token"] == pytest.approx(2.5e-6)
    # gpt-4o ($2.50/Mtok) and claude-3-7-sonnet ($3/Mtok) traffic in this session
    assert s["session_tokens_saved"] * 2.5e-6 - 1e-6 <= s["session_dollar_saved"] <= s["session_tokens_saved"] * 3e-6


def test_health(proxy):
    h = httpx.get(proxy.url + "/health").json()
    assert h["status"] == "ok" and isinstance(h["uptime_seconds"], int) and h["version"]


def test_ledger_survives_restart(project, stub, fresh):
    app = make_app(project, stub.url)
    with ServerThread(app) as server:
        oai(server).chat.completions.create(model="gpt-4o",
                                            messages=[{"role": "user", "content": pasted_request(project)}])
    # the lifespan shutdown drained the recorder before the server stopped
    count = ledger.count(project.store)
    with Workspace.open(project.root) as ws2:
        assert ledger.count(ws2.store) == count
        app2 = build_app(ws2, HarnessConfig(proxy=ProxyConfig(openai_base=stub.url + "/v1")))
        with ServerThread(app2) as server:
            s = httpx.get(server.url + "/status").json()["savings"]
        assert s["session_tokens_saved"] == 0  # a new session...
        assert s["cycle_tokens_saved"] > 0     # ...in the same billing cycle
        last = ledger.latest_session(ws2.store)
        assert last is not None and last[2] is not None  # ended cleanly


def test_mcp_is_mounted(proxy):
    import anyio
    from mcp import Client

    async def call():
        async with Client(proxy.url + "/mcp", mode="legacy") as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            res = await c.call_tool("savings_summary", {})
            return tools, res.structured_content

    tools, summary = anyio.run(call)
    assert {"context_query", "index_status", "savings_summary"} <= tools
    assert set(summary) == {"session_tokens_saved", "session_dollar_saved", "cycle_tokens_saved",
                            "cycle_dollar_saved", "provider_rate_per_token", "recall", "precision"}


def test_a_key_in_the_query_string_is_never_logged(proxy, fresh, caplog):
    # Some providers take the key as a query parameter (`?key=`, `?api-key=`); the HTTP client's
    # own request line, logged at INFO under `memstrata -v`, names the URL it called.
    caplog.set_level(logging.DEBUG)
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0,
                           default_query={"key": SENTINEL, "api-version": "2024-10-21"})
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    httpx.get(proxy.url + "/v1/models?api-key=" + SENTINEL)
    assert fresh.received[0].query == f"key={SENTINEL}&api-version=2024-10-21"  # forwarded as sent...
    # ...and the proxy's request line still logged, without the query.  (Only its own loggers are
    # read: this test's servers and SDK log their own access lines here, which serve does not.)
    ours = [r.getMessage() for r in caplog.records if r.name == "httpx" or r.name.startswith("memstrata")]
    assert any(m.startswith("HTTP Request: POST") for m in ours)
    assert not [m for m in ours if SENTINEL in m]


def test_api_keys_never_logged_or_stored(project, proxy, fresh, caplog):
    caplog.set_level(logging.DEBUG)
    oai(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": pasted_request(project)}])
    for _ in ant(proxy).messages.create(model="stub-slow", max_tokens=5, stream=True,
                                        messages=[{"role": "user", "content": "hi"}]):
        pass
    with pytest.raises(openai.AuthenticationError):
        oai(proxy).chat.completions.create(model="stub-401", messages=[{"role": "user", "content": "hi"}])
    proxy.app.state.harness.flush()
    # forwarded, as the provider needs it...
    assert fresh.received[0].headers["authorization"] == f"Bearer {SENTINEL}"
    assert [r.path for r in fresh.received] == ["/v1/chat/completions", "/v1/messages", "/v1/chat/completions"]
    sdk_headers = fresh.received[1].headers  # this SDK version sends Bearer; older ones x-api-key
    assert SENTINEL in sdk_headers.get("x-api-key", "") + sdk_headers.get("authorization", "")
    r = httpx.post(proxy.url + "/anthropic/v1/messages", json={"model": "m", "max_tokens": 5, "messages": []},
                   headers={"x-api-key": SENTINEL, "anthropic-version": "2023-06-01",
                            "anthropic-beta": "prompt-caching-2024-07-31"})
    assert r.status_code == 200
    sent = fresh.received[-1].headers
    assert (sent["x-api-key"], sent["anthropic-version"], sent["anthropic-beta"]) == (
        SENTINEL, "2023-06-01", "prompt-caching-2024-07-31")
    proxy.app.state.harness.flush()
    # ...but nowhere in our logs, the ledger database, its WAL, or the metrics
    assert caplog.records, "expected some log records to search"
    assert SENTINEL not in caplog.text
    for f in project.store.path.parent.iterdir():
        if f.is_file():
            assert SENTINEL.encode() not in f.read_bytes(), f.name
    assert SENTINEL not in httpx.get(proxy.url + "/metrics").text
    assert SENTINEL not in httpx.get(proxy.url + "/status").text


@pytest.mark.parametrize("suffix", ["/anthropic", "/anthropic/v1"])
def test_an_openai_client_given_the_anthropic_route_is_told_the_route_and_its_key_goes_nowhere(proxy, fresh, suffix):
    client = openai.OpenAI(base_url=proxy.url + suffix, api_key=SENTINEL, max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "OPENAI_BASE_URL" in str(info.value) and "/v1" in str(info.value)
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="text-embedding-3-small", input="hi")
    assert fresh.received == []  # nothing forwarded to the Anthropic upstream


def test_an_anthropic_client_given_the_root_url_is_told_the_route_and_its_key_goes_nowhere(proxy, fresh):
    client = anthropic.Anthropic(base_url=proxy.url, api_key=SENTINEL, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert "/anthropic" in str(info.value) and "ANTHROPIC_BASE_URL" in str(info.value)
    for call in (lambda: client.models.list(), lambda: client.models.retrieve("claude-sonnet-4-5"),
                 lambda: client.messages.count_tokens(model="claude-sonnet-4-5",
                                                      messages=[{"role": "user", "content": "hi"}])):
        with pytest.raises(anthropic.NotFoundError):
            call()
    assert fresh.received == []  # nothing forwarded to the OpenAI upstream


def test_an_openai_client_given_the_root_url_is_told_the_v1_route(proxy, fresh):
    client = openai.OpenAI(base_url=proxy.url, api_key=SENTINEL, max_retries=0)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "/v1" in str(info.value) and "OPENAI_BASE_URL" in str(info.value)
    assert SENTINEL not in str(info.value)
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="gpt-4o", input="hi")
    assert "OPENAI_BASE_URL" in str(info.value)
    r = httpx.post(proxy.url + "/elsewhere", json={})
    assert r.status_code == 404 and "OPENAI_BASE_URL" not in r.text   # no hint where none applies
    assert fresh.received == []
