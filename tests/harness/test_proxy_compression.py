"""Compression through the running proxy: official SDKs -> uvicorn(memstrata) -> uvicorn(stub provider)."""

import copy
import threading
import time
import json

import anthropic
import httpx
import openai
import pytest

from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.compress_request import CompressionSettings
from memstrata.harness.proxy.forward import ProxyConfig
from tests.stub_provider import ServerThread, StubUpstream

from .test_compress_request import QUESTION, Agent, cat_n, read, source_of, whole

KEY = "sk-test-compression"
# Thresholds scaled to the fixture's files (the defaults are for real projects).
SETTINGS = CompressionSettings.for_mode("safe", min_tokens=400, paste_cap=0, trigger=3000, clear_at_least=1200,
                                        keep_tool_uses=2, keep_task_tool_uses=0, horizon_share=10.0, horizon=100)


@pytest.fixture(scope="module")
def stub():
    with StubUpstream(answer="Order.refund compares now - shipped_at with REFUND_WINDOW.").running() as s:
        yield s


@pytest.fixture(scope="module")
def proxy(shop_ws, stub):
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False, compression=SETTINGS)
    app = build_app(shop_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    with ServerThread(app) as server:
        server.app = app
        yield server


@pytest.fixture
def received(stub):
    stub.received.clear()
    return stub.received


def oai(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0)


def ant(proxy):
    return anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0)


