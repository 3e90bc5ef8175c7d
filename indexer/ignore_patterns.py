"""``.gitignore`` patterns matched in time linear in a name, whatever a repository's file says.

pathspec turns each ``*`` of a pattern into ``[^/]*``; Python's regular expressions backtrack, so a
name segment with several stars (``*a*a*a*a*a*a*b``) costs the name's length to the power of
their number on a name that almost matches, and one such line in a cloned repository's
``.gitignore`` stops an index run (and every server starting on the project) for good.

The stars of one segment are rewritten so that every one but the last takes the shortest text
before the fixed-width piece that follows it, once (an atomic group): glob pieces of fixed width,
placed in order, match wherever any placement does when each takes its leftmost place, so the
names a pattern matches are unchanged.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

_STAR = "[^/]*"
_DOUBLE_STAR = "(?:/.+)?"  # a `/**/` between segments
_SPECIAL = set("()/^$.|*+?{}")


def _without_slash(cls: str) -> str:
    """The character class ``cls`` made never to match ``/``, as git's own matching never lets a
    class match one (pathspec writes `[!a]` as `[^a]`, which does): a piece matching ``/`` would
    let a match cross from one name segment into the next, where leftmost placement is unsafe."""
    body = cls[1:-1]
    if body.startswith("^"):
        return cls if "/" in body else cls[:-1] + "/]"
    if "/" not in body and "-" not in body:
        return cls
    return "(?!/)" + cls  # a range may hold `/`: one character, never that one


def _tokens(regex: str) -> list[tuple[str, str]] | None:
    """``regex`` (as pathspec writes a pattern) as (kind, text) tokens: ``star`` for a glob
    star, ``atom`` for one character's worth that is never a ``/`` (a literal, an escape, a
    class, see :func:`_without_slash`), ``sep`` for anything else (a slash, a group, an anchor),
    which ends a segment.  None when it cannot be read."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(regex)
    while i < n:
        c = regex[i]
        if regex.startswith(_STAR, i):
            out.append(("star", _STAR))
            i += len(_STAR)
        elif c == "\\":
            if i + 1 >= n:
                return None
            out.append(("sep" if regex[i + 1] == "/" else "atom", regex[i:i + 2]))
            i += 2
        elif c == "[":
            j = i + 1
            if j < n and regex[j] == "^":
                j += 1
            if j < n and regex[j] == "]":
                j += 1
            while j < n and regex[j] != "]":
                j += 2 if regex[j] == "\\" else 1
            if j >= n:
                return None
            out.append(("atom", _without_slash(regex[i:j + 1])))
            i = j + 1
        elif regex.startswith(_DOUBLE_STAR, i):
            out.append(("dstar", _DOUBLE_STAR))
            i += len(_DOUBLE_STAR)
        elif c == "(":
            depth, j = 0, i
            while j < n:
                if regex[j] == "\\":
                    j += 2
                    continue
                depth += {"(": 1, ")": -1}.get(regex[j], 0)
                j += 1
                if depth == 0:
                    break
            if depth:
                return None
            out.append(("sep", regex[i:j]))
            i = j
        elif c in "*+?{":
            # A quantifier on the atom before it: that atom is no longer of fixed width.
            if out and out[-1][0] == "atom":
                out[-1] = ("sep", out[-1][1])
            j = regex.index("}", i) + 1 if c == "{" and "}" in regex[i:] else i + 1
            out.append(("sep", regex[i:j]))
            i = j
        elif c in _SPECIAL:
            out.append(("sep", c))
            i += 1
        else:
            out.append(("atom", c))
            i += 1
    return out


def bounded(regex: str) -> str:
    """``regex`` with every star of a segment but its last, and every ``**`` between segments
    but the last, made atomic and lazy (see above), and its character classes never matching
    ``/``."""
    tokens = _tokens(regex)
    if tokens is None:
        return regex
    pieces: list[tuple[str, str]] = []  # the tokens, each segment's stars bounded
    run: list[tuple[str, str]] = []

    def flush() -> None:
        stars = [k for k, (kind, _) in enumerate(run) if kind == "star"]
        if len(stars) < 2:
            pieces.extend(run)
        else:
            pieces.extend(run[:stars[0]])
            for a, b in zip(stars, stars[1:]):
                pieces.append(("atomic", "(?>[^/]*?" + "".join(text for _, text in run[a + 1:b]) + ")"))
            pieces.extend(run[stars[-1]:])
        run.clear()

    for token in tokens:
        if token[0] in ("sep", "dstar"):
            flush()
            pieces.append(token)
        else:
            run.append(token)
    flush()
    # `a/**/b/**/c`: each `**` but the last takes the fewest whole segments before the fixed
    # number of segments that follows it (ending where a segment does), once.
    dstars = [k for k, (kind, _) in enumerate(pieces) if kind == "dstar"]
    out = [text for _, text in pieces]
    for a, b in zip(dstars, dstars[1:]):
        between = pieces[a + 1:b]
        if all(kind != "sep" or text == "/" for kind, text in between):
            out[a] = "(?>(?:/.+?)??"  # the empty skip first: the leftmost place
            out[b - 1] = out[b - 1] + "(?=/|$))"
    return "".join(out)


def bound(spec: pathspec.PathSpec) -> pathspec.PathSpec:
    """``spec`` with each pattern's expression :func:`bounded` (the same object, changed)."""
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if regex is None:
            continue
        rewritten = bounded(regex.pattern)
        if rewritten != regex.pattern:
            try:
                pattern.regex = re.compile(rewritten, regex.flags)
            except re.error:  # never expected: the pattern stays as pathspec wrote it
                pass
    return spec
