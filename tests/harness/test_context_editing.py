"""Requests that carry Anthropic's server-side context editing (``context_management``, tool result
clearing), through the proxy to a caching stand-in provider that applies the published clearing rules
(tests/caching_provider.py, written from the rules, not from the proxy's code).

The provider bills the prompt after its own clearing, so the ledger's counterfactual must be the bill
of the unmodified request after that clearing: a saving the provider gives for free is not the proxy's."""

import copy

import anthropic
import httpx
import pytest

from tests.caching_provider import ANTHROPIC_RATES

from .test_counterfactual_bill import KEY, conversation, providers, reported, run  # noqa: F401 (a fixture)

BETA = "context-management-2025-06-27"
# Triggers the fixture's conversation passes after a few reads (the published default, 100,000 input
# tokens, is scaled down like the proxy's own thresholds in these tests).
KEEP_TWO = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 4000},
                       "keep": {"type": "tool_uses", "value": 2}}]}
# (keep 2: with one, the cleared prompt falls to about 1,050 tokens, where the shadow's cl100k count and
# the provider's disagree about the 1,024-token cacheable minimum, a limit unrelated to clearing)
AT_LEAST = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3},
                       "keep": {"type": "tool_uses", "value": 2},
                       "clear_at_least": {"type": "input_tokens", "value": 2500}, "clear_tool_inputs": True}]}


def with_thinking(body):
    """``body`` with a thinking block (the same at the same place on every request) opening each
    assistant message, as an agent with extended thinking sends its history back."""
    for n, m in enumerate(body["messages"]):
        if m["role"] == "assistant":
            note = f"Step {n}: which file holds the refund rule, and what does the window check? "
            m["content"] = [{"type": "thinking", "thinking": note * 12, "signature": f"sig-{n}"}, *m["content"]]
    return body


def session(ws, server, direct, edits, stream=False, turns=14, thinking=False):
    """The conversation through the proxy with the real SDK's beta client, and straight to ``direct``."""
    client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key=KEY, max_retries=0)
    answers = []
    for body in conversation(ws, turns):
        if thinking:
            body = with_thinking(body)
        body["context_management"] = edits
        if stream:
            with client.beta.messages.stream(**copy.deepcopy(body), betas=[BETA]) as s:
                answers.append(s.get_final_message())
        else:
            answers.append(client.beta.messages.create(**copy.deepcopy(body), betas=[BETA]))
        httpx.post(direct.url + "/v1/messages", json=body, headers={"anthropic-beta": BETA}).raise_for_status()
    return answers


# Thinking block clearing (no trigger: every request past the second turn clears), alone and listed before
# tool result clearing, as the API asks.
THINKING_ONE = {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}]}
THINKING_AND_TOOLS = {"edits": [{"type": "clear_thinking_20251015"}, *KEEP_TWO["edits"]]}


@pytest.mark.parametrize("edits,stream", [(THINKING_ONE, False), (THINKING_ONE, True), (THINKING_AND_TOOLS, False),
                                          (THINKING_AND_TOOLS, True)],
                         ids=["thinking-json", "thinking-stream", "both-json", "both-stream"])
def test_ledger_saving_counts_the_providers_thinking_clearing(shop_ws, providers, edits, stream):
    """The provider drops the thinking of all but the latest turns before it bills and caches: the
    unmodified request's bill is that of the request without them."""
    through, direct = providers
    app, server = run(shop_ws, through)
    with server:
        session(shop_ws, server, direct, edits, stream=stream, thinking=True)
        w = reported(app, shop_ws)
    kinds = [e["type"] for a in direct.applied for e in a]
    assert kinds.count("clear_thinking_20251015") >= 5, "the provider must clear thinking in the direct run"
    if edits is THINKING_AND_TOOLS:
        assert kinds.count("clear_tool_uses_20250919") >= 3
    true_saving = direct.total(ANTHROPIC_RATES) - through.total(ANTHROPIC_RATES)
    assert abs(w.dollar_saved - true_saving) <= 0.02 * abs(true_saving)
    prompt_only = {**ANTHROPIC_RATES, "output": 0.0}
    assert w.bill_direct == pytest.approx(direct.total(prompt_only), rel=0.02)


