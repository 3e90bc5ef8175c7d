"""Aggressive mode holds no earlier task's read whole for the re-reads of a file the agent keeps coming back to.

Safe mode keeps the latest whole read of such a file, so that its next re-read is a short pointer
(tests/harness/test_task_breakpoints.py).  In aggressive mode that read's task is over: held past
the point where its task is among the latest two (the proxy's breakpoints at those task starts keep
the cache of what precedes it), it sits so deep in the cached prefix that no later step pays to clear
it, and every turn of the rest of the session reads it again.  So it is compacted with its task.
"""

import copy

from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor

from .test_compress_request import Agent
from .test_current_task import big_ws  # noqa: F401  (the fixture: a project of a few modules)
from .test_task_breakpoints import TASKS, _body


def _part_a_reads(ws, settings) -> list[str]:
    """Every task reads records/part_a.py first, then another module; part_a's reads as the last
    request forwards them, oldest first."""
    comp = Compressor(ws, settings)
    agent = Agent(ws, TASKS[0][0])
    bodies = []
    for t, (question, _) in enumerate(TASKS):
        if t:
            agent.say("Done.", question)
        agent.read("records/part_a.py")
        bodies.append(_body(agent.messages))
        agent.read(f"records/part_{'bc'[t % 2]}.py" if t < 2 else "records/small.py")
        bodies.append(_body(agent.messages))
    for body in bodies:
        res = comp.compress(copy.deepcopy(body), "anthropic")
    sent = (res.body or bodies[-1])["messages"]
    return [m["content"][0]["content"] for i, m in enumerate(sent)
            if m["role"] == "user" and m["content"][0].get("type") == "tool_result"
            and "part_a" in str(bodies[-1]["messages"][i - 1]["content"][1]["input"])]


def _settings(mode, **overrides):
    # Thresholds scaled to the fixture's files; steps that pay over a long horizon.
    return CompressionSettings.for_mode(mode, min_tokens=400, trigger=3000, clear_at_least=1200, likely_file=0.0,
                                        horizon_share=10.0, horizon=100, **overrides)


def test_aggressive_compacts_an_earlier_tasks_read_of_a_file_read_again_and_again(big_ws):
    assert not CompressionSettings.for_mode("aggressive").hold_returned_reads
    assert CompressionSettings.for_mode("safe").hold_returned_reads
    # With the step at a task's words (``defer_task_start`` off) the first read is compacted one
    # request after a task start; deferred, the steps fall so that each later re-read still finds it
    # whole and points into it (test_aggressive_task_start_step.py), which says nothing of the hold.
    first = _part_a_reads(big_ws, _settings("aggressive", defer_task_start=False))[0]
    assert first.startswith("[memstrata:") or "[memstrata: lines " in first   # compacted with its task


def test_held_it_stays_whole_for_the_pointers(big_ws):
    """The same session with the hold on (safe's rule): the first read is the whole copy the
    re-reads point at, and stays so."""
    reads = _part_a_reads(big_ws, _settings("aggressive", hold_returned_reads=True))
    assert "[memstrata:" not in reads[0]
    assert sum("[memstrata: the same text as the earlier read" in text for text in reads[1:]) >= 2


def _edited_reread_then_a_new_task(ws, settings) -> tuple[str, str]:
    """A task reads part_a, part_b, then part_a again after two of its functions changed (forwarded as
    pointers into the first read, the changed functions verbatim); the next task reads two other
    modules.  Returns the re-read as forwarded when it arrived and as the last request forwards it."""
    comp = Compressor(ws, settings)
    agent = Agent(ws, TASKS[0][0])
    comp.compress(_body(agent.messages), "anthropic")
    agent.read("records/part_a.py")
    comp.compress(_body(agent.messages), "anthropic")
    agent.read("records/part_b.py")
    comp.compress(_body(agent.messages), "anthropic")
    text = (ws.root / "records" / "part_a.py").read_text()
    edited = text.replace("value = int(value) + 2003", "value = int(value) * 2003").replace(
        "value = int(value) + 2007", "value = int(value) * 2007")
    assert edited.count("* 200") == 2
    agent.read("records/part_a.py", edited)
    at = len(agent.messages) - 1
    res = comp.compress(_body(agent.messages), "anthropic")
    then = res.body["messages"][at]["content"][0]["content"]
    agent.say("Done.", TASKS[1][0])
    for path in ("records/part_c.py", "records/small.py"):
        agent.read(path)
        body = _body(agent.messages)
        res = comp.compress(copy.deepcopy(body), "anthropic")
    return then, (res.body or body)["messages"][at]["content"][0]["content"]


def test_aggressive_compacts_an_earlier_tasks_reread_forwarded_as_pointers(big_ws):
    """The re-read's pointer form (its changed lines verbatim) is compacted with its task, like
    any read of that task, once the next task has begun reading."""
    assert CompressionSettings.for_mode("aggressive").compact_pointers
    assert not CompressionSettings.for_mode("safe").compact_pointers
    then, later = _edited_reread_then_a_new_task(big_ws, _settings("aggressive"))
    assert "of the earlier read of" in then and "* 2003" in then          # pointers, the change verbatim
    assert "of the earlier read of" not in later and "[memstrata: lines " in later
    assert len(later) < len(then) / 2


def test_without_it_the_pointer_form_stays(big_ws):
    then, later = _edited_reread_then_a_new_task(big_ws, _settings("aggressive", compact_pointers=False))
    assert "of the earlier read of" in then and later == then
