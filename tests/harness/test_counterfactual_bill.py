"""The ledger's savings against an independent bill: the same conversation sent straight to a caching
stand-in provider and through the proxy to another, both billing by the providers' published caching
rules (tests/caching_provider.py).  The ledger's dollar_saved must match the difference of the bills."""

import copy
import json

import anthropic
import httpx
import openai
import pytest

from memstrata.harness.proxy.app import HarnessConfig, build_app, status_payload
from memstrata.harness.proxy.compress_request import CompressionSettings
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.harness.proxy.providers import Providers
from memstrata.harness.proxy.savings import window
from memstrata.storage import ledger
from tests.caching_provider import ANTHROPIC_RATES, OPENAI_RATES, CachingProvider
from tests.stub_provider import ServerThread

from .test_compress_request import QUESTION, Agent

KEY = "sk-test-counterfactual"
# Thresholds scaled to the fixture's files, so a dozen turns take compaction steps.
SETTINGS = CompressionSettings.for_mode("safe", min_tokens=400, paste_cap=0, trigger=3000, clear_at_least=1200,
                                        keep_tool_uses=2, keep_task_tool_uses=0, horizon_share=10.0, horizon=100)
FILES = ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py", "shop/__init__.py"]
MARK = {"type": "ephemeral"}


def conversation(ws, turns=14):
    """An agent's requests, Claude Code style: breakpoints on the system block and on the last block."""
    agent = Agent(ws, QUESTION)
    for turn in range(turns):
        if turn % 3 == 2:
            body = agent.say("Order.refund checks REFUND_WINDOW.", f"What about case {turn}?")
        else:
            body = agent.read(FILES[turn % len(FILES)])
        body["model"] = "claude-sonnet-4-6"
        body["system"] = [{"type": "text", "text": "You are a coding agent. " * 40, "cache_control": MARK}]
        body["messages"][-1]["content"][-1]["cache_control"] = MARK
        yield body


def as_openai(body):
    """The same conversation in chat-completions form (tool calls and tool messages)."""
    msgs = [{"role": "system", "content": body["system"][0]["text"]}]
    for m in body["messages"]:
        texts = [p["text"] for p in m["content"] if p["type"] == "text"]
        calls = [p for p in m["content"] if p["type"] == "tool_use"]
        results = [p for p in m["content"] if p["type"] == "tool_result"]
        if m["role"] == "assistant":
            msgs.append({"role": "assistant", "content": " ".join(texts) or None, "tool_calls": [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c["input"])}} for c in calls]
                or None})
            if msgs[-1]["tool_calls"] is None:
                del msgs[-1]["tool_calls"]
        elif results:
            msgs.extend({"role": "tool", "tool_call_id": r["tool_use_id"], "content": r["content"]} for r in results)
        else:
            msgs.append({"role": "user", "content": " ".join(texts)})
    return {"model": "gpt-4o", "messages": msgs}


@pytest.fixture
def providers():
    through, direct = CachingProvider(), CachingProvider()
    with ServerThread(through.app) as t, ServerThread(direct.app) as d:
        through.url, direct.url = t.url, d.url
        yield through, direct


def run(ws, through, mode="safe", settings=SETTINGS):
    cfg = ProxyConfig(openai_base=through.url + "/v1", anthropic_base=through.url, trust_env=False,
                      compression=settings if mode == "safe" else CompressionSettings.for_mode("off"))
    app = build_app(ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    return app, ServerThread(app)


def reported(app, ws):
    harness = app.state.harness
    harness.flush()
    return window(ws.store, None, Providers.defaults(), session_ids=[harness.session_id])


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_ledger_saving_matches_the_bills(shop_ws, providers, api):
    through, direct = providers
    app, server = run(shop_ws, through)
    rates = ANTHROPIC_RATES if api == "anthropic" else OPENAI_RATES
    with server:
        for body in conversation(shop_ws):
            if api == "anthropic":
                anthropic.Anthropic(base_url=server.url + "/anthropic", api_key=KEY, max_retries=0).messages.create(
                    **copy.deepcopy(body))
                httpx.post(direct.url + "/v1/messages", json=body).raise_for_status()
            else:
                body = as_openai(body)
                openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
                    **copy.deepcopy(body))
                httpx.post(direct.url + "/v1/chat/completions", json=body).raise_for_status()
        w = reported(app, shop_ws)
        status = status_payload(app.state.harness)
    rows = [e for e in ledger.entries(shop_ws.store, limit=100) if e.session_id == app.state.harness.session_id]
    assert len(rows) == 14 and all(e.cf_input_tokens is not None for e in rows)
    assert w.compactions >= 1, "the conversation must take compaction steps"
    assert sum(b.cache_read for b in direct.bills) > 0  # the direct run really used the cache
    true_saving = direct.total(rates) - through.total(rates)  # can be negative: compaction steps cost writes
    # Within 2 % of the true difference; where the steps' cache writes eat nearly all of the saving,
    # 2 % of a difference near zero is no measure, and the error is held to 0.2 % of the bill.
    assert abs(w.dollar_saved - true_saving) <= max(0.02 * abs(true_saving), 0.002 * direct.total(rates))
    # each bill on its own: the counterfactual against the direct run, the reported one against the proxied run
    prompt_only = {**rates, "output": 0.0}
    assert w.bill_direct == pytest.approx(direct.total(prompt_only), rel=0.02)
    assert w.bill_proxied == pytest.approx(through.total(prompt_only), rel=1e-4)
    assert status["session"]["bill_direct"] == w.bill_direct and status["session"]["dollar_saved"] == w.dollar_saved


def test_uncompressed_traffic_saves_nothing(shop_ws, providers):
    """With compression off the proxy forwards what the client sent: the two bills agree."""
    through, direct = providers
    app, server = run(shop_ws, through, mode="off")
    with server:
        for body in conversation(shop_ws, turns=8):
            anthropic.Anthropic(base_url=server.url + "/anthropic", api_key=KEY, max_retries=0).messages.create(
                **copy.deepcopy(body))
        w = reported(app, shop_ws)
    assert sum(b.cache_read for b in through.bills) > 0
    assert w.bill_direct == pytest.approx(w.bill_proxied, rel=1e-9)
    assert w.dollar_saved == pytest.approx(0.0, abs=1e-12)


def test_uncompressed_traffic_near_the_cacheable_minimum_saves_nothing(shop_ws, providers):
    """A system prompt just under the 1,024-token minimum in cl100k, just over it in the provider's own
    count: the provider caches it, the proxy's shadow cache would not.  Forwarded unchanged, the
    request's counterfactual is what the provider billed, so no saving appears from nowhere."""
    from memstrata.compressor.tokens import count_tokens

    through, _ = providers
    text = "You are a coding agent. " * 200
    while count_tokens(text) > 1022:
        text = text[: text.rstrip().rfind(" ")] + " "
    assert count_tokens(text) == 1022
    body = {"model": "claude-sonnet-4-6", "max_tokens": 10,
            "system": [{"type": "text", "text": text, "cache_control": MARK}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}]}
    app, server = run(shop_ws, through, mode="off")
    with server:
        client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key=KEY, max_retries=0)
        for _ in range(4):
            client.messages.create(**copy.deepcopy(body))
        w = reported(app, shop_ws)
    assert through.bills[0].cache_write > 0 and through.bills[-1].cache_read > 0  # the provider cached it
    assert w.bill_direct == pytest.approx(w.bill_proxied, rel=1e-9)
    assert w.dollar_saved == pytest.approx(0.0, abs=1e-12)
