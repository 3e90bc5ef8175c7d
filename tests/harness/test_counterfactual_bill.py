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


# -- Anthropic's 1-hour cache ---------------------------------------------------------------

HOUR = {"type": "ephemeral", "ttl": "1h"}


def test_shadow_keeps_one_hour_entries_an_hour_and_splits_the_writes_by_the_published_rule():
    """Anthropic's rule for mixed lifetimes: A the prefix read, B the last 1-hour breakpoint after it, C
    the last breakpoint; A..B is written at the 1-hour rate, B..C at the 5-minute one.  A 1-hour entry
    outlives an idle gap a 5-minute one does not, and a hit renews an entry for its own lifetime."""
    from memstrata.harness.proxy.counterfactual import ShadowCache, prompt_blocks

    system = [{"type": "text", "text": "You are a coding agent. " * 260, "cache_control": HOUR}]

    def body(*turns, tail=MARK):
        msgs = [{"role": "user" if i % 2 == 0 else "assistant",
                 "content": [{"type": "text", "text": f"turn {i}: " + "some words " * 150}]} for i in range(turns[0])]
        msgs[-1]["content"][-1]["cache_control"] = tail
        return {"model": "claude-sonnet-4-6", "system": system, "messages": msgs}

    shadow = ShadowCache()
    first = body(3)
    blocks = prompt_blocks(first, "anthropic", "claude-sonnet-4-6")
    sys_tokens, total = blocks[0].tokens, blocks[-1].tokens
    assert sys_tokens >= 1024 and blocks[0].one_hour and not blocks[-1].one_hour
    split = shadow.bill(first, "anthropic", "anthropic", "claude-sonnet-4-6", 0.0)
    # nothing cached yet: the system prompt written for an hour, the rest for 5 minutes
    assert (split.cache_read, split.cache_write, split.cache_write_1h) == (0, total, sys_tokens)
    # 7 minutes later the 5-minute entry is gone, the 1-hour one read (and renewed for an hour)
    split = shadow.bill(body(5), "anthropic", "anthropic", "claude-sonnet-4-6", 420.0)
    assert split.cache_read == sys_tokens and split.cache_write_1h == 0
    # an hour after it was written, but within an hour of its last read: still there
    assert shadow.bill(body(7), "anthropic", "anthropic", "claude-sonnet-4-6", 3700.0).cache_read == sys_tokens
    # past an hour since: written again
    split = shadow.bill(body(9), "anthropic", "anthropic", "claude-sonnet-4-6", 8000.0)
    assert split.cache_read == 0 and split.cache_write_1h == sys_tokens
    # every breakpoint 1-hour: everything up to the last one is a 1-hour write (B = C)
    split = ShadowCache().bill(body(3, tail=HOUR), "anthropic", "anthropic", "claude-sonnet-4-6", 0.0)
    assert split.cache_write == split.cache_write_1h == total
    # a 1-hour breakpoint under the cacheable minimum caches nothing, so it is no position B
    short = dict(body(9), system=[{"type": "text", "text": "Be terse.", "cache_control": HOUR}])
    split = ShadowCache().bill(short, "anthropic", "anthropic", "claude-sonnet-4-6", 0.0)
    assert split.cache_write > 0 and split.cache_write_1h == 0


class Clock:
    """One wall clock for the proxy's shadow and both stand-ins, moved by the test (idle gaps)."""

    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class _ClockedTime:
    """forward.py's ``time`` module with its wall clock (a request's arrival) replaced."""

    def __init__(self, clock: Clock):
        self._clock = clock

    def time(self) -> float:
        return self._clock()

    def __getattr__(self, name):
        import time

        return getattr(time, name)


@pytest.fixture
def clocked(monkeypatch):
    from memstrata.harness.proxy import forward

    clock = Clock()
    monkeypatch.setattr(forward, "time", _ClockedTime(clock))
    through, direct = CachingProvider(clock=clock), CachingProvider(clock=clock)
    with ServerThread(through.app) as t, ServerThread(direct.app) as d:
        through.url, direct.url = t.url, d.url
        yield clock, through, direct


