"""Requests that carry Anthropic's server-side context editing (``context_management``, tool result
clearing), through the proxy to a caching stand-in provider that applies the published clearing rules
(tests/caching_provider.py, written from the rules, not from the proxy's code).

The provider bills the prompt after its own clearing, so the ledger's counterfactual must be the bill
of the unmodified request after that clearing: a saving the provider gives for free is not the proxy's."""

import copy

import anthropic
import httpx
import pytest

from tests.caching_provider import ANTHROPIC_RATES, CachingProvider
from tests.stub_provider import ServerThread

from .test_counterfactual_bill import KEY, conversation, reported, run

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


@pytest.fixture
def providers():
    through, direct = CachingProvider(), CachingProvider()
    with ServerThread(through.app) as t, ServerThread(direct.app) as d:
        through.url, direct.url = t.url, d.url
        yield through, direct


def session(ws, server, direct, edits, stream=False, turns=14):
    """The conversation through the proxy with the real SDK's beta client, and straight to ``direct``."""
    client = anthropic.Anthropic(base_url=server.url + "/anthropic", api_key=KEY, max_retries=0)
    answers = []
    for body in conversation(ws, turns):
        body["context_management"] = edits
        if stream:
            with client.beta.messages.stream(**copy.deepcopy(body), betas=[BETA]) as s:
                answers.append(s.get_final_message())
        else:
            answers.append(client.beta.messages.create(**copy.deepcopy(body), betas=[BETA]))
        httpx.post(direct.url + "/v1/messages", json=body, headers={"anthropic-beta": BETA}).raise_for_status()
    return answers


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
