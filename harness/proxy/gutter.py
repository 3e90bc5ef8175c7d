"""The padding before the line numbers of a numbered read, and what it costs in tokens.

cat -n and Claude Code's Read right-align a read's line numbers to six
columns (``     12→code``); that alignment is about a sixth of a read's
tokens.  The proxy forwards reads without it, and counts a read from its
unpadded text, which encodes about a quarter faster, plus the padding's
tokens worked out exactly without encoding.
"""

from __future__ import annotations

import re

# The padding is a run of spaces at a line's start before a number and its arrow or tab.  Found
# after each line break (a literal the regex engine jumps between) and, apart, at the text's start:
# a pattern anchored by ``^`` in multiline mode is tried at every character of a read instead.
_PADDING_AFTER_BREAK = re.compile(r"\n +(?=\d{1,7}(?:→|\t))")
_ONE_SPACE_AFTER_BREAK = re.compile(r"\n (?=\d{1,7}(?:→|\t))")
_PADDING_AT_START = re.compile(r" +(?=\d{1,7}(?:→|\t))")


def unpad_gutter(text: str) -> str:
    """``text`` with the padding before each line number removed (``     12→code`` becomes
    ``12→code``): every line, its number and its code as the tool gave them, in fewer tokens.
    Lines that carry no number (an elision marker, a pointer to an earlier read) stay as they are."""
    return _unpadded(text)[0]


def _unpadded(text: str) -> tuple[str, int, int]:
    """(``text`` without its numbers' padding, how many lines were padded, how many of those by a
    single space)."""
    bare, runs = _PADDING_AFTER_BREAK.subn("\n", text)
    ones = len(_ONE_SPACE_AFTER_BREAK.findall(text)) if runs else 0
    head = _PADDING_AT_START.match(bare)   # the first line: the replacements above never reach it
    if head is not None:
        runs += 1
        ones += head.end() == 1
        bare = bare[head.end():]
    return bare, runs, ones


def unpad_gutter_counted(text: str) -> tuple[str, int]:
    """:func:`unpad_gutter` of ``text``, and how many cl100k tokens fewer it is, exactly, without
    encoding either.  cl100k's pre-tokenizer cuts a line break off on its own and splits the run
    of spaces after it, before a digit, into its own pieces (all but its last space, then that
    space: one token each); BPE never merges across pieces, so removing the run removes one
    token per padded line of one space and two per longer padding, and changes no other token.
    (tests/harness/test_gutter.py holds this against the encoder on real files.)  The text is
    scanned twice by the regex engine and never line by line in Python (a new read of 500 lines
    is unpadded on every request that brings one)."""
    global _last
    last = _last  # one read, so another thread's update is seen whole or not at all
    if last[0] is text:
        # The proxy counts a new read (.token_counts) and then forwards it unpadded: the same text
        # object twice in a row.  Held by the reference kept here, it cannot be another text.
        return last[1]
    bare, runs, ones = _unpadded(text)
    # Two tokens per padding run, one for a run of a single space (rare: six-digit numbers).
    out = bare, 2 * runs - ones if runs else 0
    _last = (text, out)
    return out


_last: tuple[str | None, tuple[str, int]] = (None, ("", 0))