# Seconds before each turn: a minute of work, and now and then an idle gap longer than the 5-minute
# lifetime (the user reading a diff) but well within the hour; once, past the hour.
GAPS = {3: 420.0, 7: 420.0, 10: 3700.0, 12: 400.0}


def conversation_1h(ws, turns=14, tail=MARK):
    """A conversation whose long system prompt carries a 1-hour breakpoint (the stable prefix kept
    through idle gaps) and whose newest block carries ``tail``."""
    for body in conversation(ws, turns):
        body["system"] = [{"type": "text", "text": "You are a coding agent. " * 260, "cache_control": HOUR}]
        body["messages"][-1]["content"][-1]["cache_control"] = tail
        yield body


def _send(ws, clocked, bodies, stream=False):
    clock, through, direct = clocked
    app, server = run(ws, through)
    with server:
        client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key=KEY, max_retries=0)
        for turn, body in enumerate(bodies):
            clock.t += GAPS.get(turn, 60.0)
            if stream:
                with client.messages.stream(**copy.deepcopy(body)) as s:
                    s.get_final_message()
            else:
                client.messages.create(**copy.deepcopy(body))
            httpx.post(direct.url + "/v1/messages", json=body).raise_for_status()
        w = reported(app, ws)
        status = status_payload(app.state.harness)
    return app, w, status


def _check_bills(w, through, direct, rates=ANTHROPIC_RATES):
    true_saving = direct.total(rates) - through.total(rates)
    assert abs(w.dollar_saved - true_saving) <= max(0.02 * abs(true_saving), 0.002 * direct.total(rates))
    prompt_only = {**rates, "output": 0.0}
    assert w.bill_direct == pytest.approx(direct.total(prompt_only), rel=0.02)
    assert w.bill_proxied == pytest.approx(through.total(prompt_only), rel=1e-4)
    assert w.cache_write_1h_tokens == sum(b.cache_write_1h for b in through.bills)
    assert w.cache_write_tokens == sum(b.cache_write + b.cache_write_1h for b in through.bills)


@pytest.mark.parametrize("tail", [MARK, HOUR], ids=["system-1h-tail-5m", "all-1h"])
def test_ledger_matches_the_bills_with_one_hour_breakpoints(shop_ws, clocked, tail):
    """The same conversation as test_ledger_saving_matches_the_bills, with a 1-hour breakpoint on the
    system prompt (and on every breakpoint in the second case) and idle gaps past 5 minutes: the
    provider keeps the 1-hour entries through them and bills their writes at 2x, the ledger too."""
    clock, through, direct = clocked
    app, w, status = _send(shop_ws, clocked, conversation_1h(shop_ws, tail=tail))
    assert w.compactions >= 1, "the conversation must take compaction steps"
    assert sum(b.cache_write_1h for b in direct.bills) > 0 and sum(b.cache_read for b in direct.bills) > 0
    # the idle gaps: a 1-hour entry read where a 5-minute one had expired
    gap_turns = [t for t, s in GAPS.items() if s < 3600]
    assert all(direct.bills[t].cache_read > 0 for t in gap_turns)
    assert direct.bills[10].cache_read == 0  # past the hour: nothing left
    _check_bills(w, through, direct)
    assert status["session"]["cache_write_1h_tokens"] == w.cache_write_1h_tokens
    assert status["session"]["bill_proxied"] == w.bill_proxied
    rows = [e for e in ledger.entries(shop_ws.store, limit=100) if e.session_id == app.state.harness.session_id]
    assert len(rows) == 14 and all(e.cf_cache_write_1h_tokens is not None for e in rows)


