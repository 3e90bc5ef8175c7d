"""One block of code (a pasted file, a tool result) -> the units it can be cut into.

A *unit* is what block compression keeps or elides as a whole:

* ``def``: an outermost function or method (nested functions stay inside
  it), or a definition without members (a constant, a type alias, a Go
  struct), with its decorators and the comment lines right above it;
* ``frame``: a class (struct, interface, impl, ...) minus its members:
  header, docstring, attributes, closing brace.  Members are units of
  their own whose ``parent`` is the frame;
* ``stmt``: a module-level statement outside every definition (imports,
  assignments, ``if __name__ == ...``), split at column-0 lines with the
  brackets balanced, so a multi-line import is one statement.

Definitions come from the indexer's own parse of the block text (the same
tree-sitter queries the index uses), so every supported language works the
same way.  Lines are 0-based indices into the block's lines.
"""

from __future__ import annotations

import re
import threading
from itertools import combinations
from collections import OrderedDict
from dataclasses import dataclass, field

from memstrata.indexer.languages import language_of
from memstrata.indexer.parse import parse_definitions

CALLABLE = frozenset({"function", "method"})
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
# Unit tests that live in the source file they test, marked by an attribute rather than a name:
# Rust's ``#[cfg(test)] mod tests { ... }`` and the ``#[test]`` / ``#[tokio::test]`` / ``#[rstest]``
# functions in it.  A read of such a file carries its tests at the end; they are test code (rule 6,
# tests stay out), however their names read.
_TEST_ATTRIBUTE = re.compile(r"^\s*#\[(?:cfg\((?:all\()?test\b|(?:[\w:]+::)?(?:test|rstest|test_case|bench)\b)")
_ATTRIBUTE = re.compile(r"^\s*#!?\[")
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|\*/|--|;;)")
_IMPORT = re.compile(r"^\s*(from\s+\S+\s+import\b|import\b|use\s|#include\b|require\b|using\s|package\s)")
_BINDS = re.compile(r"^\s*+(?:export\s+)?(?:const|let|var|type|static|final)?\s*([A-Za-z_$][\w$]*)\s*(?::[^=]*)?=")
_OPEN, _CLOSE = "([{", ")]}"
_HASH_COMMENTS = frozenset({"python", "ruby"})
# String literals ('...', "...", `...`; a backslash escapes any character but a newline), blanked
# before a text's identifiers are read.  What ``blank_strings`` replaces is exactly what
# ``re.sub(r"'(?:\\.|[^'\\])*'|...", repl, text)`` replaces (same for " and `), in time linear in
# the text: that pattern retries every later quote of a kind after one that never closes, and each
# retry scans to the end again (an unterminated quote followed by many escaped ones cost the square
# of a file's length at query time).
#
# Why a failed start rules out the later ones: a scan from a quote q reads tokens, each a backslash
# with the character after it (not a newline) or one character that is neither q nor a backslash;
# it fails where no token fits and the next character is not q: at the end of the text, or at a
# backslash before a newline (``.`` does not match one) or last in the text.  Every q inside the
# scanned stretch was read as the second half of an escape token (a bare q would have closed it),
# so a scan from it starts on a token boundary of the failed scan, reads the same tokens and fails
# at the same place.  Quotes of another kind inside the stretch are still tried, and q is tried
# again from that stopping place.
_KINDS = "'\"`"
# Plain greedy repeats, not possessive ones: every character of a scan belongs to exactly one token,
# so a failed attempt gives its characters back one step each (linear); and the first releases of
# Python 3.11 (3.11.2 is one) matched nested possessive repeats wrongly.
_BODY = {q: r"%s[^%s\\]*(?:\\.[^%s\\]*)*" % (q, q, q) for q in _KINDS}  # the scan from one q
_SCAN = {q: re.compile(body + "(%s)?" % q).match for q, body in _BODY.items()}  # group 1: it closed
# For each set of kinds still tried: a run of text that is plain characters (other kinds included)
# and whole strings of those kinds, and the substitution of those strings.
_RUNS = {"".join(live): (re.compile(r"[^%s]*(?:(?:%s)[^%s]*)*" % (
    "".join(live), "|".join(_BODY[q] + q for q in live), "".join(live))).match,
    re.compile("|".join(_BODY[q] + q for q in live)).sub)
    for k in (1, 2, 3) for live in combinations(_KINDS, k)}


