"""Honest accounting (issue 9 rule 6): whole-request counts, the provider's usage with its
cache fields in both wire formats, cache-aware dollars net of the misses the proxy caused.

The official SDKs talk to the app on real uvicorn, which forwards to the stand-in
provider with its prompt cache on.
"""

import json
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from memstrata.compressor.tokens import count_tokens
from memstrata.harness.proxy.analysis import parse_answer, prompt_tokens
from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.compress_request import CompressionResult, CompressionSettings
from memstrata.harness.proxy.providers import Providers
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.harness.proxy.recorder import Counting, Finished, Recorder, miss_split
from memstrata.harness.proxy.savings import savings_report, window
from memstrata.storage import Store, ledger
from memstrata.storage.ledger import LedgerEntry
from tests.stub_provider import ServerThread, StubUpstream

TOOLS_OPENAI = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the project and return its text.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
TOOLS_ANTHROPIC = [{"name": "read_file", "description": "Read a file of the project and return its text.",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                                     "required": ["path"]}}]
CACHED = {"type": "ephemeral"}


def compact(v) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@pytest.fixture(scope="module")
def ws(python_ws):
    return python_ws


@pytest.fixture(scope="module")
def stub():
    with StubUpstream(answer="Use AuthService.login.", prompt_cache=True).running() as s:
        yield s


@pytest.fixture(scope="module")
def server(ws, stub):
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False,
                      compression=CompressionSettings.for_mode("aggressive", min_tokens=50))
    app = build_app(ws, HarnessConfig(proxy=cfg))
    with ServerThread(app) as srv:
        srv.harness = app.state.harness
        yield srv


def new_rows(ws, server, before: int) -> list[LedgerEntry]:
    server.harness.flush()
    return ledger.entries(ws.store, limit=10_000)[before:]


def nrows(ws, server) -> int:
    server.harness.flush()
    return ledger.count(ws.store)


# -- whole request ------------------------------------------------------------------------


def test_tokens_original_counts_system_tools_and_messages(ws, server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    system = "You are a careful reviewer of Python code. Answer in one sentence."
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "What does login return?"}]
    before = nrows(ws, server)
    client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS_OPENAI)
    (row,) = new_rows(ws, server, before)
    expected = (count_tokens(system) + count_tokens("What does login return?")
                + count_tokens(compact(TOOLS_OPENAI[0]["function"])))
    assert row.tokens_original == row.tokens_forwarded == expected

    aclient = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key="k", max_retries=0)
    before = nrows(ws, server)
    aclient.messages.create(model="claude-sonnet-4-6", max_tokens=50, tools=TOOLS_ANTHROPIC,
                            system=[{"type": "text", "text": system}],
                            messages=[{"role": "user", "content": "What does login return?"},
                                      {"role": "assistant", "content": [
                                          {"type": "tool_use", "id": "t1", "name": "read_file",
                                           "input": {"path": "app/auth/service.py"}}]},
                                      {"role": "user", "content": [
                                          {"type": "tool_result", "tool_use_id": "t1", "content": "no such file"}]}])
    (row,) = new_rows(ws, server, before)
    expected = (count_tokens(system) + count_tokens(compact(TOOLS_ANTHROPIC[0])) + count_tokens("What does login return?")
                + count_tokens("read_file") + count_tokens(json.dumps({"path": "app/auth/service.py"}))
                + count_tokens("no such file"))
    assert row.tokens_original == expected


# -- the provider's usage -----------------------------------------------------------------


def long_text(n_words: int) -> str:
    return " ".join(f"word{i % 97}" for i in range(n_words))


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_cache_usage_recorded(ws, server, stub, stream):
    client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key="k", max_retries=0)
    prefix = ("streamed " if stream else "json ") + long_text(3000)
    usages = []
    before = nrows(ws, server)
    for turn in ("first question?", "second question?"):
        kw = dict(model="claude-sonnet-4-6", max_tokens=50, system=[{"type": "text", "text": "terse",
                                                                     "cache_control": CACHED}],
                  messages=[{"role": "user", "content": [{"type": "text", "text": prefix, "cache_control": CACHED},
                                                         {"type": "text", "text": turn}]}])
        if stream:
            with client.messages.stream(**kw) as s:
                usages.append(s.get_final_message().usage)
        else:
            usages.append(client.messages.create(**kw).usage)
    rows = new_rows(ws, server, before)
    assert len(rows) == 2
    for row, usage in zip(rows, usages):
        assert row.stream is stream
        assert (row.input_tokens, row.cache_read_tokens, row.cache_write_tokens) == (
            usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens)
        assert row.output_tokens == usage.output_tokens
    assert rows[0].cache_read_tokens == 0 and rows[0].cache_write_tokens > 0  # first: written to the cache
    assert rows[1].cache_read_tokens > 0                                       # second: the prefix hits