def test_single_function_paste_forwarded_byte_identical(shop_ws, proxy, received):
    code = source_of(shop_ws, "shop/orders.py", "def place_order(")
    raw = json.dumps({"model": "gpt-4o", "messages": [
        {"role": "user", "content": f"```python\n{code}\n```\nWhy does place_order fail when one item is missing?"}]},
        indent=2).encode()
    r = httpx.post(proxy.url + "/v1/chat/completions", content=raw,
                   headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert r.status_code == 200
    assert received[-1].body == raw


def test_whole_file_paste_keeps_the_asked_function_whole(shop_ws, proxy, received):
    content = f"Here is shop/orders.py:\n```python\n{read(shop_ws, 'shop/orders.py')}```\n{QUESTION}"
    answer = oai(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": content}])
    assert answer.choices[0].message.content.startswith("Order.refund")
    sent = received[-1].json()["messages"][0]["content"]
    assert sent.startswith("Here is shop/orders.py:\n```python\n") and sent.endswith(QUESTION)
    assert source_of(shop_ws, "shop/orders.py", "def refund(") in sent
    assert "[memstrata: lines " in sent and "def summarize(order: Order) -> str:" not in sent
    assert len(sent) < len(content)


def test_repeated_read_is_deduplicated(shop_ws, proxy, received):
    agent = Agent(shop_ws, QUESTION)
    agent.read("shop/orders.py")
    agent.read("shop/pricing.py")
    body = agent.read("shop/orders.py")
    ant(proxy).messages.create(**body)
    sent = received[-1].json()["messages"]
    assert sent[2] == whole(body["messages"][2])
    assert sent[6]["content"][0]["tool_use_id"] == "toolu_03"
    assert sent[6]["content"][0]["content"].startswith("[memstrata: the same text as the earlier read of ")


def test_ten_turn_transcript_prefix_is_stable_except_at_compaction(shop_ws, proxy, received, monkeypatch):
    compressor = proxy.app.state.harness.proxy.compressor
    results = []
    real = compressor.compress

    def recording(body, api):  # the real compressor; the test only keeps what it returned
        res = real(body, api)
        results.append(res)
        return res

    monkeypatch.setattr(compressor, "compress", recording)
    agent = Agent(shop_ws, QUESTION)
    client = ant(proxy)
    files = ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py", "shop/__init__.py"]
    for turn in range(10):
        body = agent.read(files[turn % len(files)]) if turn % 3 != 2 else agent.say(
            "Order.refund checks REFUND_WINDOW.", f"What about case {turn}?")
        client.messages.create(**body)
    sent = [r.json()["messages"] for r in received]
    assert len(sent) == len(results) == 10
    steps = 0
    for prev, now, res in zip(sent, sent[1:], results[1:]):
        if now[:len(prev)] == prev:
            assert not res.compaction
            continue
        steps += 1
        assert res.compaction and res.prefix_invalidated_tokens > 0
        changed = [(a, b) for a, b in zip(prev, now) if a != b]
        assert all(a["content"][0]["type"] == "tool_result" and "[memstrata:" in b["content"][0]["content"]
                   for a, b in changed)
    assert 1 <= steps <= 3


def test_cache_control_survives(shop_ws, proxy, received):
    agent = Agent(shop_ws, QUESTION)
    mark = {"type": "ephemeral"}
    client = ant(proxy)
    for path in ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py"]:
        body = agent.read(path)
        body["system"] = [{"type": "text", "text": "You are a coding agent.", "cache_control": mark}]
        for fixed in (2, 4):  # breakpoints that stay
            if fixed < len(body["messages"]):
                body["messages"][fixed]["content"][0]["cache_control"] = mark
        body["messages"][-1]["content"][0]["cache_control"] = mark  # and one that moves every turn
        client.messages.create(**copy.deepcopy(body))
        sent = received[-1].json()
        assert sent["system"] == body["system"]
        marks = [(i, j) for i, m in enumerate(sent["messages"]) for j, part in enumerate(m["content"])
                 if "cache_control" in part]
        assert marks == [(i, j) for i, m in enumerate(body["messages"]) for j, part in enumerate(m["content"])
                         if "cache_control" in part]
    # A step behind the first marker compacted the second marked result: its marker is kept.
    second = sent["messages"][4]["content"][0]
    assert second["cache_control"] == mark and "[memstrata:" in second["content"]


def test_tool_results_numbered_by_the_tool_keep_their_numbers(shop_ws, stub, received):
    # aggressive cuts the read on arrival (likely_file 0: even though the question is about its file)
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False,
                      compression=CompressionSettings.for_mode("aggressive", min_tokens=400, result_cap=800,
                                                              likely_file=0.0))
    agent = Agent(shop_ws, QUESTION)
    body = agent.read("shop/orders.py")
    with ServerThread(build_app(shop_ws, HarnessConfig(proxy=cfg, mount_mcp=False))) as server:
        ant(server).messages.create(**body)
    text = received[-1].json()["messages"][-1]["content"][0]["content"]
    numbered = cat_n(read(shop_ws, "shop/orders.py"), arrow=True).split("\n")
    start = next(i for i, ln in enumerate(numbered) if "def refund(" in ln)
    kept = "\n".join(ln.lstrip(" ") for ln in numbered[start:start + 8])  # the numbers' padding goes
    assert kept in text and "[memstrata: lines " in text


def test_large_requests_are_prepared_a_few_at_a_time(shop_ws, stub, received, monkeypatch):
    # Preparing is Python under the interpreter lock: more threads than cores only take turns.
    # Six large requests at once are prepared at most PREPARING_THREADS at a time, and all answered.
    from concurrent.futures import ThreadPoolExecutor
    from memstrata.harness.proxy import forward

    monkeypatch.setattr(forward, "PREPARING_THREADS", 2)
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False, compression=SETTINGS)
    app = build_app(shop_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    inside, peak, lock = [0], [0], threading.Lock()
    with ServerThread(app) as server:
        compressor = app.state.harness.proxy.compressor
        real = compressor.compress

        def slow(body, api):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            try:
                time.sleep(0.3)  # the lock is released: only the limiter keeps the others out
                return real(body, api)
            finally:
                with lock:
                    inside[0] -= 1

        monkeypatch.setattr(compressor, "compress", slow)
        note = "Order.refund compares now - shipped_at with REFUND_WINDOW. " * 1500  # > 64 KB
        assert len(note) > forward.INLINE_BODY_BYTES

        def ask(i: int) -> str:
            reply = ant(server).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[
                {"role": "user", "content": f"Question {i}: {note}"}])
            return reply.content[0].text

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(ask, range(6)))
    assert all(answers) and len(received) == 6
    assert peak[0] == 2


