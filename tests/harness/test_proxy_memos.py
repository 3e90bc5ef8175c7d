"""The proxy's shortcuts change no forwarded byte and no ledger figure.

* the compaction pre-check (:meth:`RequestPass._may_pay`) never turns down a
  step that :meth:`RequestPass._pays` would take, and skipping the planning it
  saves leaves every forwarded body as the full computation makes it;
* remembered message digests and token counts are exactly the computed ones;
* a plan's cache key leaves out only what cannot change the plan.

Real parts: an indexed copy of fixtures/proxy_project, real tree-sitter
parses, real token counts.
"""

import copy
import hashlib
import json

import pytest

from memstrata.compressor.block import Block, plan_block
from memstrata.compressor.block_rank import prepare, relevant_part
from memstrata.compressor.outline import outline_of
from memstrata.compressor.tokens import count_tokens
from memstrata.harness.proxy import compress_request
from memstrata.harness.proxy.compaction import RequestPass
from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor
from memstrata.harness.proxy.conversation import _digest, message_key
from memstrata.harness.proxy.token_counts import TextCounts

MARK = {"type": "ephemeral"}
FILES = ["shop/orders.py", "shop/pricing.py", "shop/inventory.py", "shop/shipping.py", "shop/orders.py",
         "shop/pricing.py", "shop/inventory.py", "shop/orders.py"]
QUESTION = "Why does Order.refund reject an order that was shipped 31 days ago?"
# Small thresholds for the fixture's small files; a long expected session (horizon) makes some steps
# pay, the default horizon makes most of them not pay.
PAYING = CompressionSettings.for_mode("safe", min_tokens=300, trigger=2500, clear_at_least=800,
                                      keep_tool_uses=2, keep_task_tool_uses=0, horizon_share=10.0, horizon=100)
SHORT = CompressionSettings.for_mode("safe", min_tokens=300, trigger=2500, clear_at_least=800,
                                     keep_tool_uses=2, keep_task_tool_uses=0)
AGGRESSIVE = CompressionSettings.for_mode("aggressive", min_tokens=300, trigger=2500, clear_at_least=800,
                                          horizon_share=10.0, horizon=100)


def cat_n(text):
    lines = text.rstrip("\n").split("\n")
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))


def conversation(ws, api, marked):
    """Request bodies of an agent reading FILES one per turn (Claude Code's markers when ``marked``)."""
    msgs = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    system = [{"type": "text", "text": "You are a coding agent. " * 80, **({"cache_control": MARK} if marked else {})}]
    for n, path in enumerate(FILES, 1):
        tid = f"toolu_{n:02d}"
        text = cat_n((ws.root / path).read_text())
        if api == "anthropic":
            msgs.append({"role": "assistant", "content": [
                {"type": "text", "text": f"Let me read {path}."},
                {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": str(ws.root / path)}}]})
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": text}]})
            sent = copy.deepcopy(msgs)
            if marked:
                sent[-1]["content"][-1]["cache_control"] = MARK
            yield {"model": "claude-sonnet-4-5", "max_tokens": 512, "system": system, "messages": sent}
        else:
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": tid, "type": "function", "function": {"name": "Read",
                                                             "arguments": f'{{"file_path": "{ws.root / path}"}}'}}]})
            msgs.append({"role": "tool", "tool_call_id": tid, "content": text})
            yield {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are a coding agent."},
                                                   *copy.deepcopy(msgs)]}


class Checked(RequestPass):
    """The real pass; the pre-check's verdict is recorded, then the full computation runs anyway."""

    log: list = []

    def _may_pay(self, *args):
        self._verdict = super()._may_pay(*args)
        return True

    def _net(self, *args):
        net = super()._net(*args)
        type(self).log.append((self._verdict, net > 0))
        return net


class Full(RequestPass):
    """The pass without the pre-check: every step is planned and priced."""

    def _may_pay(self, *args):
        return True


