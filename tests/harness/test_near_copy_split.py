"""A re-read forwarded as pointers never splits a definition between a pointer and lines shown here."""

from __future__ import annotations

from memstrata.compressor.block import Block
from memstrata.harness.proxy.compaction import near_copy_form


def _source(changed: bool) -> list[str]:
    lines: list[str] = []
    for i in range(8):
        lines += [f"def step_{i}(values):", f"    total = {i}"]
        lines += [f"    total += values[{k}] * {k + i}" for k in range(10)]
        lines += ["    return total", ""]
    if changed:
        lines[lines.index("def step_7(values):") + 1] = "    total = -7"
    return lines


def _block(lines: list[str]) -> Block:
    display = [f"{n:>6}\t{line}" for n, line in enumerate(lines, 1)]
    return Block(display, lines, list(range(1, len(lines) + 1)), "python", "pkg/steps.py")


def test_a_definition_the_earlier_form_shows_in_part_is_shown_whole_here():
    earlier, now = _block(_source(False)), _block(_source(True))
    start = earlier.code.index("def step_3(values):")
    end = earlier.code.index("def step_4(values):") - 1
    # The earlier read went out cut in the middle of step_3: its first half is
    # in that form, the rest behind a marker.
    visible = set(range(len(earlier.code))) - set(range(start + 6, end + 1))
    form = near_copy_form(now, earlier, "pkg/steps.py", "toolu_1", visible=visible)
    assert form is not None and "[memstrata: lines" in form
    out = form.split("\n")
    body = now.display[start:end]
    at = out.index(body[0])
    assert out[at:at + len(body)] == body  # step_3 whole, in one place, here
    # Every other definition is whole here or inside a single pointer.
    for i in range(8):
        header = now.display[now.code.index(f"def step_{i}(values):")]
        if header in out:
            k = out.index(header)
            assert all("[memstrata:" not in line for line in out[k:k + 13]), i
    assert now.display[now.code.index("    total = -7")] in out  # the changed line is shown