def test_model_of_thinking_clearing_follows_the_published_rules():
    from memstrata.harness.proxy.context_editing import ClearThinking, clear_thinking, thinking_cleared

    think = lambda n: {"type": "thinking", "thinking": f"thought {n} " * 20, "signature": "s"}   # noqa: E731
    use = lambda n: {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}   # noqa: E731
    result = lambda n: {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x"}]}  # noqa: E731
    body = {"messages": [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": [think(1), use(1)]}, result(1),            # turn 1 goes on through
        {"role": "assistant", "content": [think(2), {"type": "text", "text": "Done."}]},   # its tool result
        {"role": "user", "content": [{"type": "text", "text": "Second question"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "No thinking here."}]},
        {"role": "user", "content": "Third question"},
        {"role": "assistant", "content": [think(3), use(3)]}, result(3)]}

    def kept(b):
        return [p["thinking"].split()[1] for m in b["messages"] if isinstance(m["content"], list)
                for p in m["content"] if p.get("type") == "thinking"]

    edit = lambda keep: clear_thinking({"context_management": {"edits": [   # noqa: E731
        {"type": "clear_thinking_20251015", **({} if keep is None else {"keep": keep})}]}})
    assert edit(None) == ClearThinking(keep=1) and edit("all") == edit({"type": "all"}) == ClearThinking(keep=None)
    # keep 1 (the default): only the latest turn that thought keeps its thinking; a turn without any is no turn
    out, gone = thinking_cleared(body, edit(None))
    assert kept(out) == ["3"] and gone > 0 and kept(body) == ["1", "2", "3"]
    # keep 2: both blocks of the first turn (its tool round included) go only when two later turns thought
    assert kept(thinking_cleared(body, edit({"type": "thinking_turns", "value": 2}))[0]) == ["1", "2", "3"]
    assert thinking_cleared(body, edit("all")) == (body, 0)


def cleared_uses(message):
    edits = message.context_management.applied_edits if message.context_management else []
    return sum(e.cleared_tool_uses for e in edits)


@pytest.mark.parametrize("edits,stream", [(KEEP_TWO, False), (KEEP_TWO, True), (AT_LEAST, False)],
                         ids=["keep-json", "keep-stream", "at-least-inputs"])
def test_ledger_saving_counts_the_providers_own_clearing(shop_ws, providers, edits, stream):
    through, direct = providers
    app, server = run(shop_ws, through)
    with server:
        answers = session(shop_ws, server, direct, edits, stream=stream)
        w = reported(app, shop_ws)
    # the request goes out with its edits and beta header, and the provider's report comes back intact
    assert all(r["context_management"] == edits for r in through.received)
    assert all(BETA in h.get("anthropic-beta", "") for h in through.headers)
    assert [cleared_uses(a) for a in answers] == [sum(e["cleared_tool_uses"] for e in a) for a in through.applied]
    assert sum(len(a) for a in direct.applied) >= 5, "the provider must clear in the direct run"
    # the ledger's saving is the true bill difference (the direct run cleared by the provider too)
    true_saving = direct.total(ANTHROPIC_RATES) - through.total(ANTHROPIC_RATES)
    assert abs(w.dollar_saved - true_saving) <= 0.02 * abs(true_saving)
    prompt_only = {**ANTHROPIC_RATES, "output": 0.0}
    assert w.bill_direct == pytest.approx(direct.total(prompt_only), rel=0.02)


# -- the model of the published rules ---------------------------------------------------------

def agent_body(tools=("Read", "Read", "Bash", "Read", "Read", "Read"), result="def f():\n    return 1\n" * 60):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}]
    for n, name in enumerate(tools):
        msgs.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{n}", "name": name, "input": {"file_path": f"src/m{n}.py"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result}]})
    return {"model": "claude-sonnet-4-5", "messages": msgs}


def results(body):
    return [p["content"] for m in body["messages"] for p in m["content"] if p.get("type") == "tool_result"]


def inputs(body):
    return [p["input"] for m in body["messages"] for p in m["content"] if p.get("type") == "tool_use"]


def view(body, edit, **kw):
    from memstrata.harness.proxy.analysis import prompt_tokens
    from memstrata.harness.proxy.context_editing import clear_tool_uses, provider_view

    return provider_view(body, clear_tool_uses({**body, "context_management": {"edits": [edit]}}),
                         prompt_tokens(body, "anthropic"), **kw)


def test_model_of_tool_result_clearing_follows_the_published_rules():
    from memstrata.harness.proxy.context_editing import PLACEHOLDER

    body = agent_body()
    whole = results(body)[0]
    # defaults: nothing below 100,000 input tokens
    assert view(body, {"type": "clear_tool_uses_20250919"}) == (body, 0)
    # over the trigger: every use but the latest 3 cleared, oldest first; the body itself untouched
    out, n = view(body, {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 500}})
    assert n == 3 and results(out) == [PLACEHOLDER] * 3 + [whole] * 3 and results(body) == [whole] * 6
    assert inputs(out) == inputs(body)   # inputs stay unless asked
    # the trigger as the provider counts: a count the ratio puts past it
    assert view(body, {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 3000}},
                ratio=2.0)[1] == 3
    # a trigger in tool uses; keep 1; an excluded tool; inputs of the named tools cleared too
    out, n = view(body, {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 5},
                         "keep": {"type": "tool_uses", "value": 1}, "exclude_tools": ["Bash"],
                         "clear_tool_inputs": ["Read"]})
    assert n == 4 and results(out) == [PLACEHOLDER, PLACEHOLDER, whole, PLACEHOLDER, PLACEHOLDER, whole]
    assert inputs(out) == [{}, {}, {"file_path": "src/m2.py"}, {}, {}, {"file_path": "src/m5.py"}]
    # fewer tool uses than the trigger: nothing
    assert view(body, {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 6}})[1] == 0
    # clearing that would remove fewer tokens than clear_at_least: nothing
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 1}}
    assert view(body, {**edit, "clear_at_least": {"type": "input_tokens", "value": 100_000}}) == (body, 0)
    assert view(body, {**edit, "clear_at_least": {"type": "input_tokens", "value": 500}})[1] == 3


