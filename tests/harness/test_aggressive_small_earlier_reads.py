"""Aggressive mode compacts an earlier task's small reads too.

Rule 2 keeps a piece under ``min_tokens`` whole: cutting a small read the agent is working with saves
little and risks what it needs.  An earlier task's read is another matter in aggressive mode: the task
it served is over, it keeps only what the conversation names (``earlier_ratio`` 0), and every later
turn reads it again.  Agents read many small files (a language that puts each type or command in a
file of its own), and kept whole they added up to most of what every later turn re-read.  So in
aggressive mode an earlier task's read of any size is compacted with its task
(``earlier_min_tokens`` 0); safe mode keeps the floor.
"""

from memstrata.harness.proxy.compress_request import CompressionSettings

from .test_current_task import big_ws  # noqa: F401  (the fixture: a project of a few modules)
from .test_task_breakpoints import last_forwarded


def _first_small_read(ws, settings) -> str:
    """Four tasks of two reads each (the first task reads records/small.py, about 1,900 tokens);
    small.py's first read as the last request forwards it."""
    return last_forwarded(ws, settings)[2]["content"][0]["content"]


def _settings(mode, **overrides):
    # Thresholds scaled to the fixture's files (small.py is under min_tokens here); steps that pay
    # over a long horizon.  The earlier-text and earlier-table tests use the same.
    args = dict(min_tokens=4000, trigger=3000, clear_at_least=1200, likely_file=0.0, horizon_share=10.0,
                horizon=100)
    return CompressionSettings.for_mode(mode, **{**args, **overrides})


def test_aggressive_compacts_an_earlier_tasks_small_read(big_ws):
    first = _first_small_read(big_ws, _settings("aggressive"))
    assert "[memstrata: lines " in first                 # its definitions behind markers
    assert first.count("\n") < 10
    assert CompressionSettings.for_mode("aggressive").earlier_min_tokens == 0
    assert CompressionSettings.for_mode("safe").earlier_min_tokens is None


def test_with_a_floor_it_stays_whole(big_ws):
    first = _first_small_read(big_ws, _settings("aggressive", earlier_min_tokens=4000))
    assert "[memstrata:" not in first and "def normalize_record_1011" in first