@pytest.mark.parametrize("settings", [PAYING, SHORT, AGGRESSIVE], ids=["paying", "short-horizon", "aggressive"])
@pytest.mark.parametrize("api,marked", [("anthropic", True), ("anthropic", False), ("openai", False)])
def test_the_pre_check_never_turns_down_a_step_that_pays(shop_ws, monkeypatch, settings, api, marked):
    bodies = list(conversation(shop_ws, api, marked))
    monkeypatch.setattr(Checked, "log", [])
    monkeypatch.setattr(compress_request, "RequestPass", Checked)
    checked = Compressor(shop_ws, settings)
    for body in bodies:
        checked.compress(copy.deepcopy(body), api)
    assert not any(pays and not verdict for verdict, pays in Checked.log)

    # With the pre-check in force, the same bodies are forwarded as with the full computation.
    monkeypatch.setattr(compress_request, "RequestPass", RequestPass)
    fast = Compressor(shop_ws, settings)
    fast_out = [fast.compress(copy.deepcopy(b), api) for b in bodies]
    monkeypatch.setattr(compress_request, "RequestPass", Full)
    full = Compressor(shop_ws, settings)
    full_out = [full.compress(copy.deepcopy(b), api) for b in bodies]
    for a, b in zip(fast_out, full_out):
        assert (a.body, a.reason, a.compaction, a.prefix_invalidated_tokens) == \
               (b.body, b.reason, b.compaction, b.prefix_invalidated_tokens)
        assert (a.replaced_tokens, a.replacement_tokens, a.sources, a.slice_symbols) == \
               (b.replaced_tokens, b.replacement_tokens, b.sources, b.slice_symbols)


def test_the_pre_check_is_exercised_both_ways(shop_ws, monkeypatch):
    """The cases above include steps that pay and steps the pre-check skips (else they prove little)."""
    monkeypatch.setattr(compress_request, "RequestPass", Checked)
    verdicts = set()
    for settings in (PAYING, SHORT):
        monkeypatch.setattr(Checked, "log", [])
        comp = Compressor(shop_ws, settings)
        for body in conversation(shop_ws, "anthropic", True):
            comp.compress(body, "anthropic")
        verdicts |= set(Checked.log)
    assert (True, True) in verdicts      # a step that pays was let through
    assert (False, False) in verdicts    # a step that does not pay was skipped


def test_remembered_message_digests_are_the_computed_ones():
    values = [
        {"role": "user", "content": "x" * 5000},
        {"role": "user", "content": [{"type": "text", "text": "x" * 5000, "cache_control": MARK}]},
        {"role": "user", "content": [{"type": "text", "text": "x" * 5000}]},
        {"a": 1}, {"a": 1.0}, {"a": True}, {"a": "1"}, {"a": None}, {"a": [1]}, {"a": (1,)}, {"a": -0.0},
        {"a": 0.0}, {1: "a"}, {"1": "a"}, ["part", "user", {"type": "text", "text": "y"}], "plain", 7,
        {"b": 1, "a": 2}, {"a": 2, "b": 1}, {"a": float("nan")},
    ]
    for _ in range(2):  # computed, then remembered
        for v in values:
            assert message_key(copy.deepcopy(v)) == _digest(v)
    # Values Python calls equal but that read differently stay apart.
    assert len({message_key(v) for v in ({"a": 1}, {"a": 1.0}, {"a": True})}) == 3
    assert message_key({"a": 0.0}) != message_key({"a": -0.0})
    # Markers do not count, wherever they sit.
    assert message_key(values[1]) == message_key(values[2])


def test_a_marked_and_an_unmarked_copy_of_a_message_are_digested_once(monkeypatch):
    """A client marks the newest message and unmarks it on the next turn: the digest leaves markers
    out, so the two copies are one remembered entry, and the message is written out once."""
    from memstrata.harness.proxy import conversation

    text = "\n".join(f"{i:>6}\tline {i} of a file read with cat -n" for i in range(1, 400))
    marked = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_77", "content": text,
                                           "cache_control": MARK}]}
    plain = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_77", "content": text}]}
    digest = _digest(plain)
    assert _digest(marked) == digest
    written = []

    class Recording:
        @staticmethod
        def blake2b(data=b"", **kw):
            written.append(data.decode())
            return hashlib.blake2b(data, **kw)

    monkeypatch.setattr(conversation, "hashlib", Recording)
    assert message_key(marked) == digest
    assert message_key(copy.deepcopy(plain)) == digest
    assert message_key(copy.deepcopy(marked)) == digest
    assert len(written) == 1   # the first copy's digest, of the message without its marker
    assert "cache_control" not in written[0]