def test_forwarded_count_follows_the_tool_uses_the_provider_reports_cleared():
    """The model only estimates whether the provider's trigger fired on the forwarded request; its
    answer says how many tool uses it cleared, and that count is what the forwarded request is
    counted after (the provider's report of its billed tokens is scaled against it)."""
    from memstrata.harness.proxy.analysis import Answer, prompt_tokens
    from memstrata.harness.proxy.compress_request import CompressionResult
    from memstrata.harness.proxy.context_editing import cleared, clear_tool_uses
    from memstrata.harness.proxy.counterfactual import ShadowCache
    from memstrata.harness.proxy.recorder import Counting

    edits = {"edits": [{"type": "clear_tool_uses_20250919"}]}   # 100,000 tokens: the model expects nothing
    sent = {**agent_body(), "context_management": edits}
    fwd = {**agent_body(result="def f():\n    return 1\n" * 40), "context_management": edits}
    counting = Counting(sent, CompressionResult(body=fwd, reason="test"), "anthropic", shadow=ShadowCache(),
                        family="anthropic", model="claude-sonnet-4-5")
    counting.run()
    raw = prompt_tokens(fwd, "anthropic")
    assert counting.forwarded == raw
    # the provider reports it cleared 2 tool uses of the forwarded request (its own count passed 100,000)
    after = prompt_tokens(cleared(fwd, clear_tool_uses(fwd), 2)[0], "anthropic")
    assert after < raw - 500
    ans = Answer(input_tokens=after, cache_read_tokens=0, cache_write_tokens=0, cleared_tool_uses=2)
    counting.counterfactual_usage(ans)
    assert counting.forwarded == after


def test_trigger_is_judged_without_the_framing_of_the_first_requests(providers):
    """The provider's count of a request is its texts plus a few tokens of framing per block; where
    that framing is fitted from its reports, the first request cannot tell the two apart.  A request
    just under the clearing trigger must stay under it in the model too: with the first requests'
    framing left in the provider's tokens per text token, the model put it over and priced a clearing
    (and a cache write of everything after it) the provider never made."""
    from memstrata.harness.proxy.analysis import parse_answer, prompt_tokens
    from memstrata.harness.proxy.compress_request import CompressionResult
    from memstrata.harness.proxy.counterfactual import FramingEstimate, ShadowCache, TextRatio
    from memstrata.harness.proxy.recorder import Counting

    through, direct = providers
    line = "    total = sum(item.price * item.quantity for item in order.items)  # running total\n"

    def body(reads, lines):
        msgs = [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}]
        for n in range(reads):
            msgs.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": f"src/m{n}.py"}}]})
            msgs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": line * (3 if n == 0 else lines)}]})
        return {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": msgs}

    steps = range(1, 9)
    # the provider's own count of each request as sent (a stand-in that applies no edit)
    counts = []
    for n in steps:
        usage = httpx.post(direct.url + "/v1/messages", json=body(n, 120)).json()["usage"]
        counts.append(usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"])
    direct.bills.clear()
    direct.applied.clear()
    k = 5   # the provider does not clear the sixth request (its count is just under), and clears the next ones
    edits = {"edits": [{"type": "clear_tool_uses_20250919",
                        "trigger": {"type": "input_tokens", "value": counts[k] + 10},
                        "keep": {"type": "tool_uses", "value": 2}}]}
    shadow, framing, ratio = ShadowCache(), FramingEstimate(), TextRatio()
    cf, originals = [], []
    for n in steps:
        sent = {**body(n, 120), "context_management": edits}
        fwd = {**body(n, 40), "context_management": edits}
        counting = Counting(sent, CompressionResult(body=fwd, reason="test"), "anthropic", shadow=shadow,
                            family="anthropic", model="claude-sonnet-4-5", framing=framing, text_ratio=ratio)
        counting.run()
        answer = httpx.post(through.url + "/v1/messages", json=fwd, headers={"anthropic-beta": BETA})
        cf.append(sum(counting.counterfactual_usage(parse_answer("anthropic", False, answer.content))[:3]))
        originals.append(counting.original)
        httpx.post(direct.url + "/v1/messages", json=sent, headers={"anthropic-beta": BETA}).raise_for_status()
    cleared = [sum(e["cleared_tool_uses"] for e in a) for a in direct.applied]
    assert cleared[k] == 0 and all(cleared[k + 1:]), cleared
    assert originals[k] == prompt_tokens(body(k + 1, 120), "anthropic")   # the model did not clear it either
    billed = [b.input + b.cache_read + b.cache_write for b in direct.bills]
    assert cf == [pytest.approx(b, rel=0.01) for b in billed]