def blank_strings(text: str, repl: str) -> str:
    """``text`` with every string literal replaced by ``repl`` (see _KINDS above)."""
    if "'" not in text and '"' not in text and "`" not in text:
        return text
    run, sub = _RUNS[_KINDS]
    end = run(text).end()
    if end == len(text):  # no quote fails to close: one substitution
        return sub(repl, text)
    out = [sub(repl, text[:end])]
    failed_until = dict.fromkeys(_KINDS, 0)  # a start of that kind before this index fails
    pos, n = end, len(text)
    while pos < n:
        live = "".join(q for q in _KINDS if failed_until[q] <= pos)
        bound = min([failed_until[q] for q in _KINDS if failed_until[q] > pos], default=n)
        if not live:
            out.append(text[pos:bound])
            pos = bound
            continue
        run, sub = _RUNS[live]
        end = run(text, pos, bound).end()
        if end > pos:
            out.append(sub(repl, text[pos:end]))
            pos = end
            if pos == bound:
                continue
        # text[pos] is a quote still tried whose string does not close before ``bound``.
        q = text[pos]
        scan = _SCAN[q](text, pos)
        if scan.group(1) is not None:
            out.append(repl)
            pos = scan.end()
        else:
            failed_until[q] = scan.end()
            out.append(q)
            pos += 1
    return "".join(out)


@dataclass
class Unit:
    kind: str                               # def | frame | stmt
    ranges: list[tuple[int, int]]           # inclusive line ranges
    name: str = ""
    qualname: str = ""
    parent: int | None = None               # index of the enclosing frame
    is_import: bool = False
    binds: frozenset[str] = frozenset()     # names a statement defines
    idents: frozenset[str] = frozenset()    # identifiers the unit uses
    chars: int = 0
    text: str = ""
    test: bool = False                      # marked test-only by an attribute, or inside such a module

    @property
    def start(self) -> int:
        return self.ranges[0][0]

    def lines(self):
        for a, b in self.ranges:
            yield from range(a, b + 1)


@dataclass
class Outline:
    units: list[Unit]
    owner: list[int]                        # line -> unit index, -1 for lines of no unit (blank)
    top_level: int                          # definitions at the top level of the block
    members: dict[int, list[int]] = field(default_factory=dict)  # frame -> member units


def build_outline(lines: list[str], language: str, path: str = "block") -> Outline:
    source = "\n".join(lines).encode("utf-8", "replace")
    n = len(lines)
    language = language_of(path, language, source)
    symbols = sorted((s for s in parse_definitions(path, language, source) if 1 <= s.start_line <= n),
                     key=lambda s: (s.start_line, -s.end_line))
    owner = [-1] * n
    units: list[Unit] = []
    members: dict[int, list[int]] = {}
    # A symbol with member symbols is a frame; the outermost callable swallows
    # everything nested in it.
    spans = [(s.start_line - 1, min(s.end_line, n) - 1, s) for s in symbols]
    has_members = set()
    for i, (a, b, s) in enumerate(spans):
        for a2, b2, s2 in spans[i + 1:]:
            if a2 > b:
                break
            if b2 <= b and (a2, b2) != (a, b):
                has_members.add(i)
                break
    stack: list[tuple[int, int, int | None, bool]] = []  # (end line, unit index, frame?, callable?)
    top_level = 0
    for i, (a, b, s) in enumerate(spans):
        while stack and stack[-1][0] < a:
            stack.pop()
        if stack and stack[-1][3]:
            continue  # inside a callable: part of it
        if stack and b > stack[-1][0]:
            continue  # overlaps its container's end: a parse artefact, leave it to the container
        parent = stack[-1][1] if stack else None
        if parent is None:
            top_level += 1
        a = _with_leading_comments(lines, a, owner, parent)
        is_frame = i in has_members and s.kind not in CALLABLE
        unit = Unit("frame" if is_frame else "def", [(a, b)], s.name, s.qualname, parent)
        idx = len(units)
        units.append(unit)
        if parent is not None:
            members.setdefault(parent, []).append(idx)
        for ln in range(a, b + 1):
            owner[ln] = idx
        stack.append((b, idx, idx if is_frame else None, not is_frame))
    # Frames own only the lines their members do not.
    for f, kids in members.items():
        unit = units[f]
        mine = [ln for ln in range(unit.ranges[0][0], unit.ranges[0][1] + 1) if owner[ln] == f]
        unit.ranges = _ranges(mine)
    _module_statements(lines, owner, units, language in _HASH_COMMENTS)
    for unit in units:
        text = "\n".join(lines[ln] for ln in unit.lines())
        unit.text = text
        unit.chars = len(text)
        unit.idents = frozenset(_IDENT.findall(blank_strings(text, " ")))
    for unit in units:  # a parent comes before its members
        unit.test = unit.kind != "stmt" and (
            (unit.parent is not None and units[unit.parent].test) or _test_marked(lines, unit.start))
    for ln in range(n):
        if not lines[ln].strip() and owner[ln] >= 0 and units[owner[ln]].kind == "frame":
            owner[ln] = -1  # blank lines between members belong to nobody
    return Outline(units, owner, top_level, members)


