"""Ranked symbols -> the slice text, fitted exactly to the token budget.

Each file gets a header naming its path.  Top-ranked symbols appear in full,
lower-ranked ones as their signature plus a one-line comment carrying the
first docstring line and how much was elided; gaps between shown spans are
marked with the line numbers left out.  Code lines are never altered, so an
agent can quote and edit them.  Fitting degrades full -> signature -> drop,
lowest-ranked first, and always re-counts the exact rendered text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memstrata.indexer.graph import split_symbol_id
from memstrata.indexer.graph_view import GraphView

from .tokens import count_tokens, count_tokens_memo

FULL = "full"
SIG = "sig"
CONTAINERS = frozenset({"class", "struct", "interface", "enum", "module"})
MAX_FULL_CONTAINER_LINES = 60
_WS = re.compile(r"\s+")
_HASH_COMMENT = frozenset({"python", "ruby"})


@dataclass
class Unit:
    node: str
    path: str
    score: float
    mode: str
    start: int  # first line shown (1-based)
    end: int  # last line of the symbol
    kind: str
    parent: str | None
    cost_full: int = 0
    cost_sig: int = 0
    # A signature carries its docstring's first line only when the symbol is
    # a plausible target: for the many signatures shown for orientation the
    # hint would cost as much as the signature itself.
    hint: bool = True
    taken: int = 0  # place in the selection's order (best value per token first); 0 = not from a selection


@dataclass
class FileDoc:
    path: str
    language: str
    lines: list[str]
    imports: list[tuple[int, str | None]] = field(default_factory=list)  # (line, target path)
    whole_tokens: int | None = None  # tokens of the whole file with its header, once counted
    line_ends: list[int] | None = None  # characters through each line (see text_cache.CachedText.line_ends)


def comment_prefix(language: str) -> str:
    return "#" if language in _HASH_COMMENT else "//"


# How much of a signature (in non-blank characters) a definition shown as its signature shows:
# the rest of a long parameter list costs more than it tells an agent deciding what to read, and
# the elision marker says it is there (see render_unit).
SIGNATURE_SHOWN = 120


def signature_end(lines: list[str], start: int, end: int, signature: str,
                  limit: int | None = SIGNATURE_SHOWN) -> int:
    """Last line (1-based) of the declaration that ``signature`` summarises, or of its first
    ``limit`` non-blank characters."""
    return _declaration_span(lines, start, end, signature, limit)[1]


def _declaration_span(lines: list[str], start: int, end: int, signature: str,
                      limit: int | None) -> tuple[int, int]:
    """(first, last) line (1-based) of the declaration itself: past the decorators above it, to
    the end of ``signature`` or of its first ``limit`` non-blank characters."""
    target = _WS.sub("", signature.rstrip(". "))[:limit]
    # A span past the text's end (rows and text read at different moments of
    # a concurrent rewrite) must not index out of it.
    end = min(end, len(lines))
    if not target or start > end:
        return start, min(start, max(end, 1))
    i = _declaration_line(lines, start, end, target)
    acc = ""
    j = i
    while j <= end:
        acc += _WS.sub("", lines[j - 1])
        if len(acc) >= len(target) or acc.endswith(("{", ":")) and j > i:
            return i, j
        j += 1
    return i, i


def _declaration_line(lines: list[str], start: int, end: int, target: str) -> int:
    """The line (1-based) where the declaration itself begins, past the decorators (attributes,
    annotations) above it; ``target`` is the signature without whitespace."""
    head = target[:12]
    i = start
    # The line may be shorter than the head: `def attrib(` then one argument a line.
    while i < end and not _begins_signature(_WS.sub("", lines[i - 1]), head):
        i += 1
    return i


# A definition shown by its signature keeps this many lines of a longer run of decorators
# (attributes, annotations) above it, then a marker: a command-line entry point with forty
# `@option(...)` decorators would otherwise spend hundreds of lines on its "signature".
DECORATOR_LINES_SHOWN = 3


def signature_lines(lines: list[str], start: int, end: int, signature: str, comment: str) -> tuple[list[str], int]:
    """The lines that show a definition by its signature (a long run of decorators cut short,
    with an exact marker), and the last line of the declaration they show."""
    first, sig_end = _declaration_span(lines, start, end, signature, SIGNATURE_SHOWN)
    # Elide only what costs more than the marker: at least two lines.
    if first - start <= DECORATOR_LINES_SHOWN + 1 or first > sig_end:
        return lines[start - 1 : sig_end], sig_end
    kept = lines[start - 1 : start - 1 + DECORATOR_LINES_SHOWN]
    hidden = first - start - DECORATOR_LINES_SHOWN
    indent = _indent_of(lines[start - 1])
    marker = f"{indent}{comment} ... {hidden} lines of decorators elided"
    return [*kept, marker, *lines[first - 1 : sig_end]], sig_end


def _begins_signature(line: str, head: str) -> bool:
    return head in line or (0 < len(line) < len(head) and head.startswith(line))


def render_unit(doc: FileDoc, unit: Unit, graph: GraphView, with_doc: bool = True) -> str:
    lines = doc.lines
    # A span that is no definition (a barrel's re-export statement) has no signature to stand
    # for it: it is shown as it is, whatever fitting asks of it.
    if unit.mode == FULL or unit.node not in graph:
        return "\n".join(lines[unit.start - 1 : unit.end])
    data = graph.node(unit.node)
    shown, sig_end = signature_lines(lines, unit.start, unit.end, data["signature"], comment_prefix(doc.language))
    hidden = unit.end - sig_end
    if hidden <= 0:
        return "\n".join(shown)
    indent = _body_indent(lines, sig_end, unit.end, shown[-1] if shown else "")
    doc_line = _first_doc_line(data.get("doc")) if with_doc and unit.hint else ""
    what = f"{hidden} line{'s' if hidden != 1 else ''} elided"
    if signature_end(lines, unit.start, unit.end, data["signature"], limit=None) > sig_end:
        what += ", the signature's end among them"  # else a cut parameter list reads as the whole
    note = f"{indent}{comment_prefix(doc.language)} ... {what}" + (f": {doc_line}" if doc_line else "")
    return "\n".join([*shown, note])


def _body_indent(lines: list[str], sig_end: int, end: int, sig_line: str) -> str:
    for k in range(sig_end, min(end, sig_end + 5, len(lines))):
        text = lines[k]
        if text.strip():
            return text[: len(text) - len(text.lstrip())]
    base = sig_line[: len(sig_line) - len(sig_line.lstrip())]
    return base + "    "


def _first_doc_line(doc: str | None) -> str:
    if not doc:
        return ""
    for line in doc.strip().splitlines():
        line = line.strip()
        if line:
            return line[:140]
    return ""


def render(docs: dict[str, FileDoc], units: list[Unit], graph: GraphView, file_order: list[str],
           compact: bool = False, count=count_tokens) -> str:
    """The slice text.  ``compact`` drops the framing (gap markers, enclosing
    class headers, imports, docstring hints) for budgets too small for it."""
    chunks = render_sections(docs, units, graph, file_order, compact, count)
    return join_sections(chunks)


def join_sections(chunks: list[str]) -> str:
    return "\n\n".join(chunks) + ("\n" if chunks else "")


def joined_tokens(chunks: list[str], count=count_tokens) -> int:
    """Exactly ``count(join_sections(chunks))``, from the counts of its parts.

    cl100k splits text into pieces before it merges bytes into tokens, and
    no piece holds a newline followed by a character that is not whitespace
    (newlines only ever end a piece).  A section starts with its header
    comment, so the text splits where each section starts and a joined slice
    costs the sum of its sections, each counted with the newlines after it.
    Fitting a slice compares many joins of the same sections: counted this
    way, each section is encoded once instead of every join again.
    """
    if not chunks:
        return 0
    if any(not c or c[0].isspace() for c in chunks[1:]):
        return count(join_sections(chunks))  # no split point: count the text whole
    last = len(chunks) - 1
    return sum(count(c + ("\n" if i == last else "\n\n")) for i, c in enumerate(chunks))


def render_sections(docs: dict[str, FileDoc], units: list[Unit], graph: GraphView, file_order: list[str],
                    compact: bool = False, count=count_tokens, memo: dict | None = None) -> list[str]:
    """One text per file of ``file_order`` that has units; ``count`` counts tokens
    and ``memo`` keeps sections whose inputs did not change (repeated fitting
    attempts render mostly the same files)."""
    by_file: dict[str, list[Unit]] = {}
    for u in units:
        by_file.setdefault(u.path, []).append(u)
    shown_files = set(file_order)
    chunks = []
    for path in file_order:
        if not by_file.get(path):
            continue
        doc = docs[path]
        key = None
        if memo is not None:
            targets = frozenset(t for _, t in doc.imports if t in shown_files)
            key = (path, compact, targets, tuple((u.node, u.mode) for u in by_file[path]))
            hit = memo.get(key)
            if hit is not None:
                chunks.append(hit)
                continue
        section = _render_file(doc, by_file[path], graph, shown_files, compact)
        # When the slice of a file is most of it, the markers can cost more
        # than the lines they stand for: then the whole file is the better deal.
        if section.count("\n") + 1 >= len(doc.lines) // 2 and whole_file_tokens(doc) <= count(section):
            section = f"{comment_prefix(doc.language)} {path}\n" + "\n".join(doc.lines).rstrip("\n")
        if key is not None:
            memo[key] = section
        chunks.append(section)
    return chunks


def whole_file_tokens(doc: FileDoc) -> int:
    if doc.whole_tokens is None:
        text = f"{comment_prefix(doc.language)} {doc.path}\n" + "\n".join(doc.lines).rstrip("\n")
        doc.whole_tokens = count_tokens(text)
    return doc.whole_tokens


def _render_file(doc: FileDoc, units: list[Unit], graph: GraphView, shown_files: set[str],
                 compact: bool = False) -> str:
    """One file's section: header, then shown spans in line order with gap markers."""
    c = comment_prefix(doc.language)
    lines = doc.lines
    # (first line, last line, text, kind, frame end) pieces, merged in line order below; kind:
    # "import", "header" (a class or function line framing what follows) or "unit"; a header of a
    # definition that encloses what follows has the definition's last line as its frame end.
    pieces: list[tuple[int, int, str, str, int]] = []
    # Imports that explain a dependency on another file of the slice.
    for ln in () if compact else _import_lines(doc, shown_files):
        pieces.append((ln, ln, lines[ln - 1], "import", 0))
    nodes = {u.node for u in units}
    headers: set[str] = set()
    block_headers: set[int] = set()
    for u in units:
        # A member shown without its enclosing class gets the class header.  Only a definition
        # that encloses the member's text frames it: a Go or Rust method is written outside its
        # type, and the type's header above it would read as if it held the method.
        p = None if compact else u.parent
        outermost = u.start
        while p and p not in nodes and p not in headers and p in graph:
            headers.add(p)
            pd = graph.node(p)
            if pd["start_line"] <= u.start and u.end <= pd["end_line"]:
                shown, p_end = signature_lines(lines, pd["start_line"], pd["end_line"], pd["signature"], c)
                pieces.append((pd["start_line"], p_end, "\n".join(shown), "header", pd["end_line"]))
                outermost = pd["start_line"]
            p = _parent_of(p, graph)
        # A Rust method's block is its `impl` (which trait, for which type), no definition of its
        # own.  Its first line says that; a where clause after it is left to the gap marker: a
        # slice of generic code shows a dozen impl blocks, and their bounds would add a third to
        # what the headers cost.  A Go group's member is framed the same way by its `const (` line.
        header = None
        if not compact and doc.language == "rust":
            header = _impl_header(lines, outermost)
        elif not compact and doc.language == "go":
            header = _group_header(lines, outermost)
        if header is not None and header[0] not in block_headers:
            block_headers.add(header[0])
            pieces.append((header[0], header[0], lines[header[0] - 1], "header", 0))
        # Members are told by their lines, not their names: a definition written inside a function
        # need not be named under it (`obj.method = function` in a JavaScript closure), and a
        # body elided whole would hide it while the slice counts it as shown.
        if u.mode == SIG and any(v is not u and u.start <= v.start and v.end <= u.end
                                 and (v.start, v.end) != (u.start, u.end) for v in units):
            d = graph.node(u.node)
            shown, sig_end = signature_lines(lines, u.start, u.end, d["signature"], c)
            pieces.append((u.start, sig_end, "\n".join(shown), "header", u.end))
        else:
            pieces.append((u.start, u.end, render_unit(doc, u, graph, with_doc=not compact), "unit", 0))
    pieces.sort(key=lambda piece: (piece[0], -piece[1]))
    out = [f"{c} {doc.path}"]
    last = 0
    prev_kind = "header"
    frames: list[int] = []  # last lines of the definitions whose headers frame what is shown, innermost last
    for first, end, text, kind, frame_end in pieces:
        if end <= last:
            continue  # already inside a shown span
        if not compact and first > last + 1:
            # (a span past the text's end: rows and text read at different moments)
            indent = _indent_of(lines[first - 1]) if first <= len(lines) else ""
            _gap(out, lines, c, last + 1, first - 1, indent, frames,
                 blank_first=prev_kind != "header" and (kind != "import" or prev_kind != "import"))
        out.append(text)
        last = end
        prev_kind = kind
        if kind == "header" and frame_end > end:
            frames.append(frame_end)
    if not compact and last < len(lines) and any(t.strip() for t in lines[last:]):
        _gap(out, lines, c, last + 1, len(lines), "", frames, blank_first=prev_kind != "header")
    return "\n".join(out)