@pytest.mark.parametrize("stream", [False, True])
def test_openai_cached_tokens_recorded(ws, server, stub, stream):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    prefix = ("streamed " if stream else "json ") + long_text(3000)
    usages = []
    before = nrows(ws, server)
    for turn in ("first question?", "second question?"):
        messages = [{"role": "user", "content": prefix}, {"role": "user", "content": turn}]
        if stream:
            chunks = list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                                         stream_options={"include_usage": True}))
            usages.append(chunks[-1].usage)
        else:
            usages.append(client.chat.completions.create(model="gpt-4o", messages=messages).usage)
    rows = new_rows(ws, server, before)
    for row, usage in zip(rows, usages):
        cached = usage.prompt_tokens_details.cached_tokens
        # provider-neutral: input_tokens are the ones billed at the full rate
        assert (row.input_tokens, row.cache_read_tokens) == (usage.prompt_tokens - cached, cached)
        assert row.cache_write_tokens is None and row.output_tokens == usage.completion_tokens
        assert row.prompt_tokens_reported == usage.prompt_tokens
    assert rows[0].cache_read_tokens == 0 and rows[1].cache_read_tokens >= 1024


def test_status_and_metrics_report_cache_figures(ws, server):
    code = "\n".join((Path(ws.root) / p).read_text() for p in ("app/auth/service.py", "app/reports.py"))
    openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": f"```python\n{code}\n```\nWhat does AuthService.logout do?"}])
    server.harness.flush()
    st = httpx.get(server.url + "/status").json()
    rows = ledger.entries(ws.store, limit=10_000, session_ids=[server.harness.session_id])
    ok = [r for r in rows if r.status == 200]
    session = st["session"]
    assert session["id"] == server.harness.session_id
    assert session["cache_read_tokens"] == sum(r.cache_read_tokens or 0 for r in ok) > 0
    assert session["cache_write_tokens"] == sum(r.cache_write_tokens or 0 for r in ok) > 0
    assert session["input_tokens"] == sum(r.input_tokens or 0 for r in ok)
    assert session["requests"] == len(rows)
    assert st["cycle"]["requests"] >= len(rows)
    text = httpx.get(server.url + "/metrics").text
    project = Path(ws.root).name

    def metric(name, **labels):
        want = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(want + " "))

    assert metric("memstrata_provider_tokens_total", kind="cache_read", project=project) == \
        session["cache_read_tokens"]
    assert metric("memstrata_provider_tokens_total", kind="cache_write", project=project) == \
        session["cache_write_tokens"]
    assert metric("memstrata_tokens_sent_total", project=project) == session["tokens_forwarded"]
    assert session["compressed_requests"] == 1 and session["dollar_saved_gross"] > 0
    # the dollars saved are the figure /status, the dashboard and `memstrata savings` call saved (the bills'
    # difference), not the gross estimate, which has a series named for it
    assert session["dollar_saved"] != pytest.approx(session["dollar_saved_gross"], abs=1e-6)
    assert metric("memstrata_dollars_saved", project=project) == pytest.approx(session["dollar_saved"], abs=1e-6)
    assert metric("memstrata_dollars_saved_gross_total", project=project) == pytest.approx(
        session["dollar_saved_gross"], abs=1e-6)
    assert metric("memstrata_cache_miss_dollars_total", project=project) == session["cache_miss_dollars"] == 0


# -- dollars ------------------------------------------------------------------------------


def test_saved_tokens_priced_at_the_billed_mix(tmp_path):
    """1000 tokens saved on a request billed 100 fresh / 800 cache read / 100 cache write."""
    p = Providers.defaults()
    rate = p.rate("claude-sonnet-4-6", "anthropic")
    e = LedgerEntry(time=10.0, endpoint="anthropic.messages", provider="anthropic", model="claude-sonnet-4-6",
                    tokens_original=3000, tokens_forwarded=2000, status=200, compressed=True,
                    input_tokens=100, cache_read_tokens=800, cache_write_tokens=100, output_tokens=10)
    with Store(tmp_path / "index.db") as store:
        ledger.record(store, [e])
        w = savings_report(store, since=0, now=20.0, providers=p).session
    # the 1000 saved tokens split like the 1000 billed ones: 100 fresh, 800 read, 100 written
    expected = 100 * rate.input_per_token + 800 * rate.cache_read_per_token + 100 * rate.cache_write_per_token
    assert w.dollar_saved == pytest.approx(expected, abs=1e-9)
    assert w.dollar_saved < 1000 * rate.input_per_token  # cheaper than pricing every token at the input rate
    assert w.cache_miss_dollars == 0.0
    spent = 100 * 3e-6 + 800 * 0.3e-6 + 100 * 3.75e-6 + 10 * 15e-6
    assert w.dollar_spent == pytest.approx(spent, abs=1e-9)