def test_streamed_answers_with_one_hour_writes_are_billed_like_the_provider(shop_ws, clocked):
    """The usage of a streamed answer (message_start) carries the 1-hour split too."""
    clock, through, direct = clocked
    app, w, _ = _send(shop_ws, clocked, conversation_1h(shop_ws, turns=9), stream=True)
    rows = [e for e in ledger.entries(shop_ws.store, limit=100) if e.session_id == app.state.harness.session_id]
    assert len(rows) == 9 and all(e.stream for e in rows)
    assert [e.cache_write_1h_tokens for e in rows] == [b.cache_write_1h for b in through.bills]
    assert sum(b.cache_write_1h for b in through.bills) > 0
    _check_bills(w, through, direct)


# -- OpenAI: a prefix shared inside a message -------------------------------------------------


def test_openai_shadow_reads_a_prefix_shared_inside_a_message():
    """OpenAI caches token prefixes, not messages: the same paste asked about again in a new
    conversation (or a message edited at its end) reads the cached part of the message."""
    from memstrata.compressor.tokens import count_tokens
    from memstrata.harness.proxy.counterfactual import ShadowCache

    paste = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(400))

    def body(question):
        return {"model": "gpt-4o", "messages": [{"role": "system", "content": "You review code."},
                                                {"role": "user", "content": paste + question}]}

    shadow = ShadowCache()
    assert shadow.bill(body("What does f3 do?"), "openai", "openai", "gpt-4o", 0.0).cache_read == 0
    shared = count_tokens("You review code.") + count_tokens(paste)
    split = shadow.bill(body("Which function adds 7?"), "openai", "openai", "gpt-4o", 100.0)
    # the paste is read up to its last mark (a line break within about 128 tokens of the end),
    # in 128-token steps
    assert split.cache_read % 128 == 0 and shared - 2 * 128 <= split.cache_read <= shared
    # the message sent again whole (a hit on it) keeps what is inside it too: 5 minutes after the
    # first request, but within 5 minutes of the second, a third question still reads the paste
    assert shadow.bill(body("Which function adds 7?"), "openai", "openai", "gpt-4o", 200.0).cache_read > 0
    assert shadow.bill(body("And f9?"), "openai", "openai", "gpt-4o", 450.0).cache_read == split.cache_read
    # past the lifetime, nothing
    assert shadow.bill(body("And f10?"), "openai", "openai", "gpt-4o", 800.0).cache_read == 0


def test_ledger_matches_the_bills_when_pastes_share_a_prefix_inside_a_message(shop_ws, providers):
    """New conversations pasting the same files with another question each: the direct run reads
    the pastes from OpenAI's cache, and the ledger's counterfactual must bill them so."""
    through, direct = providers
    app, server = run(shop_ws, through)
    files = "\n\n".join(f"{p}:\n```python\n{read_file(shop_ws, p)}```" for p in FILES[:3])
    sent = []
    with server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
        for question in ("Why does Order.refund fail?", "How is the tax computed?", "Where is stock reserved?",
                         "What does shipping cost?"):
            body = {"model": "gpt-4o", "messages": [{"role": "system", "content": "You review code. " * 20},
                                                    {"role": "user", "content": f"{files}\n\n{question}"}]}
            sent.append(body["messages"][-1]["content"])
            client.chat.completions.create(**copy.deepcopy(body))
            httpx.post(direct.url + "/v1/chat/completions", json=body).raise_for_status()
        w = reported(app, shop_ws)
    assert sum(b.cache_read for b in direct.bills) > 0  # the direct run read the pastes from the cache
    assert all(r["messages"][-1]["content"] != s for r, s in zip(through.received, sent))  # compressed
    true_saving = direct.total(OPENAI_RATES) - through.total(OPENAI_RATES)
    prompt_only = {**OPENAI_RATES, "output": 0.0}
    assert w.bill_direct == pytest.approx(direct.total(prompt_only), rel=0.02)
    assert abs(w.dollar_saved - true_saving) <= 0.02 * abs(true_saving)


def read_file(ws, path):
    return (ws.root / path).read_text()