def _gap(out: list[str], lines: list[str], c: str, lo: int, hi: int, indent: str, frames: list[int],
         blank_first: bool) -> None:
    """What lies between two shown spans (lines ``lo``-``hi``): its lines when they say more for
    no more tokens, else a marker.  Where a definition whose header frames what was shown ends
    inside the gap, the rest of its body gets a marker of its own at the body's indentation: one
    marker at the margin would read as if the definition ended where its shown part does."""
    segments: list[tuple[int, int, str]] = []
    while frames and frames[-1] < hi:
        frame_end = frames.pop()
        if frame_end >= lo:
            body = next((t for t in lines[lo - 1 : frame_end] if t.strip()), "")
            segments.append((lo, frame_end, _indent_of(body)))
            lo = frame_end + 1
    segments.append((lo, hi, indent))
    for i, (a, b, where) in enumerate(segments):
        gap = lines[a - 1 : b]
        marker = _marker(where, c, a, b)
        if _shown_instead(gap, marker):
            out.extend(gap)
            continue
        # Definitions are set apart by a blank line, as in the source; what lies between two
        # shown spans is named by a marker.
        if blank_first if i == 0 else out[-1] != "":
            out.append("")
        if any(t.strip() for t in gap):
            out.append(marker)


def _marker(indent: str, comment: str, first: int, last: int) -> str:
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"{indent}{comment} ... {where} omitted"


