"""The current task keeps its code, in files of any size, and compaction steps are taken only when they
pay under the provider's cache prices.

Through the running proxy with the official SDKs (anthropic, openai) to tests/stub_provider.py, on a
generated project whose one module is well over the whole-result limit (16,000 tokens by default).
"""

import copy
import json

import anthropic
import openai
import pytest

from memstrata.compressor.tokens import count_tokens
from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.compaction import ANTHROPIC_CACHE, CacheEconomics, cache_economics
from memstrata.harness.proxy.compress_request import AGGRESSIVE_RESULT_CAP, CompressionSettings, Compressor
from memstrata.harness.proxy.forward import ProxyConfig
from memstrata.indexer.workspace import Workspace
from tests.stub_provider import ServerThread, StubUpstream

from memstrata.harness.proxy.gutter import unpad_gutter

from .test_compress_request import Agent, cat_n, forwarded, result_text, whole

KEY = "sk-test-current-task"
BIG = "records/normalize.py"
COUNT = 150


def _function(k: int) -> str:
    return (f"def normalize_record_{k}(record, schema, strict=False):\n"
            f'    """Normalize one record of kind {k}: trim strings, drop empty fields, coerce numbers."""\n'
            f"    out = {{}}\n"
            f"    for key, value in record.items():\n"
            f"        if isinstance(value, str):\n"
            f"            value = value.strip()\n"
            f"        if value in (None, '', [], {{}}):\n"
            f"            if strict and key in schema.get('required_{k}', ()):\n"
            f"                raise ValueError(f'missing {{key}} in kind {k}')\n"
            f"            continue\n"
            f"        kind = schema.get(key, 'text')\n"
            f"        if kind == 'int':\n"
            f"            value = int(value) + {k}\n"
            f"        elif kind == 'float':\n"
            f"            value = round(float(value), {k % 7})\n"
            f"        out[key] = value\n"
            f"    return out\n")


@pytest.fixture(scope="module")
def big_ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("big") / "records_project"
    (root / "records").mkdir(parents=True)
    (root / "records" / "__init__.py").write_text("")
    text = '"""Record normalizers, one per kind."""\n\n\n' + "\n\n".join(_function(k) for k in range(COUNT))
    (root / BIG).write_text(text)
    (root / "records" / "small.py").write_text("\n\n".join(_function(1000 + k) for k in range(12)))
    for n, part in enumerate("abc"):
        (root / "records" / f"part_{part}.py").write_text("\n\n".join(_function(2000 + 20 * n + k) for k in range(12)))
    ws = Workspace.open(root)
    ws.index()
    yield ws
    ws.close()


def source(ws, k: int) -> str:
    return _function(k).rstrip("\n")


def numbered_lines(ws, k: int) -> str:
    """The function's lines as the proxy forwards a cat -n read of them (numbers and arrows, without
    the numbers' padding)."""
    text = (ws.root / BIG).read_text()
    numbered = unpad_gutter(cat_n(text, arrow=True)).split("\n")
    first = text.split("\n").index(f"def normalize_record_{k}(record, schema, strict=False):")
    return "\n".join(numbered[first:first + _function(k).count("\n")])


@pytest.fixture(scope="module")
def stub():
    with StubUpstream(answer="normalize_record_97 drops empty fields unless strict.").running() as s:
        yield s


@pytest.fixture(scope="module")
def proxy(big_ws, stub):
    cfg = ProxyConfig(openai_base=stub.url + "/v1", anthropic_base=stub.url, trust_env=False,
                      compression=CompressionSettings.for_mode("safe"))
    app = build_app(big_ws, HarnessConfig(proxy=cfg, mount_mcp=False))
    with ServerThread(app) as server:
        yield server


def test_the_module_is_over_the_whole_result_limit(big_ws):
    assert count_tokens(cat_n((big_ws.root / BIG).read_text(), arrow=True)) > 2 * CompressionSettings().result_cap