def test_a_large_message_is_digested_without_writing_it_out(monkeypatch):
    """A large message is digested from its frozen form (repr would escape every newline of a tool
    result into a new string); equal values still get equal digests and different ones different."""
    from memstrata.harness.proxy import conversation

    big = "\n".join(f"{i:>6}\tline {i}" for i in range(1, 600))
    values = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": big}]},
        {"role": "user", "content": [{"tool_use_id": "t1", "type": "tool_result", "content": big}]},  # key order
        {"a": big, "n": 1}, {"a": big, "n": 1.0}, {"a": big, "n": True}, {"a": big, "n": "1"}, {"a": big, "n": None},
        {"a": big, "n": [1]}, {"a": big, "n": {"1": 1}}, {"a": big, "n": -0.0}, {"a": big, "n": 0.0},
        {"a": big, "n": False}, {"a": big, "n": 0}, {"a": big, "n": ""}, {"a": big, "n": []}, {"a": big, "n": {}},
        [big, "s3:abc"], [big + "s3:abc"], [big, "abc"], [big, ["abc"]], {"a": [big]}, [{"a": big}],
        {"a": big + "\u00e9"}, {"a": big + "\ud800"}, {"a": big, "b": float("inf")},
    ]
    digests = [message_key(copy.deepcopy(v)) for v in values]
    assert len(set(digests)) == len(values)
    # Markers do not count; a remembered digest is the computed one; repr is never called.
    real_repr = repr
    monkeypatch.setattr(conversation, "repr", lambda v: real_repr(v) if isinstance(v, float) else pytest.fail(
        "written out"), raising=False)   # a float's frozen form is its repr
    marked = copy.deepcopy(values[0])
    marked["content"][0]["cache_control"] = MARK
    assert conversation._digest(marked) == digests[0]
    assert message_key(marked) == digests[0]
    assert [conversation._digest(copy.deepcopy(v)) for v in values] == digests
    monkeypatch.setattr(conversation, "repr", real_repr, raising=False)
    # A small message is still written out by repr (cheaper for many short strings).
    small = {"role": "assistant", "content": [{"type": "text", "text": "Let me read a.py."}]}
    assert message_key(small) == conversation._hash(repr(small))


def test_the_system_prompt_and_tools_are_counted_once_per_distinct_pair(shop_ws, monkeypatch):
    comp = Compressor(shop_ws, SHORT)
    tools = [{"name": "Read", "description": "Reads a file. " * 30, "input_schema": {"type": "object"}}]
    bodies = [
        {"system": "You are a coding agent. " * 50, "tools": tools},
        {"system": [{"type": "text", "text": "You are a coding agent. " * 50, "cache_control": MARK}], "tools": tools},
        {"system": [{"type": "text", "text": "You are a coding agent. " * 50}], "tools": tools},
        {"system": "You are a coding agent. " * 50},
        {"tools": tools},
        {"tools": [dict(tools[0], strict=1)]}, {"tools": [dict(tools[0], strict=True)]},
        {"tools": [dict(tools[0], strict=1.0)]},
        {"tools": [{"input_schema": {"type": "object"}, "name": "Read", "description": "Reads a file. " * 30}]},
    ]

    def counted(body):
        system, tools = body.get("system"), body.get("tools")
        n = count_tokens(system if isinstance(system, str) else json.dumps(system, ensure_ascii=False))
        return n + (count_tokens(json.dumps(tools, ensure_ascii=False)) if tools is not None else 0)

    for body in bodies:
        assert comp._base_tokens(copy.deepcopy(body)) == counted(body)
    assert len(comp._base) == len(bodies)   # no two of them taken for one another
    # Remembered: a resent pair is neither written out nor counted again.
    monkeypatch.setattr(comp.tokens, "count", lambda text: pytest.fail("counted again"))
    for body in bodies:
        assert comp._base_tokens(copy.deepcopy(body)) == counted(body)
    assert comp._base_tokens({"messages": []}) == 0


def test_remembered_base_counts_are_bounded(shop_ws, monkeypatch):
    monkeypatch.setattr(compress_request, "MAX_BASE_ENTRIES", 3)
    comp = Compressor(shop_ws, SHORT)
    for i in range(8):
        body = {"system": f"System prompt number {i}. " * 40}
        assert comp._base_tokens(body) == count_tokens(body["system"])
    assert len(comp._base) == 3
    assert comp._base.size == sum(len(a) + len(b) for a, b in comp._base)