GAP_SHOWN_LINES = 3  # a gap this short may be shown as it is (see _shown_instead)


def _shown_instead(gap: list[str], marker: str) -> bool:
    """Whether a gap's own lines are shown rather than its marker: when they say more for no
    more tokens than the marker and the blank line before it (a member's short comment, a
    closing brace between two shown definitions)."""
    if len(gap) > GAP_SHOWN_LINES or not any(t.strip() for t in gap):
        return False
    return count_tokens_memo("\n".join(gap)) <= count_tokens_memo("\n" + marker)


IMPL_HEADER_LINES = 12  # an impl header with a long where clause; past this it is not looked for


def _impl_header(lines: list[str], start: int) -> tuple[int, int] | None:
    """The lines (first, last; 1-based) of the ``impl`` header whose block holds the definition
    starting at line ``start``, or None when it is not inside one.  Read from the text: the
    nearest line above indented less than the definition closes the header (``impl X {`` or the
    ``{`` after a where clause); the header starts at the ``impl`` line at or above it."""
    k = _block_opener(lines, start)
    if k is None or not lines[k].rstrip().endswith("{"):
        return None
    for first in range(k, max(k - IMPL_HEADER_LINES, -1), -1):
        head = lines[first].strip()
        if first < k and head.endswith(("{", "}", ";")):
            return None  # the end of something else: the block is not an impl's
        if _IMPL.match(head):
            return first + 1, k + 1
    return None


