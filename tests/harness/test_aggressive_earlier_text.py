"""Aggressive mode shortens an earlier task's long own text at compaction.

A user who pastes a long log, benchmark output or a pull request's long description into a request
asks one task with it.  Kept whole, every later turn of the session reads it again; and it sits before
the reads that follow it, so a step clearing an earlier task's reads must re-bill it too, and no such
step paid: the reads before it stayed whole to the end as well.  In aggressive mode (``earlier_text``)
such a text keeps its opening (what it was about) and its end (what it asked) once a later task has
started reading, like the question does of a long message; safe mode leaves the user's words alone, and
so does aggressive mode while the text's own task lasts.
"""

from memstrata.harness.proxy.compress_request import CompressionSettings, Compressor

from .test_aggressive_small_earlier_reads import _settings
from .test_current_task import big_ws  # noqa: F401  (the fixture: a project of a few modules)
from .test_task_breakpoints import _body, last_forwarded, session

LOG = "".join(f"2026-01-01 12:{i // 60:02d}:{i % 60:02d} worker-{i % 7} flushed batch {i} after {3 * i} ms\n"
              for i in range(400))
PASTED = ("Batches flush slowly since the last release; the log of one run follows.\n" + LOG
          + "Why does normalize_record_57 take so long on these batches?")
TASKS = [("Why does normalize_record_3 strip strings?", ["records/small.py", "records/part_a.py"]),
         (PASTED, ["records/part_b.py", "records/part_c.py"]),
         ("Where does normalize_record_1003 raise on a missing field?", ["records/part_a.py", "records/small.py"]),
         ("Which kinds does normalize_record_88 accept?", ["records/part_c.py", "records/part_b.py"])]


def _pasted_as_forwarded(messages) -> str:
    return next(m["content"][0]["text"] for m in messages
                if m["role"] == "user" and m["content"][0].get("type") == "text"
                and m["content"][0]["text"].startswith("Batches flush slowly"))


def test_an_earlier_tasks_long_text_keeps_its_opening_and_end(big_ws):
    text = _pasted_as_forwarded(last_forwarded(big_ws, _settings("aggressive"), tasks=TASKS))
    assert "of this message elided: an earlier task's text]" in text
    assert text.startswith("Batches flush slowly since the last release")      # what it was about
    assert text.endswith("Why does normalize_record_57 take so long on these batches?")   # what it asked
    assert len(text) < len(PASTED) / 5
    assert CompressionSettings.for_mode("aggressive").earlier_text == 2000
    assert CompressionSettings.for_mode("safe").earlier_text == 0


def test_safe_mode_and_the_setting_off_keep_it_whole(big_ws):
    for settings in (_settings("safe", min_tokens=400), _settings("aggressive", earlier_text=0)):
        assert _pasted_as_forwarded(last_forwarded(big_ws, settings, tasks=TASKS)) == PASTED


def test_its_own_task_keeps_it_whole(big_ws):
    comp = Compressor(big_ws, _settings("aggressive"))
    for t, body in session(big_ws, tasks=TASKS, make_body=_body):
        res = comp.compress(body, "anthropic")
        if t == 1:
            assert _pasted_as_forwarded((res.body or body)["messages"]) == PASTED