def test_remembered_token_counts_are_exact_and_bounded():
    counts = TextCounts(max_chars=1000)
    texts = [f"def f{i}(x):\n    return x + {i}\n" * 8 for i in range(12)]
    for _ in range(2):
        for t in texts:
            assert counts.count(t) == count_tokens(t)
    assert counts.chars <= 1000 and 0 < len(counts) < len(texts)
    assert counts.count("") == 0
    big = "word " * 400
    assert counts.count(big) == count_tokens(big) and big not in counts._d


def test_a_plan_key_ignores_only_words_that_cannot_name_a_unit(shop_ws):
    text = (shop_ws.root / "shop/orders.py").read_text().split("\n")
    block = Block(text, text, list(range(1, len(text) + 1)), "python", "shop/orders.py")
    outline = outline_of(block.code, block.language, block.path)
    base = prepare(QUESTION)
    names = {u.name for u in outline.units if u.kind != "stmt" and u.name and len(u.name) >= 4}
    assert names
    # Plain words that name no unit of the block (a path read later, a verb) leave the key alone ...
    extra = frozenset({"read", "sympy", "rings", "Let"}) - names
    other = type(base)(base.terms, base.code_names, base.words | extra, base.about_tests)
    assert relevant_part(outline, other) == relevant_part(outline, base)
    a, b = plan_block(block, base), plan_block(block, other)
    assert (a.keep, a.evidence) == (b.keep, b.evidence)
    # ... a unit's name does not.
    name = sorted(names - base.words)[0]
    named = type(base)(base.terms, base.code_names, base.words | {name}, base.about_tests)
    assert relevant_part(outline, named) != relevant_part(outline, base)


def test_the_pre_check_holds_a_step_from_the_top_to_the_shorter_horizon():
    """A step that re-bills from the top is counted on for TOP_STEP_HORIZON of the turns in
    :meth:`RequestPass._net`, and so in the pre-check: one that could pay only over the full
    horizon is turned down before any block is planned, and the same step behind a breakpoint,
    which keeps the full horizon, is not.  (A single-task agent conversation takes only steps from
    the top: without the shorter horizon most of its checks were planned for nothing.)"""
    from memstrata.harness.proxy.compaction import ANTHROPIC_CACHE, PlanCache, TokenCache
    from memstrata.harness.proxy.conversation import PieceState, Record

    def result(ri):
        piece = PieceState(("content", 0, "content"), 0, 1, "result", f"pkg/m{ri}.py", ri, (1, 900), 10_000,
                           f"toolu_{ri}", QUESTION)
        return Record(bytes([ri]), "user", 10_000, (piece,))

    records = [Record(b"q", "user", 100, said=QUESTION, real_user=True)]
    for ri in range(1, 9):
        records.append(result(ri) if ri % 2 == 0 else Record(bytes([ri]), "assistant", 50))
    settings = CompressionSettings.for_mode("safe", horizon_share=10.0, horizon=30)
    economics = type(ANTHROPIC_CACHE)(read=0.10, write=1.25, breakpoints=True, base_marked=True)
    work = RequestPass(settings, None, TokenCache(), PlanCache(), "anthropic", [{}] * len(records), records,
                       2000, economics)
    turns = work._turns()
    # Clearing all of the oldest result (10,000 tokens) re-bills at least the 20,250 after it up to
    # the cached end: 0.1 x 10,000 x (1 + 30) = 31,000 > 1.15 x 20,250 over the full horizon, but
    # 0.1 x 10,000 x (1 + 15) = 16,000 is not, over the half a step from the top is counted on.
    assert work._may_pay([(2, 0)], {}, turns, starts=[]) is False
    assert work._may_pay([(2, 0)], {}, turns, starts=[2]) is True


def _numbered_run_reference(lines):
    """The longest run of consecutively numbered lines, line by line (what _numbered_run must return)."""
    from memstrata.harness.proxy.request_blocks import _NUMBERED, MIN_NUMBERED_LINES

    best, i = None, 0
    while i < len(lines):
        m = _NUMBERED.match(lines[i])
        if not m:
            i += 1
            continue
        j, expect, numbers, code = i, int(m.group(2)), [], []
        while j < len(lines):
            mj = _NUMBERED.match(lines[j])
            if not mj or int(mj.group(2)) != expect:
                break
            numbers.append(expect)
            code.append(mj.group(4))
            expect += 1
            j += 1
        if j - i >= MIN_NUMBERED_LINES and (best is None or j - i > best[1] - best[0]):
            best = (i, j, numbers, code)
        i = max(j, i + 1)
    return best