_IMPL = re.compile(r"(?:unsafe\s+)?impl\b")


def _group_header(lines: list[str], start: int) -> tuple[int, int] | None:
    """The line (first, last; 1-based, the same line) of the Go ``const (``, ``var (`` or
    ``type (`` that opens the group holding the declaration at line ``start``, or None when it is
    in no group.  A member of a group is written without its keyword (``InfoLevel`` after
    ``DebugLevel Level = iota``), so shown alone it reads as a stray name: the opening line says
    what it is.  Read from the text like an impl header: the nearest line above indented less."""
    k = _block_opener(lines, start)
    if k is not None and _GROUP.match(lines[k]):
        return k + 1, k + 1
    return None


_GROUP = re.compile(r"(?:const|var|type)\s*\(\s*(?://.*)?$")


def _block_opener(lines: list[str], start: int) -> int | None:
    """The index (0-based) of the nearest non-blank line above line ``start`` indented less than
    it: the line that opens the block holding it; None at the left margin or when none is."""
    indent = len(lines[start - 1]) - len(lines[start - 1].lstrip()) if 0 < start <= len(lines) else 0
    if indent == 0:
        return None
    k = start - 2
    while k >= 0 and (not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) >= indent):
        k -= 1
    return k if k >= 0 else None


def _import_lines(doc: FileDoc, shown_files: set[str]) -> list[int]:
    """The import lines that explain the file's dependencies on other files
    of the slice: the first line importing from each such file.  One line
    says the dependency; projects that import one name per line would
    otherwise spend a tenth of the budget repeating it."""
    lines = doc.lines
    first: dict[str, int] = {}
    for ln, target in doc.imports:
        if target in shown_files and target != doc.path and 0 < ln <= len(lines):
            text = lines[ln - 1]
            # Module-level, single-line imports only: a function's local
            # import says little about the file's dependencies.
            if text[:1].isalpha() and not text.rstrip().endswith(("(", "\\", "{", ",")):
                first[target] = min(ln, first.get(target, ln))
    return sorted(set(first.values()))


def _parent_of(node: str, graph: GraphView) -> str | None:
    path, qual = split_symbol_id(node)
    if "." not in qual:
        return None
    candidate = f"{path}::{qual.rsplit('.', 1)[0]}"
    return candidate if candidate in graph else None


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def unit_for(node: str, graph: GraphView, score: float) -> Unit:
    d = graph.node(node)
    return Unit(node, d["path"], score, FULL, d["start_line"], d["end_line"], d["kind"], _parent_of(node, graph))


def cost_of(doc: FileDoc, unit: Unit, graph: GraphView, mode: str) -> int:
    saved = unit.mode
    unit.mode = mode
    try:
        return count_tokens_memo(render_unit(doc, unit, graph)) + 1
    finally:
        unit.mode = saved
