"""The ledger's counting shortcuts change no figure.

* a request's tool definitions are remembered by their exact value (their
  pickle: block digest and token count), so a resent definition is neither
  written out as JSON nor counted again -- and the blocks are the ones
  computed in full;
* the request's own count is the last prompt block's, so the recorder walks
  the request once for both figures.
"""

import copy
import hashlib

import pytest

from memstrata.compressor.tokens import count_tokens
from memstrata.harness.proxy import counterfactual, recorder
from memstrata.harness.proxy.analysis import prompt_tokens
from memstrata.harness.proxy.conversation import message_key
from memstrata.harness.proxy.counterfactual import ShadowCache, _raw_blocks, prompt_blocks
from memstrata.harness.proxy.recorder import Counting

MARK = {"type": "ephemeral"}


def tool(name, **extra):
    return {"name": name, "description": f"The {name} tool. " * 20,
            "input_schema": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 4096}},
                             "required": ["path"]}, **extra}


def anthropic_body(tools):
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": tools,
            "system": [{"type": "text", "text": "You are a coding agent. " * 30, "cache_control": MARK}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Read a.py"}]},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                                            "input": {"path": "a.py"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": "def f():\n    return 1\n" * 50,
                                                       "cache_control": MARK}]}]}


def openai_body(tools, **extra):
    return {"model": "gpt-4o", "tools": tools, **extra,
            "messages": [{"role": "system", "content": "You are a coding agent."},
                         {"role": "user", "content": "Read a.py"}]}


def computed_blocks(body, api, model):
    """prompt_blocks as computed in full: every block written out, counted and digested."""
    out = []
    h = hashlib.blake2b(f"{api}\0{model or ''}".encode(), digest_size=16).digest()
    total = 0
    for key, texts, mark in _raw_blocks(body, api):
        total += sum(count_tokens(t) for t in texts)
        h = hashlib.blake2b(h + message_key(list(key)), digest_size=16).digest()
        out.append(counterfactual.PromptBlock(h, total, mark is not None, mark == "1h"))
    if api == "anthropic" and isinstance(body.get("cache_control"), dict) and out:
        out[-1] = counterfactual.PromptBlock(out[-1].digest, out[-1].tokens, True,
                                             body["cache_control"].get("ttl") == "1h")
    return out


BODIES = [
    ("anthropic", anthropic_body([tool("Read"), tool("Grep")])),
    ("anthropic", anthropic_body([tool("Read"), tool("Grep", cache_control=MARK)])),   # Claude Code marks one
    ("anthropic", anthropic_body([{"input_schema": tool("Read")["input_schema"], "name": "Read",
                                   "description": tool("Read")["description"]}])),      # the same, keys reordered
    ("anthropic", anthropic_body([tool("Read", strict=True), tool("Read", strict=1), tool("Read", strict=1.0)])),
    ("anthropic", anthropic_body([tool("Read"), None, tool("Grep")])),                  # a None is skipped
    ("anthropic", anthropic_body([tool("Read"), {"name": "x", "v": float("nan")}, "odd", 3])),
    ("anthropic", anthropic_body({"not": "a list"})),
    ("anthropic", dict(anthropic_body([tool("Read")]), cache_control=MARK)),
    ("anthropic", dict(anthropic_body([tool("Read", cache_control={"type": "ephemeral", "ttl": "1h"})]),
                       cache_control={"type": "ephemeral", "ttl": "1h"})),
    ("openai", openai_body([{"type": "function", "function": tool("Read")}, tool("Grep")])),
    ("openai", openai_body([{"type": "function", "function": tool("Read")}],
                           functions=[{"name": "legacy", "parameters": {}}])),
    ("openai", openai_body([{"type": "function", "function": "not a dict"}])),
    ("responses", {"model": "gpt-4o", "instructions": "Be brief.", "tools": [tool("Read")],
                   "input": [{"role": "user", "content": "Read a.py"}]}),
]


@pytest.mark.parametrize("api,body", BODIES)
def test_remembered_tool_blocks_are_the_computed_ones(api, body):
    for _ in range(2):   # computed, then remembered
        assert prompt_blocks(copy.deepcopy(body), api, body["model"]) == computed_blocks(body, api, body["model"])


def test_a_resent_tool_definition_is_not_written_out_again(monkeypatch):
    tools = [tool(f"T{i}") for i in range(6)] + [tool("Marked", cache_control=MARK)]
    body = anthropic_body(tools)
    expected = prompt_blocks(copy.deepcopy(body), "anthropic", "m")
    written = []
    real = counterfactual._compact
    monkeypatch.setattr(counterfactual, "_compact", lambda v: written.append(v) or real(v))
    assert prompt_blocks(copy.deepcopy(body), "anthropic", "m") == expected
    assert written == []
    # A definition that differs in its marker only is another text: written out and counted.
    moved = anthropic_body(tools[:-1] + [tool("Marked")])
    assert prompt_blocks(copy.deepcopy(moved), "anthropic", "m") == computed_blocks(moved, "anthropic", "m")
    assert written == [tool("Marked")]
    # The same definitions counted as OpenAI functions are other texts: not taken for these.
    written.clear()
    openai = openai_body([{"type": "function", "function": t} for t in tools[:2]])
    assert prompt_blocks(copy.deepcopy(openai), "openai", "m") == computed_blocks(openai, "openai", "m")
    assert written == [tools[0], tools[1]]


def test_remembered_tool_blocks_are_bounded(monkeypatch):
    monkeypatch.setattr(counterfactual._tool_memo, "max_entries", 3)
    for i in range(10):
        body = anthropic_body([tool(f"Bounded{i}")])
        assert prompt_blocks(body, "anthropic", "m") == computed_blocks(body, "anthropic", "m")
    assert len(counterfactual._tool_memo) <= 3
    assert counterfactual._tool_memo.size == sum(len(k[1]) for k in counterfactual._tool_memo)


@pytest.mark.parametrize("api,body", BODIES)
def test_the_request_is_walked_once_for_its_count_and_its_bill(api, body, monkeypatch):
    family = counterfactual.cache_family(api, None)
    expected_total = prompt_tokens(body, api)
    expected_bill = ShadowCache().bill(copy.deepcopy(body), api, family, body["model"], 100.0)
    calls = []
    monkeypatch.setattr(recorder, "prompt_tokens", lambda b, a: calls.append(a) or prompt_tokens(b, a))
    c = Counting(copy.deepcopy(body), None, api, shadow=ShadowCache(), family=family, model=body["model"],
                 arrived=100.0)
    c.run()
    assert (c.original, c.forwarded, c.counterfactual) == (expected_total, expected_total, expected_bill)
    # The Responses API pairs its blocks with items, not messages: counted on its own there.
    assert calls == (["responses"] if api == "responses" else [])


def test_a_request_the_bill_cannot_price_is_still_counted(monkeypatch):
    body = anthropic_body([tool("Read")])

    def broken(*a, **k):
        raise ValueError("no blocks")

    monkeypatch.setattr(recorder, "prompt_blocks", broken)
    monkeypatch.setattr(counterfactual, "prompt_blocks", broken)
    c = Counting(body, None, "anthropic", shadow=ShadowCache(), family="anthropic", model="m")
    with pytest.raises(ValueError):
        c.run()
    assert c.original == prompt_tokens(body, "anthropic") and c.counterfactual is None and c.done