def test_the_numbered_run_is_the_longest_first_run():
    import random

    from memstrata.harness.proxy.request_blocks import _numbered_run

    pieces = ["     1\tx", "     2\ty", "3\tz", "  4→a", "5→", "x", "", "   0012\tq", "\u0663\tarabic three", "7\t",
              " 8 \tno", "9\t\t", "10\tten", "11\televen", "1234567\tbig", "12345678\ttoo big", "\t", "2\tb",
              "3\tc", "4\td", "1\ta"]
    rng = random.Random(7)
    for _ in range(5000):
        lines = [rng.choice(pieces) for _ in range(rng.randint(0, 14))]
        if rng.random() < 0.5:
            s = rng.randint(0, 20)
            lines[3:3] = [f"{k:>6}\tline {k}" for k in range(s, s + rng.randint(0, 8))]
        assert _numbered_run(lines) == _numbered_run_reference(lines), lines
    read = cat_n("def f(x):\n    return x\n" * 40).split("\n")
    assert _numbered_run(read) == _numbered_run_reference(read) and _numbered_run(read)[:2] == (0, 80)


def test_remembered_numbered_runs_are_the_computed_ones_and_bounded(monkeypatch):
    """A tool result's lines and numbered run, remembered by its text, equal what splitting and
    matching it gives; a text not remembered (evicted, or too large to keep) is worked out again;
    the memo holds at most its bound of characters."""
    from memstrata.harness.proxy import request_blocks
    from memstrata.harness.proxy.memo import SizedLRU
    from memstrata.harness.proxy.request_blocks import _lines_and_run, _numbered_run

    monkeypatch.setattr(request_blocks, "_runs", SizedLRU(None, 3000))
    texts = [cat_n(f"def f{i}(x):\n    return x + {i}\n" * (5 + i)) for i in range(10)]
    texts += ["no numbers here\n" * 30, cat_n("x = 1\n" * 400), "  3\ta\n  4\tb\n  5\tc\n  6\td"]
    for _ in range(2):
        for t in texts:
            lines = t.split("\n")
            assert _lines_and_run(t) == (lines, _numbered_run(lines))
            assert request_blocks._runs.size <= 3000
    assert 0 < len(request_blocks._runs) < len(texts)
    assert texts[-2] not in request_blocks._runs   # longer than the whole bound: never kept
    # A hit hands out what was computed the first time, and another text of the same lines
    # (an equal string, not the same object) finds it.
    first = _lines_and_run(texts[-1])
    assert _lines_and_run("".join(list(texts[-1]))) is first


@pytest.mark.parametrize("api,marked", [("anthropic", True), ("anthropic", False), ("openai", False)])
def test_the_forwarded_count_is_the_count_of_the_forwarded_body(shop_ws, monkeypatch, api, marked):
    """The ledger's count of a compressed request's forwarded body, worked out from the original
    count and the replaced messages, is the forwarded body's own count; a forwarded body that
    differs outside its messages is counted whole."""
    from memstrata.harness.proxy import recorder
    from memstrata.harness.proxy.analysis import prompt_tokens
    from memstrata.harness.proxy.counterfactual import ShadowCache
    from memstrata.harness.proxy.recorder import Counting

    whole = []
    real = recorder.prompt_tokens
    monkeypatch.setattr(recorder, "prompt_tokens", lambda body, api: whole.append(body) or real(body, api))
    comp = Compressor(shop_ws, PAYING)
    changed = 0
    tools = [{"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object"}}]
    for body in conversation(shop_ws, api, marked):
        body["tools"] = tools if api == "anthropic" else [{"type": "function", "function": tools[0]}]
        result = comp.compress(body, api)   # as the proxy does: the body it counts is the one compressed
        if not result.changed:
            continue
        changed += 1
        kept = sum(new is old for old, new in zip(body["messages"], result.body["messages"]))
        assert 0 < kept < len(body["messages"])
        c = Counting(body, result, api, shadow=ShadowCache())
        c.run()
        assert c.forwarded == prompt_tokens(result.body, api) and c.original == prompt_tokens(body, api)
        assert result.body not in whole
        # a forwarded body that differs from the one sent outside its messages: counted whole
        other = type(result)(**{**vars(result), "body": {**result.body, "model": "another"}})
        c = Counting(body, other, api, shadow=ShadowCache())
        c.run()
        assert c.forwarded == prompt_tokens(other.body, api) and other.body in whole
    assert changed >= 3