def test_background_work_waits_while_a_request_is_prepared(shop_ws, stub, received, monkeypatch):
    # serve's whole-file token counts pause on Proxy.wait_quiet between steps: it must hold them
    # while a request is being compressed and let them go as soon as none is.
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False, compression=SETTINGS)
    app = build_app(shop_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    proxy = app.state.harness.proxy
    with ServerThread(app) as server:
        compressor = proxy.compressor
        real = compressor.compress
        entered, release, waited = threading.Event(), threading.Event(), threading.Event()

        def held(body, api):
            entered.set()
            release.wait(30)
            return real(body, api)

        monkeypatch.setattr(compressor, "compress", held)
        asking = threading.Thread(target=lambda: ant(server).messages.create(
            model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "hello"}]))
        asking.start()
        assert entered.wait(30)
        background = threading.Thread(target=lambda: (proxy.wait_quiet(max_wait=30), waited.set()))
        background.start()
        assert not waited.wait(0.5)  # held while the request is prepared (the bound is 30 s here)
        release.set()
        assert waited.wait(30)  # and let go once it is
        asking.join(30)
        background.join(30)
    proxy.wait_quiet()  # nothing in preparation: returns at once
    assert len(received) == 1


@pytest.mark.parametrize("odd", ["\\ud83d", "\\udc00\\ud800"])
def test_a_lone_surrogate_escape_goes_out_as_it_came_in(shop_ws, proxy, received, odd):
    # JSON escapes of a lone surrogate are valid JSON (a cut emoji, binary tool output as
    # JSON.stringify writes it); a compressed request must still be written out and forwarded.
    content = f"Here is shop/orders.py:\n```python\n{read(shop_ws, 'shop/orders.py')}```\n{QUESTION}"
    raw = ('{"model": "gpt-4o", "messages": [{"role": "user", "content": ' + json.dumps(content)[:-1]
           + "tail " + odd + '"}]}').encode()
    r = httpx.post(proxy.url + "/v1/chat/completions", content=raw,
                   headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert r.status_code == 200, r.text
    forwarded = received[-1].body
    assert "[memstrata: lines " in forwarded.decode("utf-8")  # compressed, and valid UTF-8
    assert json.loads(forwarded)["messages"][0]["content"].endswith(json.loads(f'"tail {odd}"'))


def test_a_number_json_cannot_spell_again_forwards_the_request_unchanged(shop_ws, proxy, received):
    content = f"Here is shop/orders.py:\n```python\n{read(shop_ws, 'shop/orders.py')}```\n{QUESTION}"
    raw = ('{"model": "gpt-4o", "temperature": 1e400, "messages": [{"role": "user", "content": '
           + json.dumps(content) + '}]}').encode()
    r = httpx.post(proxy.url + "/v1/chat/completions", content=raw,
                   headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert received[-1].body == raw  # never "Infinity", which is not JSON


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "-1e999"])
def test_a_non_finite_number_forwards_the_request_unchanged(shop_ws, proxy, received, number):
    # Python's reader takes these; JSON has no way to write them back (a fast writer would say null).
    content = f"Here is shop/orders.py:\n```python\n{read(shop_ws, 'shop/orders.py')}```\n{QUESTION}"
    raw = ('{"model": "gpt-4o", "top_p": ' + number + ', "messages": [{"role": "user", "content": '
           + json.dumps(content) + '}]}').encode()
    r = httpx.post(proxy.url + "/v1/chat/completions", content=raw,
                   headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert received[-1].body == raw


def test_numbers_go_out_as_they_came_in_when_the_request_is_compressed(shop_ws, proxy, received):
    # An integer past 64 bits, floats near the edges of their range: compressed, and every number
    # forwarded with the value it was sent with.
    content = f"Here is shop/orders.py:\n```python\n{read(shop_ws, 'shop/orders.py')}```\n{QUESTION}"
    numbers = {"big": 123456789012345678901234567890, "small": -(2 ** 70), "tiny": 5e-324, "huge": 1.7e308,
               "third": 0.1 + 0.2, "int": 7, "zero": -0.0}
    raw = json.dumps({"model": "gpt-4o", "metadata": numbers,
                      "messages": [{"role": "user", "content": content}]}).encode()
    r = httpx.post(proxy.url + "/v1/chat/completions", content=raw,
                   headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    assert r.status_code == 200, r.text
    sent = json.loads(received[-1].body)
    assert "[memstrata: lines " in sent["messages"][0]["content"]
    assert sent["metadata"] == numbers and repr(sent["metadata"]["zero"]) == "-0.0"
    assert all(type(sent["metadata"][k]) is type(v) for k, v in numbers.items())