def test_miss_split_rules():
    from memstrata.harness.proxy.analysis import Answer

    assert miss_split(0, "anthropic", Answer(cache_write_tokens=50)) == (0, 0)
    assert miss_split(500, "anthropic", Answer(input_tokens=5, cache_read_tokens=10, cache_write_tokens=400)) == (400, 0)
    assert miss_split(500, "anthropic", Answer(input_tokens=900, cache_read_tokens=0, cache_write_tokens=0)) == (0, 0)
    assert miss_split(500, "openai", Answer(input_tokens=300, cache_read_tokens=0)) == (0, 300)
    assert miss_split(500, "openai", Answer()) == (0, 500)  # no usage reported: assume the miss


def anthropic_json(usage: dict) -> bytes:
    return json.dumps({"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                       "usage": usage}).encode()


def record_answer(rec: Recorder, store, body: dict, comp, usage: dict, at: float, **begin) -> LedgerEntry:
    """The ledger row ``rec`` writes for one non-streamed Anthropic answer reporting ``usage``."""
    before = ledger.count(store)
    model = body["model"]
    if begin:
        begin.update(model=model, arrived=at)
    counting = rec.begin(body, comp, "anthropic", **begin)
    rec.commit(Finished(time=at, endpoint="anthropic.messages", api="anthropic", provider="anthropic",
                        model=model, stream=False, status=200, error=None, body=body, compression=comp,
                        response=anthropic_json(usage), duration_ms=5.0, session_id=None, counting=counting))
    rec.flush()
    (row,) = ledger.entries(store, limit=10_000)[before:]
    return row


def test_compaction_miss_is_subtracted(ws):
    """A request on which the proxy rewrote 2,000 already-forwarded tokens: the provider
    wrote them to its cache again (cache write) where they would have been cache reads."""
    store = ws.store
    rec = Recorder(ws, None, None, providers=Providers.defaults())
    try:
        body = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x " * 3000}]}
        fwd = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x " * 1000}]}
        comp = CompressionResult(body=fwd, reason="compaction", sources=["app/auth/service.py"])
        comp.mode, comp.conversation, comp.compaction, comp.prefix_invalidated_tokens = "safe", "conv-1", True, 2000
        usage = {"input_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 2500,
                 "output_tokens": 5}
        row = record_answer(rec, store, body, comp, usage, at=1000.0)
    finally:
        rec.close()
    assert (row.mode, row.conversation, row.compaction) == ("safe", "conv-1", True)
    assert (row.prefix_invalidated_tokens, row.miss_write_tokens, row.miss_input_tokens) == (2000, 2000, 0)
    assert row.counted and row.tokens_saved == prompt_tokens(body, "anthropic") - prompt_tokens(fwd, "anthropic")
    w = window(store, 999.0, Providers.defaults(), until=1001.0)  # that one row
    rate = Providers.defaults().rate("claude-sonnet-4-6", "anthropic")
    miss = 2000 * (rate.cache_write_per_token - rate.cache_read_per_token)
    billed = 10 + 0 + 2500
    # without the proxy's change those 2,000 written tokens would have been cache reads
    gross = row.tokens_saved * (10 * rate.input_per_token + 2000 * rate.cache_read_per_token
                                + 500 * rate.cache_write_per_token) / billed
    assert w.cache_miss_dollars == pytest.approx(miss, abs=1e-6)
    assert w.dollar_saved_gross == pytest.approx(gross, abs=1e-6)
    assert w.compactions == 1 and w.prefix_invalidated_tokens == 2000
    # dollar_saved is the counterfactual bill minus the real one.  The unmodified request marks no
    # cache_control (and the recorder was told of no caching provider): all of it would have been
    # input, in the provider's tokens (its count of the forwarded request over ours).
    scale = billed / row.tokens_forwarded
    assert row.cf_cache_read_tokens == row.cf_cache_write_tokens == 0
    assert row.cf_input_tokens == pytest.approx(row.tokens_original * scale, abs=1)
    proxied = 10 * rate.input_per_token + 2500 * rate.cache_write_per_token
    assert w.bill_proxied == pytest.approx(proxied, abs=1e-6)
    assert w.bill_direct == pytest.approx(row.cf_input_tokens * rate.input_per_token, abs=1e-6)
    assert w.dollar_saved == pytest.approx(w.bill_direct - w.bill_proxied, abs=1e-6)


def test_rows_without_counterfactual_keep_the_estimate(ws):
    """Rows written before the counterfactual existed (or without usage) are priced as before."""
    store = ws.store
    e = ledger.LedgerEntry(time=2000.0, endpoint="anthropic.messages", tokens_original=3000, tokens_forwarded=1000,
                           provider="anthropic", model="claude-sonnet-4-6", status=200, input_tokens=1000,
                           cache_read_tokens=0, cache_write_tokens=0)
    ledger.record(store, [e])
    w = window(store, 1999.0, Providers.defaults(), until=2001.0)
    rate = Providers.defaults().rate("claude-sonnet-4-6", "anthropic")
    assert w.cf_requests == 0 and w.bill_direct == 0
    assert w.dollar_saved == pytest.approx(2000 * rate.input_per_token, abs=1e-9)


def test_requests_on_models_without_a_rate_have_unknown_bills(ws):
    """Requests answered on models no rate is known for, with nothing saved: the two bills (and
    so the dollars saved) are unknown, not $0 each."""
    store = ws.store
    e = ledger.LedgerEntry(time=7000.0, endpoint="openai.chat", tokens_original=100, tokens_forwarded=100,
                           provider="openai", model="local-model-without-rate", status=200, input_tokens=90,
                           cache_read_tokens=10, output_tokens=5, cf_input_tokens=90, cf_cache_read_tokens=10,
                           cf_cache_write_tokens=0)
    ledger.record(store, [e])
    w = window(store, 6999.0, Providers.defaults(), until=7001.0)
    assert w.requests == w.cf_requests == 1 and w.tokens_saved == 0
    assert w.bill_direct is None and w.bill_proxied is None and w.dollar_saved is None
    # Nothing asked for at all: nothing to price, and nothing saved.
    empty = window(store, 8999.0, Providers.defaults(), until=9001.0)
    assert empty.requests == 0 and empty.dollar_saved == 0 and empty.bill_direct == 0


def test_row_written_at_completion_before_its_counts(ws):
    """commit() writes the row at once; counts still pending are filled in afterwards."""
    store = ws.store
    rec = Recorder(ws, None, None)
    try:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello there"}]}
        counting = Counting(body, None, "openai")  # not handed to the thread yet: counts pending
        before = ledger.count(store)
        item = Finished(time=2000.0, endpoint="openai.chat", api="openai", provider="openai", model="gpt-4o",
                        stream=False, status=200, error=None, body=body, compression=None,
                        response=b'{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}',
                        duration_ms=1.0, session_id=None, counting=counting)
        rec.commit(item)
        (row,) = ledger.entries(store, limit=10_000)[before:]  # on disk before the thread ran
        assert not row.counted and row.input_tokens == 9 and row.output_tokens == 2
        rec.flush()
    finally:
        rec.close()
    (row,) = ledger.entries(store, limit=10_000)[before:]
    assert row.counted and row.tokens_original == row.tokens_forwarded == count_tokens("hello there")
    assert ledger.count(store) == before + 1


def test_parse_answer_cache_fields():
    sse = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3,'
           b'"cache_read_input_tokens":400,"cache_creation_input_tokens":20,"output_tokens":1}}}\n\n'
           b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n')
    a = parse_answer("anthropic", True, sse)
    assert (a.input_tokens, a.cache_read_tokens, a.cache_write_tokens, a.output_tokens) == (3, 400, 20, 9)
    o = parse_answer("openai", False, json.dumps({"choices": [], "usage": {
        "prompt_tokens": 2000, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 1536}}}).encode())
    assert (o.input_tokens, o.cache_read_tokens, o.cache_write_tokens, o.output_tokens) == (464, 1536, None, 4)


# -- Anthropic's 1-hour cache -------------------------------------------------------------

ONE_HOUR_USAGE = {"input_tokens": 100, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 100_000,
                  "cache_creation": {"ephemeral_5m_input_tokens": 40_000, "ephemeral_1h_input_tokens": 60_000},
                  "output_tokens": 10}


def test_parse_answer_one_hour_cache_writes():
    """The 1-hour part of the writes is read from usage.cache_creation, in a JSON answer and in a stream
    (message_start's usage, and message_delta's where newer streams repeat the input side)."""
    a = parse_answer("anthropic", False, anthropic_json(ONE_HOUR_USAGE))
    assert (a.cache_write_tokens, a.cache_write_1h_tokens) == (100_000, 60_000)
    start = {**ONE_HOUR_USAGE, "output_tokens": 1}
    sse = (b'event: message_start\ndata: ' + json.dumps({"type": "message_start", "message": {"usage": start}}).encode()
           + b'\n\nevent: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n')
    a = parse_answer("anthropic", True, sse)
    assert (a.cache_write_tokens, a.cache_write_1h_tokens, a.output_tokens) == (100_000, 60_000, 9)
    late = {"input_tokens": 100, "cache_creation_input_tokens": 500, "output_tokens": 9,
            "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300}}
    sse = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":100,'
           b'"cache_creation_input_tokens":500,"output_tokens":1}}}\n\n'
           b'event: message_delta\ndata: ' + json.dumps({"type": "message_delta", "usage": late}).encode() + b'\n\n')
    assert parse_answer("anthropic", True, sse).cache_write_1h_tokens == 300
    # no split reported (an older API version): every write is a 5-minute one
    plain = {k: v for k, v in ONE_HOUR_USAGE.items() if k != "cache_creation"}
    assert parse_answer("anthropic", False, anthropic_json(plain)).cache_write_1h_tokens is None


def test_one_hour_cache_writes_are_billed_at_their_rate(ws):
    """The new user's report: a request with a 1-hour breakpoint, forwarded as sent, whose 100,000
    written tokens the provider billed at 2x the input rate.  Its row keeps the split, and every bill
    prices 5-minute writes at 1.25x and 1-hour ones at 2x: the prompt cost $0.6003, not $0.3753."""
    store = ws.store
    rec = Recorder(ws, None, None, providers=Providers.defaults())
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "system": [{"type": "text", "text": "long system prompt " * 500,
                        "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": "hi"}]}
    usage = {**ONE_HOUR_USAGE, "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100_000}}
    try:
        row = record_answer(rec, store, body, None, usage, at=3000.0, family="anthropic")
    finally:
        rec.close()
    assert (row.cache_write_tokens, row.cache_write_1h_tokens) == (100_000, 100_000)
    assert (row.cf_cache_write_tokens, row.cf_cache_write_1h_tokens) == (100_000, 100_000)  # the very request
    w = window(store, 2999.0, Providers.defaults(), until=3001.0)
    assert w.cache_write_1h_tokens == 100_000
    assert w.bill_proxied == pytest.approx((100 * 3.0 + 100_000 * 6.0) / 1e6)
    assert w.bill_direct == w.bill_proxied and w.dollar_saved == 0
    assert w.dollar_spent == pytest.approx((100 * 3.0 + 100_000 * 6.0 + 10 * 15.0) / 1e6)


def test_one_hour_share_of_saved_and_missed_writes_is_priced_at_the_one_hour_rate(tmp_path):
    """The estimate's figures priced at the write rate (the saved tokens' write share, the misses
    re-billed as writes) split like the row's reported writes: here 3/4 of them 1-hour ones."""
    p = Providers.defaults()
    rate = p.rate("claude-sonnet-4-6", "anthropic")
    e = LedgerEntry(time=10.0, endpoint="anthropic.messages", provider="anthropic", model="claude-sonnet-4-6",
                    tokens_original=3000, tokens_forwarded=2000, status=200, compressed=True, input_tokens=100,
                    cache_read_tokens=800, cache_write_tokens=400, cache_write_1h_tokens=300, output_tokens=10,
                    miss_write_tokens=200)
    with Store(tmp_path / "index.db") as store:
        ledger.record(store, [e])
        w = savings_report(store, since=0, now=20.0, providers=p).session
    w5, w1, r, i = (rate.cache_write_per_token, rate.cache_write_1h_per_token, rate.cache_read_per_token,
                    rate.input_per_token)
    assert w1 == pytest.approx(2 * i)
    billed = 100 + 800 + 400
    saved_write = 1000 * (400 - 200) / billed
    gross = 1000 * 100 / billed * i + 1000 * (800 + 200) / billed * r + saved_write * (0.25 * w5 + 0.75 * w1)
    miss = 200 * (0.25 * (w5 - r) + 0.75 * (w1 - r))
    assert w.dollar_saved_gross == pytest.approx(gross, abs=2e-6)  # figures are rounded to 6 decimals
    assert w.cache_miss_dollars == pytest.approx(miss, abs=2e-6)  # figures are rounded to 6 decimals
    assert w.dollar_saved == pytest.approx(gross - miss, abs=2e-6)  # figures are rounded to 6 decimals  # no counterfactual: the estimate
    assert w.dollar_spent == pytest.approx(100 * i + 800 * r + 100 * w5 + 300 * w1 + 10 * 15e-6, abs=2e-6)  # figures are rounded to 6 decimals
