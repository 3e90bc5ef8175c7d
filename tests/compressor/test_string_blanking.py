"""String literals are blanked before a block's identifiers are read: exactly as the plain pattern
blanks them, in time linear in the text (a quote that never closes no longer makes every later quote
of its kind scan to the end again)."""

from __future__ import annotations

import random
import re

import pytest

from memstrata.compressor.outline import blank_strings, build_outline

# The pattern blank_strings answers for, written the plain way (its cost grows with the square of
# a text with an unterminated quote followed by many escaped ones).
PLAIN = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|`(?:\\.|[^`\\])*`")


def test_strings_are_blanked_as_the_plain_pattern_blanks_them():
    rng = random.Random(64)
    pieces = ["'", '"', "`", "\\", "\n", "\\\n", "a", " ", "x_1", "\\'", '\\"', "\\`"]
    texts = ["", "plain", "f('a', \"b\", `c`)", "# don't\nx = \"it's\"\n", "'a\\\n'b'", '"a\\' * 7]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 40))) for _ in range(20_000)]
    for text in texts:
        for repl in (" ", ""):
            assert blank_strings(text, repl) == PLAIN.sub(repl, text), text


@pytest.mark.timeout(20)
def test_an_unterminated_quote_before_many_escaped_ones_is_read_in_time():
    hostile = '"a\\' * 40_000  # the plain pattern: about a minute for each of the two reads below
    lines = ["def f():", "    return " + hostile + " 'hidden'", "", "y = g(" + hostile + " ')')", "z = 1"]
    outline = build_outline(lines, "python", "hostile.py")
    [unit] = [u for u in outline.units if u.kind == "def"]
    # The double quotes never close (their text is read); the single-quoted string is blanked.
    assert unit.name == "f" and {"return", "a"} <= unit.idents and "hidden" not in unit.idents
    # The line's brackets are counted outside strings: the call closes, z is a statement of its own.
    assert [u.binds for u in outline.units if u.kind == "stmt"] == [frozenset({"y"}), frozenset({"z"})]
