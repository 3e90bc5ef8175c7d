"""Aggressive mode takes no compaction step at a new task's words while the task just ended still
holds its results (``defer_task_start``).

Until the new task's first tool call, the results of the task just ended stay as they arrived (a
follow-up may be answered from them).  A step at the new task's words could clear only what that
hold leaves out -- a re-read forwarded as pointers, among the held results -- and would re-bill the
held results behind it; the step at the first tool call, which compacts them, re-bills them again.
Deferred, one step does both, and the region is re-billed once.
"""

import copy

from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor

from .test_compress_request import Agent
from .test_current_task import big_ws  # noqa: F401  (the fixture: a project of a few modules)
from .test_task_breakpoints import TASKS, _body


def _settings(**overrides):
    # Thresholds scaled to the fixture's files; steps that pay over a long horizon.
    return CompressionSettings.for_mode("aggressive", min_tokens=400, trigger=3000, clear_at_least=300,
                                        likely_file=0.0, horizon_share=10.0, horizon=100, **overrides)


def _steps(ws, settings) -> tuple[list[bool], str]:
    """A task reads part_a, part_a again after half of its functions changed (forwarded as pointers
    into the first read), then part_b; the next task's words come in a request of their own, then
    its first two reads.  Returns whether each of those three requests was a compaction step, and
    the re-read as the last one forwards it."""
    comp = Compressor(ws, settings)
    agent = Agent(ws, TASKS[0][0])
    comp.compress(_body(agent.messages), "anthropic")
    agent.read("records/part_a.py")
    comp.compress(_body(agent.messages), "anthropic")
    text = (ws.root / "records" / "part_a.py").read_text()
    for k in range(2000, 2012, 2):   # half its functions changed: a pointer form of some size
        text = text.replace(f"value = int(value) + {k}", f"value = int(value) * {k}")
    agent.read("records/part_a.py", text)
    at = len(agent.messages) - 1
    res = comp.compress(_body(agent.messages), "anthropic")
    assert "of the earlier read of" in res.body["messages"][at]["content"][0]["content"]
    agent.read("records/part_b.py")
    comp.compress(_body(agent.messages), "anthropic")
    agent.say("Done.", TASKS[1][0])
    steps = [comp.compress(copy.deepcopy(_body(agent.messages)), "anthropic").compaction]
    for path in ("records/part_c.py", "records/small.py"):
        agent.read(path)
        body = _body(agent.messages)
        res = comp.compress(copy.deepcopy(body), "anthropic")
        steps.append(res.compaction)
    return steps, (res.body or body)["messages"][at]["content"][0]["content"]


def test_aggressive_waits_for_the_new_tasks_first_tool_call(big_ws):
    """One step, at the first read: the pointer form and the held results compacted together."""
    assert CompressionSettings.for_mode("aggressive").defer_task_start
    steps, reread = _steps(big_ws, _settings())
    assert steps == [False, True, False]
    assert "of the earlier read of" not in reread and "[memstrata: lines " in reread


def test_without_it_a_step_comes_at_the_words_and_another_after_the_first_read(big_ws):
    """Two steps: the pointer form at the words, the held results one request after the first
    read (no step on consecutive turns), each re-billing what follows the pointer form."""
    assert not CompressionSettings.for_mode("safe").defer_task_start
    steps, reread = _steps(big_ws, _settings(defer_task_start=False))
    assert steps == [True, False, True]
    assert "of the earlier read of" not in reread
