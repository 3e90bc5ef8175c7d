"""Compression inside one block of code: keep what the question points at, elide the rest.

A *block* is one pasted file (or excerpt) or one tool result holding code.
:func:`plan_block` decides what to keep, :func:`cut_block` renders it:
verbatim and whole, every unit (see :mod:`compressor.outline`) the question
names, and the units that rank highest for it inside this block (see
:mod:`compressor.block_rank`) while they fit ``ranked_share`` of the block
(the ``min_ranked`` best always); then what those need to read correctly:
the enclosing class frames, the import statements whose names they use,
and small module-level definitions they use.  Each run of other lines
becomes one marker line naming the path and the line range, so the reader
can ask for exactly those lines.  Kept lines are never altered (a ``cat -n``
prefix stays on its line), and nothing from other files is ever put in.

A block stays whole (``None``) when it is small, a single definition, when
the question points at nothing in it (unless the caller knows it points into
another block sent along), or when cutting would save too little.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .block_rank import Asked, looks_like_test, named_units, prepare, propagate, unit_chances, unit_scores
from .outline import Outline, outline_of
from .tokens import count_tokens

MARKER = "[memstrata:"
MAX_SHOWN_IMPORT_GAP = 12  # a few unused imports cost less than the marker that would replace them
_HASH = frozenset({"python", "ruby"})


@dataclass(frozen=True)
class BlockSettings:
    min_tokens: int = 1500        # rule 2: smaller blocks stay whole
    ranked_share: float = 0.5     # ranked (not named) units may fill this share of the block ...
    ranked_cap: int = 6000        # ... and at most this many tokens
    rel_score: float = 0.1        # ranked units need this share of the best score
    min_score: float = 1.0        # below this the question points at nothing here
    min_saving: float = 0.2       # cut only when it saves this share of the block
    min_gap_lines: int = 3        # shorter gaps are shown rather than marked ...
    min_gap_chars: int = 160      # ... and so are gaps shorter than this
    dependency_chars: int = 800   # a used module-level definition larger than this stays elided
    whole_class_share: float = 0.25  # a named class larger than this share of the block ...
    whole_class_tokens: int = 4000  # ... or than this is not kept whole
    propagation: float = 0.5      # a unit borrows this share of its best neighbour's score
    min_ranked: int = 5           # the best ranked units kept whatever their size
    fill: bool = False            # spend the rest of the budget on the units next to the kept ones
    chance_first: float = 0.03    # units the project ranking gives this chance go before the ranked ones
    around_share: float = 0.5     # with fill: this share of the budget first goes around the named units


@dataclass
class Block:
    """Code to compress: display lines (as sent), code lines (prefix removed), their file line numbers."""

    display: list[str]
    code: list[str]
    numbers: list[int]
    language: str
    path: str
    is_test: bool = False


@dataclass
class BlockCut:
    text: str                                   # the block's new text (display lines joined with "\n")
    tokens_before: int
    tokens_after: int
    kept: list[str] = field(default_factory=list)       # qualnames of the definitions kept
    elided: list[tuple[int, int]] = field(default_factory=list)  # file line ranges behind markers


@dataclass
class BlockPlan:
    """What the question points at in one block, before deciding how much to cut."""

    block: Block
    outline: Outline
    keep: set[int]          # units to show
    evidence: bool          # the question names or ranks something here
    tokens_before: int


def plan_block(block: Block, question: str | Asked, settings: BlockSettings = BlockSettings(),
               tokens_before: int | None = None) -> BlockPlan | None:
    """None when the block is never cut: small (rule 2), too short, or a single definition."""
    if tokens_before is None:
        tokens_before = count_tokens("\n".join(block.display))
    if tokens_before < settings.min_tokens or len(block.code) < 2 * settings.min_gap_lines:
        return None
    outline = outline_of(block.code, block.language, block.path)
    if outline.top_level <= 1:
        return None
    asked = prepare(question) if isinstance(question, str) else question
    keep, evidence = _select(outline, asked, block, settings, tokens_before)
    return BlockPlan(block, outline, keep, evidence, tokens_before)


def cut_block(plan: BlockPlan, settings: BlockSettings = BlockSettings(),
              elide_unpointed: bool = False) -> BlockCut | None:
    """The block's new text, or None to leave it whole.

    A block the question points at nothing in stays whole, unless
    ``elide_unpointed``: the caller knows the question points at code in
    another block of the same request, so this one is not what it needs.
    """
    if not plan.evidence and not elide_unpointed:
        return None
    block, outline = plan.block, plan.outline
    shown = _shown_lines(outline, block.code, plan.keep, settings.min_gap_lines, settings.min_gap_chars)
    text, elided = _render(block, outline, shown)
    tokens_after = count_tokens(text)
    if tokens_after > (1 - settings.min_saving) * plan.tokens_before:
        return None
    kept = [outline.units[i].qualname for i in sorted(plan.keep) if outline.units[i].kind != "stmt"]
    return BlockCut(text, plan.tokens_before, tokens_after, kept, elided)


def compress_block(block: Block, question: str | Asked, settings: BlockSettings = BlockSettings(),
                   tokens_before: int | None = None, elide_unpointed: bool = False) -> BlockCut | None:
    plan = plan_block(block, question, settings, tokens_before)
    return cut_block(plan, settings, elide_unpointed) if plan is not None else None


# -- selection ------------------------------------------------------------------


def _select(outline: Outline, asked: Asked, block: Block, s: BlockSettings, tokens: int) -> tuple[set[int], bool]:
    units = outline.units
    tests_ok = block.is_test or asked.about_tests
    named = named_units(outline, asked)
    scores = propagate(outline, unit_scores(outline, asked, block.path), set(named), s.propagation)
    if not tests_ok:
        for i, u in enumerate(units):
            if _is_test(u) and i not in named:
                scores[i] = 0.0
    keep: set[int] = set()
    total_chars = sum(len(line) + 1 for line in block.code) or 1
    chars_per_token = total_chars / max(tokens, 1)
    whole_class = min(s.whole_class_share * total_chars, s.whole_class_tokens * chars_per_token)
    for i, as_code in named.items():
        keep.add(i)
        if units[i].kind == "frame" and as_code:
            members = _members(outline, i)
            # A class the question names as code is kept whole unless it is a large part of
            # the block; then its frame stays and its members compete on rank.
            if units[i].chars + sum(units[m].chars for m in members) <= whole_class:
                keep.update(members)
    # The project ranking's likeliest definitions first (best chance first), then the rest by
    # their words' rank in this block.
    chances = unit_chances(outline, asked)
    likely = sorted((i for i, c in enumerate(chances) if c >= s.chance_first and i not in keep
                     and (tests_ok or not _is_test(units[i]))), key=lambda i: (-chances[i], i))
    first = set(likely)
    candidates = sorted((i for i, u in enumerate(units) if i not in keep and i not in first and scores[i] > 0),
                        key=lambda i: (-scores[i], i))
    best = scores[candidates[0]] if candidates else 0.0
    evidence = bool(keep) or bool(likely) or best >= s.min_score
    if not evidence:
        return set(), False
    budget = min(s.ranked_share * total_chars, s.ranked_cap * chars_per_token)
    used = 0
    if s.fill and keep:
        # What the question names is read with its surroundings (callers and helpers sit nearby in
        # most files): half the budget goes to the region around it, before the ranked units.
        used = _fill(outline, keep, used, budget * s.around_share, tests_ok)
    for rank, i in enumerate(likely + candidates):
        if i not in first and scores[i] < s.rel_score * best:
            break
        cost = units[i].chars + sum(units[f].chars for f in _frames(outline, i) if f not in keep)
        if used + cost > budget and rank >= s.min_ranked:
            continue
        keep.add(i)
        keep.update(_frames(outline, i))  # a class frame is paid for once, by its first kept member
        used += cost
    if s.fill:
        used = _fill(outline, keep, used, budget, tests_ok)
    _add_dependencies(outline, keep, s)
    return keep, True


def _fill(outline: Outline, keep: set[int], used: float, budget: float, tests_ok: bool = True) -> float:
    """Spend what is left of the budget on the units nearest (in the file) to the ones kept.  Test
    code is no neighbour worth showing unless the question is about tests (rule 6): a file that
    holds its own unit tests (Rust's ``mod tests``) has them next to the code they test."""
    units = outline.units
    order = [i for i, u in enumerate(units) if u.kind != "stmt"]  # definitions, in file order
    position = {i: k for k, i in enumerate(order)}
    starts = [units[i].start for i in order]
    # A kept statement (an import or an assignment the question's words match) is a place in the
    # file too, between the definitions around it: a read whose only match is a few import lines
    # would otherwise be cut to those lines and a marker for every definition.
    kept = [position[i] if i in position else bisect.bisect_left(starts, units[i].start) - 0.5 for i in keep]
    if not kept:
        return used
    rest = sorted((i for i in order if i not in keep and (tests_ok or not _is_test(units[i]))),
                  key=lambda i: (min(abs(position[i] - k) for k in kept), i))
    for i in rest:
        cost = units[i].chars + sum(units[f].chars for f in _frames(outline, i) if f not in keep)
        if used + cost <= budget:
            keep.add(i)
            keep.update(_frames(outline, i))
            used += cost
    return used


def _is_test(unit) -> bool:
    return unit.test or looks_like_test(unit.name)


def _members(outline: Outline, frame: int) -> list[int]:
    out = []
    for m in outline.members.get(frame, ()):
        out.append(m)
        out.extend(_members(outline, m))
    return out


def _frames(outline: Outline, i: int) -> list[int]:
    out = []
    parent = outline.units[i].parent
    while parent is not None:
        out.append(parent)
        parent = outline.units[parent].parent
    return out


def _add_dependencies(outline: Outline, keep: set[int], s: BlockSettings) -> None:
    units = outline.units
    for i in list(keep):
        keep.update(_frames(outline, i))
    used: set[str] = set()
    for i in keep:
        used |= units[i].idents
    for i, u in enumerate(units):
        if u.kind != "stmt" or i in keep or not (u.binds & used):
            continue
        if u.is_import or u.chars <= s.dependency_chars:
            keep.add(i)


# -- rendering --------------------------------------------------------------------


def _shown_lines(outline: Outline, code: list[str], keep: set[int], min_gap: int, min_gap_chars: int) -> list[bool]:
    n = len(code)
    shown = [False] * n
    for i in keep:
        for ln in outline.units[i].lines():
            shown[ln] = True
    # A blank line is shown only between two shown lines, so elided neighbours
    # separated by blank lines make one gap.
    prev = False
    for ln in range(n):
        if code[ln].strip():
            prev = shown[ln]
        elif shown[ln] or prev:
            shown[ln] = prev and _next_shown(code, shown, ln)
    # Short gaps are shown rather than marked.
    i = 0
    while i < n:
        if shown[i]:
            i += 1
            continue
        j = i
        while j < n and not shown[j]:
            j += 1
        body = sum(1 for k in range(i, j) if code[k].strip())
        chars = sum(len(code[k]) for k in range(i, j))
        imports_only = all(not code[k].strip() or outline.owner[k] >= 0 and outline.units[outline.owner[k]].is_import
                           for k in range(i, j))
        if body < min_gap or chars < min_gap_chars or imports_only and body <= MAX_SHOWN_IMPORT_GAP:
            for k in range(i, j):
                shown[k] = True
        i = j
    return shown


def _render(block: Block, outline: Outline, shown: list[bool]) -> tuple[str, list[tuple[int, int]]]:
    out: list[str] = []
    elided: list[tuple[int, int]] = []
    comment = "#" if block.language in _HASH else "//"
    n = len(block.code)
    i = 0
    while i < n:
        if shown[i]:
            out.append(block.display[i])
            i += 1
            continue
        j = i
        while j < n and not shown[j]:
            j += 1
        a, b = block.numbers[i], block.numbers[j - 1]
        elided.append((a, b))
        first = next((block.code[k] for k in range(i, j) if block.code[k].strip()), "")
        indent = first[: len(first) - len(first.lstrip())]
        names = _names_in(outline, i, j)
        shown_names = 8 if i == 0 and j == n else 4  # a whole block behind one marker lists more of it
        what = (f": {', '.join(names[:shown_names])}"
                f"{f' and {len(names) - shown_names} more' if len(names) > shown_names else ''}") if names else ""
        out.append(f"{indent}{comment} {MARKER} lines {a}-{b} of {block.path} elided{what}]")
        i = j
    return "\n".join(out), elided


def _names_in(outline: Outline, a: int, b: int) -> list[str]:
    seen: list[str] = []
    for ln in range(a, b):
        u = outline.owner[ln]
        if u >= 0:
            unit = outline.units[u]
            if unit.kind != "stmt" and unit.qualname and unit.qualname not in seen and unit.start >= a:
                seen.append(unit.qualname)
    return seen


def _next_shown(code: list[str], shown: list[bool], ln: int) -> bool:
    for k in range(ln + 1, len(code)):
        if code[k].strip():
            return shown[k]
    return False


def points_at(block: Block, question: str | Asked, settings: BlockSettings = BlockSettings()) -> bool:
    """Whether the question names or ranks anything in ``block`` (whatever its size)."""
    asked = prepare(question) if isinstance(question, str) else question
    outline = outline_of(block.code, block.language, block.path)
    chars = sum(len(line) + 1 for line in block.code)
    return _select(outline, asked, block, settings, max(chars // 4, 1))[1]