def test_anthropic_read_over_the_limit_keeps_the_named_function_whole(big_ws, proxy, stub):
    stub.received.clear()
    agent = Agent(big_ws, "Why does `normalize_record_97` drop a required field instead of raising?")
    body = agent.read(BIG)
    anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0).messages.create(
        **copy.deepcopy(body))
    sent = stub.received[-1].json()["messages"][-1]["content"][0]["content"]
    whole = body["messages"][-1]["content"][0]["content"]
    assert "[memstrata: lines " in sent and len(sent) < len(whole)  # cut: the file is over the limit
    assert numbered_lines(big_ws, 97) in sent  # the function the request names: whole, with its numbers
    # cut around it: its neighbours in the file are shown with it
    assert numbered_lines(big_ws, 96) in sent and numbered_lines(big_ws, 98) in sent


def test_a_later_task_naming_another_function_gets_it_whole(big_ws, proxy, stub):
    """The latest request decides: after an earlier task about one function, the next task names
    another, and its fresh read of the same large file keeps that one whole."""
    stub.received.clear()
    agent = Agent(big_ws, "Why does `normalize_record_12` round floats to five places?")
    agent.read(BIG)
    agent.say("It rounds by k % 7.", "Now a different problem: normalize_record_131 raises on empty lists.")
    body = agent.read(BIG)
    anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0).messages.create(
        **copy.deepcopy(body))
    sent = stub.received[-1].json()["messages"]
    assert numbered_lines(big_ws, 131) in sent[-1]["content"][0]["content"]
    assert numbered_lines(big_ws, 12) in sent[2]["content"][0]["content"]  # the earlier read, as forwarded then


