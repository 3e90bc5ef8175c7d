"""The proxy's own cache breakpoints at the latest task starts, the steps that stand on them, and the
reads an agent keeps coming back to.

Unit checks of harness/proxy/breakpoints.py, then whole conversations through the running proxy with
the anthropic SDK to the caching stand-in provider (tests/caching_provider.py), which refuses more than
four breakpoints and bills by Anthropic's published caching rules.
"""

import copy

import anthropic
import pytest

from memstrata.harness.proxy.app import HarnessConfig, build_app
from memstrata.harness.proxy.breakpoints import client_breakpoints, free_marks, mark_control, with_mark
from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor
from memstrata.harness.proxy.forward import ProxyConfig
from tests.caching_provider import CachingProvider
from tests.stub_provider import ServerThread

from .test_compress_request import Agent
from .test_current_task import big_ws  # noqa: F401  (the fixture: a project with a module over the limit)

KEY = "sk-test-task-breakpoints"
MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
# Thresholds scaled to the fixture's files, so a few short tasks take compaction steps.
SETTINGS = CompressionSettings.for_mode("safe", min_tokens=400, trigger=3000, clear_at_least=1200,
                                        keep_tool_uses=1)
TASKS = [("Why does normalize_record_3 strip strings?", ["records/small.py", "records/part_a.py"]),
         ("How does normalize_record_57 coerce numbers?", ["records/part_b.py", "records/part_c.py"]),
         ("Where does normalize_record_1003 raise on a missing field?", ["records/part_a.py", "records/small.py"]),
         ("Which kinds does normalize_record_88 accept?", ["records/part_c.py", "records/part_b.py"])]


SYSTEM = "You are a coding agent working in the user's repository. " * 120   # over 1,024 tokens: cached


def _body(messages, system_mark=MARK, last_mark=MARK):
    system = [{"type": "text", "text": SYSTEM}]
    if system_mark:
        system[0]["cache_control"] = dict(system_mark)
    messages = copy.deepcopy(messages)
    if last_mark:
        messages[-1]["content"][-1]["cache_control"] = dict(last_mark)
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": system, "messages": messages}


def session(ws, tasks=TASKS, make_body=_body, **marks):
    """Claude Code's shape: each task a user request, then one Read per request; a closing answer."""
    agent = Agent(ws, tasks[0][0])
    for t, (question, reads) in enumerate(tasks):
        if t:
            agent.say("Done: the change is in place.", question)
        for path in reads:
            agent.read(path)
            yield t, make_body(agent.messages, **marks)


def last_forwarded(ws, settings, **session_args) -> list[dict]:
    """The messages of a session's last request as the compressor forwards it, every request of
    the session compressed in turn as the proxy does."""
    comp = Compressor(ws, settings)
    body = res = None
    for _t, body in session(ws, **session_args):
        res = comp.compress(copy.deepcopy(body), "anthropic")
    return (res.body or body)["messages"]


# -- the marks themselves --------------------------------------------------------------------------


