"""A step from the top, weighed against a step behind a breakpoint over the same turns.

When nothing before the first task's start can be cached (a system prompt under the provider's
1,024-token minimum), only a step from the top can compact the first task's reads.  Such a step is
held to a shorter horizon (``TOP_STEP_HORIZON``) before it is taken at all; but when it and a step
behind a later breakpoint both pay, ranking the top step on that shorter horizon made it lose to the
smaller step every time, and what only it clears -- the first task's reads -- stayed whole for the
rest of the session, read again on every turn.  Set against such a step, a step from the top is now
worth that step's saving plus what it adds (the more it clears against the more it re-bills), the
difference weighed on the top step's shorter horizon.
"""

import copy

from memstrata.harness.proxy.compress_request import CompressionSettings

from .test_current_task import big_ws  # noqa: F401  (the fixture: a project of a few modules)
from .test_task_breakpoints import last_forwarded

# The second task re-reads the first task's last file: a pointer into that read, which holds it, so no
# step pays at the second task's start.  At the third task's start both kinds of step pay.
TASKS = [("Why does normalize_record_3 strip strings?", ["records/small.py", "records/part_a.py"]),
         ("How does normalize_record_57 coerce numbers?", ["records/part_a.py", "records/part_b.py",
                                                           "records/part_c.py"]),
         ("Where does normalize_record_1003 raise on a missing field?", ["records/normalize.py"]),
         ("Which kinds does normalize_record_88 accept?", ["records/normalize.py"])]

MARK = {"type": "ephemeral"}
SHORT_SYSTEM = "You are a coding agent working in the user's repository. " * 10   # under 1,024 tokens


def _body(messages):
    messages = copy.deepcopy(messages)
    messages[-1]["content"][-1]["cache_control"] = dict(MARK)
    return {"model": "claude-sonnet-4-5", "max_tokens": 256,
            "system": [{"type": "text", "text": SHORT_SYSTEM, "cache_control": dict(MARK)}], "messages": messages}


def _first_task_reads(ws, settings) -> list[str]:
    """The first task's reads as the last request of a four-task session forwards them."""
    sent = last_forwarded(ws, settings, tasks=TASKS, make_body=_body)
    return [sent[2]["content"][0]["content"]]


def _settings(**overrides):
    return CompressionSettings.for_mode("aggressive", **dict(dict(min_tokens=400, trigger=3000, clear_at_least=1200,
                                                                  likely_file=0.0), **overrides))


def test_the_first_tasks_reads_are_compacted_by_a_step_from_the_top(big_ws):
    first = _first_task_reads(big_ws, _settings())
    assert all("[memstrata: lines " in text for text in first)


def test_a_step_from_the_top_still_needs_to_pay_on_its_shorter_horizon(big_ws):
    # With no turns to count on, no step pays: the first task's reads stay as they arrived.
    first = _first_task_reads(big_ws, _settings(horizon=0))
    assert not any("[memstrata: lines " in text for text in first)