def test_openai_tool_call_target_is_kept_whole(big_ws, proxy, stub):
    """The definition the latest tool call targeted (an edit's old text) stays whole even when the
    user's words name no function."""
    stub.received.clear()
    old = "            value = int(value) + 58"
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "The integer coercion is off by the kind number; please fix it."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(
                    {"path": str(big_ws.root / BIG), "intent": f"find normalize_record_58 to edit {old.strip()}"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": cat_n((big_ws.root / BIG).read_text())}]
    openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
        model="gpt-4o", messages=copy.deepcopy(msgs))
    sent = stub.received[-1].json()["messages"][-1]["content"]
    assert "[memstrata: lines " in sent and len(sent) < len(msgs[-1]["content"])
    assert numbered_lines(big_ws, 58).replace("→", "\t") in sent


# -- compaction: the current task, and the cache prices ------------------------------------------------


def test_the_current_tasks_results_are_not_compacted(big_ws):
    """An earlier task's reads may be compacted; the reads of the task in progress stay whole."""
    settings = CompressionSettings.for_mode("safe", min_tokens=400, trigger=3000, clear_at_least=1000,
                                            keep_tool_uses=1)
    comp = Compressor(big_ws, settings)
    agent = Agent(big_ws, "Why does `normalize_record_1003` coerce floats?")
    agent.read("records/small.py")
    agent.say("It rounds.", "Another question: why does normalize_record_57 strip strings?")
    for part in "abc":
        body = agent.read(f"records/part_{part}.py")
        res = comp.compress(body, "anthropic")
    sent = (res.body or body)["messages"]
    assert res.compaction or any(m != b for m, b in zip(sent, body["messages"]))
    assert sent[2] != body["messages"][2] and "[memstrata:" in sent[2]["content"][0]["content"]
    assert sent[4:] == [whole(m) for m in body["messages"][4:]]  # the current task: its words, its reads whole


def test_an_earlier_tasks_read_cut_on_arrival_is_compacted_once_that_task_is_over(big_ws):
    """A read over the whole-result limit is cut for the task it served, to about that limit; once the
    next task has begun reading, it is compacted like any earlier task's read."""
    settings = CompressionSettings.for_mode("safe", trigger=3000, clear_at_least=1000, keep_tool_uses=1)
    comp = Compressor(big_ws, settings)
    agent = Agent(big_ws, "Why does `normalize_record_97` drop a required field instead of raising?")
    body = agent.read(BIG)
    arrival = comp.compress(body, "anthropic")
    cut = result_text(arrival.body["messages"][2])
    assert "[memstrata: lines " in cut and numbered_lines(big_ws, 97) in cut  # cut on arrival, the target whole
    agent.say("It skips empty values unless strict.", "Another question: why does normalize_record_1003 strip strings?")
    for name in ("small", "part_a", "part_b"):
        body = agent.read(f"records/{name}.py")
        res = comp.compress(body, "anthropic")
    sent = (res.body or body)["messages"]
    later = result_text(sent[2])
    assert "[memstrata: lines " in later and count_tokens(later) < count_tokens(cut) / 2
    assert sent[4:] == [whole(m) for m in body["messages"][4:]]  # the current task: its words, its reads whole


def _read_then_a_new_task_naming_41(ws, comp) -> tuple[str, str]:
    """The big module read for a task about normalize_record_97, then a new task naming
    normalize_record_41 that reads three other files: the module's read as forwarded when it
    arrived, and as forwarded at the end."""
    agent = Agent(ws, "Why does `normalize_record_97` drop a required field instead of raising?")
    first = agent.read(BIG)
    then = result_text(forwarded(comp.compress(first, "anthropic"), first)[2])
    agent.say("It skips empty values unless strict.",
              "Why are float fields rounded while int fields get the kind number added, and is "
              "`normalize_record_41` any different?")
    for name in ("small", "part_a", "part_b"):
        body = agent.read(f"records/{name}.py")
        res = comp.compress(body, "anthropic")
    return then, result_text(forwarded(res, body)[2])


def test_an_earlier_tasks_read_keeps_ranked_definitions_only_within_its_small_budget(big_ws):
    """Compacted for the question now, an earlier task's read keeps the definitions that question
    ranks highest only up to ``earlier_cap`` tokens: no floor of "the five best whatever their
    size" (that floor serves a read the current task needs); a definition the conversation names
    is kept whole whatever the budget."""
    cap = 400
    assert count_tokens(numbered_lines(big_ws, 5)) * 3 > cap   # the five best would not fit
    settings = CompressionSettings.for_mode("safe", trigger=3000, clear_at_least=1000, keep_tool_uses=1,
                                            earlier_cap=cap)
    _, later = _read_then_a_new_task_naming_41(big_ws, Compressor(big_ws, settings))
    assert "[memstrata: lines " in later                            # compacted at a step
    whole_defs = [k for k in range(COUNT) if numbered_lines(big_ws, k) in later]
    assert 41 in whole_defs                                          # named by the question now
    ranked = [k for k in whole_defs if k != 41]
    assert sum(count_tokens(numbered_lines(big_ws, k)) for k in ranked) <= cap, ranked


def test_a_follow_up_keeps_the_read_cut_on_arrival_as_it_was_forwarded(big_ws):
    """A follow-up the agent answers from what it just read still has it: until the new task's first
    tool call, the task just ended keeps its results in the form they arrived in, cut ones too, so
    the prefix the provider cached stays the same."""
    for mode in ("safe", "aggressive"):
        comp = Compressor(big_ws, CompressionSettings.for_mode(mode, trigger=3000, clear_at_least=1000))
        agent = Agent(big_ws, "Why does `normalize_record_97` drop a required field instead of raising?")
        agent.read(BIG)
        for part in "abc":
            first = comp.compress(agent.read(f"records/part_{part}.py"), "anthropic")
        assert "[memstrata: lines " in result_text(first.body["messages"][2])  # cut on arrival
        body = agent.say("It skips empty values unless strict.", "And what does it do with nested lists?")
        second = comp.compress(body, "anthropic")
        sent = (second.body or body)["messages"]
        assert sent[:len(first.body["messages"])] == first.body["messages"], mode


def _single_class_project(root):
    (root / "store").mkdir(parents=True)
    methods = "\n".join(
        f"    def load_{k}(self, key):\n"
        f'        """Load record {k} of the cache, refreshing it when stale."""\n'
        f"        value = self.backend.get(key + '{k}')\n"
        f"        if value is None or value.expired({k}):\n"
        f"            value = self.refresh(key, {k})\n"
        f"        return value\n" for k in range(60))
    (root / "store" / "cache.py").write_text('class RecordCache:\n    """One cache of records."""\n\n' + methods)
    rows = "\n".join(f"    ({k}, {k * 7 % 13}, 'zone-{k}', {k * 0.25})," for k in range(400))
    # module statements only: a generated data table, registered where it is built
    (root / "store" / "widths.py").write_text(f"from store import registry\n\nregistry.add_table([\n{rows}\n])\n")
    for name in ("alpha", "beta", "gamma"):
        (root / "store" / f"{name}.py").write_text("\n\n".join(_function(3000 + 20 * len(name) + k) for k in range(12)))
    ws = Workspace.open(root)
    ws.index()
    return ws


@pytest.mark.parametrize("path, later, kept", [
    ("store/cache.py", "Why does normalize_record_3101 strip strings?", False),
    ("store/cache.py", "Does `RecordCache.load_7` refresh stale values?", True),
    ("store/widths.py", "Why does normalize_record_3101 strip strings?", False),
])
def test_an_earlier_tasks_single_class_read_keeps_its_marker_unless_named(tmp_path, path, later, kept):
    """A file of one class is one definition, and a data table only statements: block compression
    never cuts either.  Read for a task that is over, and neither named nor ranked by anything the
    conversation says since, such a read keeps only its marker, like a file of many definitions it
    names nothing in."""
    ws = _single_class_project(tmp_path / "p")
    try:
        comp = Compressor(ws, CompressionSettings.for_mode("safe", trigger=3000, clear_at_least=1000,
                                                           keep_tool_uses=1))
        agent = Agent(ws, "Why does RecordCache refresh a stale record twice, and what are the zone widths?")
        agent.read(path)
        agent.say("It refreshes in load and again in get.", later)
        for name in ("alpha", "beta", "gamma"):
            body = agent.read(f"store/{name}.py")
            res = comp.compress(body, "anthropic")
        sent = result_text((res.body or body)["messages"][2])
        if kept:
            assert sent == unpad_gutter(result_text(body["messages"][2]))
        else:
            # one marker line naming the lines and what they hold (a comment in the file's language)
            assert "\n" not in sent and "[memstrata: lines 1-" in sent and path in sent
            assert count_tokens(sent) < count_tokens(result_text(body["messages"][2])) / 10
            if path == "store/cache.py":
                assert "RecordCache.load_1" in sent
    finally:
        ws.close()


def test_a_compaction_step_must_pay_under_the_cache_prices():
    e = ANTHROPIC_CACHE
    # Clearing 20k of a 50k prefix re-bills the 30k left at 1.25x instead of 0.1x: 34.5k input tokens now,
    # 2k a turn later on; it pays only with 17 turns or more to come.
    assert e.net_saving(20_000, 30_000, 16) < 0 < e.net_saving(20_000, 30_000, 17)
    # OpenAI's cached input at half price and no write charge: the same step pays after 2 more turns.
    o = CacheEconomics(read=0.5, write=1.0)
    assert o.net_saving(20_000, 30_000, 0) < 0 < o.net_saving(20_000, 30_000, 1)


def test_behind_a_one_hour_breakpoint_a_step_is_priced_at_the_one_hour_write():
    """A conversation whose moving breakpoint is a 1-hour one has what a step re-bills written at 2x
    the input rate, not 1.25x: the same step needs 28 turns to come, not 17."""
    def body(last_ttl):
        mark = {"type": "ephemeral", **({"ttl": last_ttl} if last_ttl else {})}
        return {"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "q", "cache_control": mark}]}]}
    five, hour = cache_economics(body(None), "anthropic"), cache_economics(body("1h"), "anthropic")
    assert (five.write, hour.write) == (1.25, 2.00)
    assert hour.net_saving(20_000, 30_000, 27) < 0 < hour.net_saving(20_000, 30_000, 28)


def _long_task(ws, agent, reads, system_words=20):
    lines = (ws.root / BIG).read_text().split("\n")
    for k in range(reads):
        # windows that do not overlap: a re-read of lines already forwarded whole would be a pointer
        body = agent.read(BIG, "\n".join(lines[k * 100:k * 100 + 100]) + "\n")
        body["system"] = [{"type": "text", "text": "You are a coding agent. " * system_words,
                           "cache_control": {"type": "ephemeral"}}]
        body["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        yield body


def test_no_step_on_consecutive_turns_and_none_that_loses(big_ws):
    """Anthropic with Claude Code's breakpoints (system prompt, last block): steps come, but never on two
    turns in a row (the provider has only just written the prefix the first one made)."""
    settings = CompressionSettings.for_mode("safe", min_tokens=400, trigger=3000, clear_at_least=500,
                                            keep_tool_uses=1, keep_task_tool_uses=1)
    comp = Compressor(big_ws, settings)
    agent = Agent(big_ws, "Why does `normalize_record_5` round floats?")
    steps = [comp.compress(b, "anthropic").compaction for b in _long_task(big_ws, agent, 30)]
    assert any(steps), "a long enough session takes a step"
    assert not any(a and b for a, b in zip(steps, steps[1:]))
    # The same reads priced without a cache (no cache_control): clearing pays at once.
    nocache = Compressor(big_ws, settings)
    agent = Agent(big_ws, "Why does `normalize_record_5` round floats?")
    bodies = list(_long_task(big_ws, agent, 5))
    for b in bodies:
        b["system"] = b["system"][0]["text"]
        del b["messages"][-1]["content"][-1]["cache_control"]
    assert any(nocache.compress(b, "anthropic").compaction for b in bodies)


def test_a_step_from_the_top_counts_on_fewer_turns(big_ws, monkeypatch):
    """One long task under Claude Code's breakpoints (system prompt, last block): every step re-bills
    from the top, the costliest step to take before a conversation ends, so it must pay back within
    half the turns a step behind a breakpoint counts on: steps still come, but fewer of them than
    the plain payback rule would take."""
    from memstrata.harness.proxy import compaction

    settings = CompressionSettings.for_mode("safe", min_tokens=400, trigger=3000, clear_at_least=500,
                                            keep_tool_uses=1, keep_task_tool_uses=1)

    def steps() -> int:
        comp = Compressor(big_ws, settings)
        agent = Agent(big_ws, "Why does `normalize_record_5` round floats?")
        return sum(comp.compress(b, "anthropic").compaction for b in _long_task(big_ws, agent, 30, system_words=300))

    assert compaction.TOP_STEP_HORIZON < 1.0
    taken = steps()
    monkeypatch.setattr(compaction, "TOP_STEP_HORIZON", 1.0)
    assert 0 < taken < steps()


def test_aggressive_cuts_a_read_to_about_its_limit_and_shows_a_smaller_one_whole(big_ws):
    """Aggressive cuts each new result to about ``AGGRESSIVE_RESULT_CAP`` tokens, the definitions the
    question ranks first (the one it names among them, whole); a read under that limit, though over
    ``min_tokens``, is shown whole: cutting it would save little and risk the code the task needs."""
    settings = CompressionSettings.for_mode("aggressive", likely_file=0.0)
    assert settings.result_cap == AGGRESSIVE_RESULT_CAP
    comp = Compressor(big_ws, settings)
    agent = Agent(big_ws, "Why does `normalize_record_97` drop a required field instead of raising?")
    agent.read("records/small.py")
    body = agent.read(BIG)
    sent = forwarded(comp.compress(body, "anthropic"), body)
    small = result_text(body["messages"][2])
    assert settings.min_tokens < count_tokens(small) < settings.result_cap
    assert sent[2] == whole(body["messages"][2])
    cut = result_text(sent[4])
    assert "[memstrata: lines " in cut and numbered_lines(big_ws, 97) in cut
    shown = [k for k in range(COUNT) if numbered_lines(big_ws, k) in cut]
    assert len(shown) > 3                                             # filled by rank, not one function
    assert settings.result_cap / 2 < count_tokens(cut) <= settings.result_cap


def test_aggressive_keeps_only_what_is_named_of_an_earlier_tasks_read(big_ws):
    """Once the next task has begun reading, aggressive compacts an earlier task's read to the
    definitions the conversation names, with no ranked share (``earlier_ratio`` 0): that task is over,
    and every later turn pays to read its results again."""
    settings = CompressionSettings.for_mode("aggressive", likely_file=0.0, trigger=3000, clear_at_least=1000)
    assert (settings.earlier_ratio, settings.earlier_cap) == (0.0, 0)
    then, later = _read_then_a_new_task_naming_41(big_ws, Compressor(big_ws, settings))
    shown_then = [k for k in range(COUNT) if numbered_lines(big_ws, k) in then]
    shown_now = [k for k in range(COUNT) if numbered_lines(big_ws, k) in later]
    assert len(shown_then) > 3 and "[memstrata: lines " in later
    assert 41 in shown_now and set(shown_now) <= {41, 97}, shown_now  # named, and nothing ranked