def test_marks_use_only_the_slots_the_client_left():
    msg = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert free_marks({"messages": [msg]}) == 0                      # no caching: no marks at all
    assert free_marks(_body([msg])) == 2                             # system + last block: two free
    three = _body([{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": MARK}]}, msg])
    assert len(client_breakpoints(three)) == 3 and free_marks(three) == 1
    tools = dict(three, tools=[{"name": "Read", "input_schema": {}, "cache_control": MARK}])
    assert free_marks(tools) == 0
    assert free_marks({"messages": [msg], "cache_control": MARK}) == 2   # automatic caching's one mark


def test_a_mark_goes_on_the_last_block_and_keeps_lifetimes_in_order():
    assert with_mark({"role": "user", "content": "fix it"}, MARK) == {
        "role": "user", "content": [{"type": "text", "text": "fix it", "cache_control": MARK}]}
    marked = {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": MARK}]}
    assert with_mark(marked, MARK) is None and with_mark({"role": "user", "content": ""}, MARK) is None
    assert with_mark({"role": "assistant", "content": [{"type": "thinking", "thinking": "..."}]}, MARK) is None
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": [{"type": "text", "text": "b", "cache_control": HOUR}]},
            {"role": "user", "content": [{"type": "text", "text": "c", "cache_control": MARK}]}]
    # A mark takes the lifetime of the client's next mark after it (lifetimes only shorten along the
    # prompt), or that of its last one when none follows.
    assert mark_control({"system": [], "messages": msgs}, 0) == HOUR
    assert mark_control({"system": [], "messages": msgs}, 1) == MARK
    assert mark_control({"system": [{"type": "text", "text": "s", "cache_control": HOUR}],
                         "messages": msgs[:1]}, 0) == HOUR


# -- whole conversations ---------------------------------------------------------------------------


@pytest.fixture
def caching():
    provider = CachingProvider()
    with ServerThread(provider.app) as t:
        provider.url = t.url
        yield provider


def _proxy(ws, provider, settings=SETTINGS):
    cfg = ProxyConfig(openai_base=provider.url + "/v1", anthropic_base=provider.url, trust_env=False,
                      compression=settings)
    return ServerThread(build_app(ws, HarnessConfig(proxy=cfg, mount_mcp=False)))


def _marks(body) -> list[int]:
    return [i for i, m in enumerate(body["messages"]) if isinstance(m.get("content"), list)
            and any(isinstance(p, dict) and "cache_control" in p for p in m["content"])]


def test_the_latest_two_task_starts_are_marked_and_the_provider_takes_every_request(big_ws, caching):
    with _proxy(big_ws, caching) as proxy:
        client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0)
        for t, body in session(big_ws):
            client.messages.create(**body)   # the stand-in answers 400 to a fifth breakpoint
            sent = caching.received[-1]
            assert len(client_breakpoints(sent)) <= 4
            starts = [i for i, m in enumerate(body["messages"])
                      if m["role"] == "user" and m["content"][-1].get("type") == "text"]
            want = set(starts[-2:]) if t else set()
            assert set(_marks(sent)) - {len(body["messages"]) - 1} == want
    assert len(caching.bills) == sum(len(r) for _, r in TASKS)


def test_no_marks_for_a_client_that_does_not_cache(big_ws, caching):
    with _proxy(big_ws, caching) as proxy:
        client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0)
        for _, body in session(big_ws, system_mark=None, last_mark=None):
            client.messages.create(**body)
            assert client_breakpoints(caching.received[-1]) == []


def test_no_marks_past_the_clients_last_breakpoint(big_ws, caching):
    """A client that caches its system prompt alone is billed plain input for the conversation; a
    proxy mark in it would have the provider write those tokens at the cache-write price instead."""
    with _proxy(big_ws, caching) as proxy:
        client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0)
        for _, body in session(big_ws, last_mark=None):
            client.messages.create(**body)
            assert _marks(caching.received[-1]) == []
    # Only the system prompt is ever written to the cache, as the client asked.
    system_tokens = caching._tokens(SYSTEM) + caching.framing
    assert all(bill.cache_write <= system_tokens for bill in caching.bills)


def test_a_step_behind_a_task_mark_keeps_the_cache_of_what_precedes(big_ws, caching):
    """Compacting the task before the current one re-bills that task alone: the provider reads the
    conversation up to its start from the cache at the step."""
    comp = Compressor(big_ws, SETTINGS)
    steps = []
    with _proxy(big_ws, caching) as proxy:
        client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=KEY, max_retries=0)
        for t, body in session(big_ws):
            res = comp.compress(copy.deepcopy(body), "anthropic")   # the same pass, to see the steps
            client.messages.create(**body)
            if res.compaction:
                steps.append((t, caching.bills[-1]))
    assert steps, "the session takes a compaction step"
    # More than the system prompt is read back: a step from the top (what Claude Code's own two
    # breakpoints allow) would read exactly that.  Not at the second task: the first task's start
    # was marked only once a second task began, so no cache entry ends there yet.
    system_tokens = caching._tokens(SYSTEM) + caching.framing
    later = [bill for t, bill in steps if t >= 2]
    assert later and all(bill.cache_read > system_tokens for bill in later)
    # ... and every step is taken after the first task: an earlier task's results, not the current one's.
    assert all(t >= 1 for t, _ in steps)


def test_a_file_read_again_and_again_stays_whole_for_its_pointers(big_ws):
    """A file the agent re-reads every few turns keeps one whole copy (each re-read is then a pointer);
    a file read once in an earlier task is compacted (with steps that pay over a long horizon)."""
    comp = Compressor(big_ws, CompressionSettings.for_mode("safe", min_tokens=400, trigger=3000, clear_at_least=1200,
                                                           keep_tool_uses=1, horizon_share=10.0, horizon=100))
    agent = Agent(big_ws, TASKS[0][0])
    bodies = []
    for t, (question, _) in enumerate(TASKS):
        if t:
            agent.say("Done.", question)
        agent.read("records/part_a.py")           # every task reads it
        agent.read(f"records/part_{'bc'[t % 2]}.py" if t < 2 else "records/small.py")
        bodies.append(_body(agent.messages))
    for body in bodies:
        res = comp.compress(copy.deepcopy(body), "anthropic")
    sent = (res.body or bodies[-1])["messages"]
    reads = [(i, m["content"][0]["content"]) for i, m in enumerate(sent)
             if m["role"] == "user" and m["content"][0].get("type") == "tool_result"]
    part_a = [text for i, text in reads if "part_a" in str(bodies[-1]["messages"][i - 1]["content"][1]["input"])]
    assert sum("[memstrata: the same text as the earlier read" in text for text in part_a) >= 2
    assert any("[memstrata:" not in text for text in part_a)             # the one whole copy they point at
    first_b = next(text for i, text in reads if "part_b" in str(bodies[-1]["messages"][i - 1]["content"][1]["input"]))
    assert "[memstrata: lines" in first_b                                 # read once, long ago: compacted