def _test_marked(lines: list[str], start: int) -> bool:
    """Whether the attributes heading the definition at line ``start`` (after its doc comments)
    mark it test-only."""
    for line in lines[start:start + 12]:
        if _TEST_ATTRIBUTE.match(line):
            return True
        if not (_ATTRIBUTE.match(line) or _COMMENT.match(line) or not line.strip()):
            return False
    return False


def _with_leading_comments(lines: list[str], start: int, owner: list[int], frame: int | None = None) -> int:
    """The first line of the comment right above line ``start`` (a doc comment, a note).

    A member's comment is inside its class's frame, which owns those lines until then: it goes with
    the member (also across one blank line, as some styles set a doc block apart), or every kept
    member would bring the doc comments of all its siblings with the frame."""
    mine = (-1,) if frame is None else (-1, frame)

    def comment(ln: int) -> bool:
        return ln >= 0 and owner[ln] in mine and bool(lines[ln].strip()) and bool(_COMMENT.match(lines[ln]))

    if frame is not None and start > 1 and not lines[start - 1].strip() and owner[start - 1] in mine \
            and comment(start - 2):
        start -= 1
    while comment(start - 1):
        start -= 1
    return start


def _ranges(lines: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for ln in lines:
        if out and out[-1][1] == ln - 1:
            out[-1] = (out[-1][0], ln)
        else:
            out.append((ln, ln))
    return out or [(0, -1)]


def _module_statements(lines: list[str], owner: list[int], units: list[Unit], hash_comments: bool) -> None:
    """Group the lines no definition owns into statements (bracket-balanced, column 0 starts one)."""
    depth = 0
    triple: str | None = None
    current: list[int] = []

    def flush():
        body = [ln for ln in current if lines[ln].strip()]
        if body:
            first = lines[body[0]]
            is_import = bool(_IMPORT.match(first))
            unit = Unit("stmt", _ranges(range(body[0], body[-1] + 1)), is_import=is_import)
            idx = len(units)
            for ln in range(body[0], body[-1] + 1):
                if owner[ln] < 0:
                    owner[ln] = idx
            text = "\n".join(lines[ln] for ln in range(body[0], body[-1] + 1))
            if is_import:
                unit.binds = frozenset(_IDENT.findall(blank_strings(text, " "))) - _IMPORT_WORDS
            else:
                m = _BINDS.match(first)
                unit.binds = frozenset({m.group(1)}) if m else frozenset()
            units.append(unit)
        current.clear()

    for ln, line in enumerate(lines):
        if owner[ln] >= 0:
            if current:
                flush()
            depth, triple = 0, None
            continue
        stripped = line.strip()
        starts = (stripped and not line[:1].isspace() and depth <= 0 and triple is None
                  and stripped[0] not in _CLOSE)
        if starts and current:
            flush()
        if stripped or current:
            current.append(ln)
        depth, triple = _scan_brackets(line, depth, triple, hash_comments)
    if current:
        flush()


def _scan_brackets(line: str, depth: int, triple: str | None, hash_comments: bool) -> tuple[int, str | None]:
    text = line
    if triple is not None:
        end = text.find(triple)
        if end < 0:
            return depth, triple
        text = text[end + 3:]
        triple = None
    for q in ('"""', "'''"):
        if text.count(q) % 2 == 1:
            text = text[:text.find(q)]
            triple = q
            break
    text = blank_strings(text, "")
    text = text.split("#", 1)[0] if hash_comments else text.split("//", 1)[0]
    depth += sum(text.count(c) for c in _OPEN) - sum(text.count(c) for c in _CLOSE)
    return depth, triple


_IMPORT_WORDS = frozenset({"from", "import", "as", "use", "using", "require", "include", "package", "crate",
                           "self", "super", "static", "type", "export", "default", "pub"})


# -- a small cache: agents resend the same tool results, and one block is often
# asked about by several conversations at once.

_cache: OrderedDict[tuple, Outline] = OrderedDict()
_cache_lock = threading.Lock()
CACHE_ENTRIES = 256


def outline_of(lines: list[str], language: str, path: str = "block") -> Outline:
    key = (language, hash("\n".join(lines)), len(lines))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    outline = build_outline(lines, language, path)
    with _cache_lock:
        _cache[key] = outline
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)
    return outline
