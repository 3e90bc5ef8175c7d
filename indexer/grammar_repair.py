"""Second readings of a C, C++, C# or TypeScript file whose parse has errors.

A grammar sees the file before the preprocessor has run.  Two habits of
real code then read as syntax errors that swallow whole classes:

* conditional compilation: ``#if`` branches that each hold half of a class
  header, an enum member or a signature (``class Reader`` / ``#if X`` /
  ``: IAsync`` / ``#endif``); the grammar pairs a directive only with whole
  statements or members;
* annotation macros (C and C++): export, visibility and namespace markers
  and statement wrappers that expand to attributes, keywords or nothing
  (``class LIB_API handle {``, a ``LIB_BEGIN_NAMESPACE`` line,
  ``LIB_EXPORT template <...>``, ``LIB_TRY {``, ``void f() LIB_NOEXCEPT {``).

In TypeScript, a callable type's or interface's overloads written one per line without
``;`` (``(): T`` then ``<U>(selector: ...): U``): the grammar reads the second as a
comparison continuing the first's return type, ``T < U > (...)``.

Only when the first parse has errors, the file is parsed again with those
spans blanked (spaces; newlines kept, so every byte offset and line is the
file's own), and the reading with the least code inside errors is kept.  A
file that parses cleanly is never touched, and a repair that does not help
is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter as ts

# The languages whose sources go through a preprocessor (C# has conditionals only).
CONDITIONAL_LANGUAGES = frozenset({"c", "cpp", "csharp"})
MACRO_LANGUAGES = frozenset({"c", "cpp"})
SIGNATURE_LANGUAGES = frozenset({"typescript", "tsx"})
REPAIR_LANGUAGES = CONDITIONAL_LANGUAGES | SIGNATURE_LANGUAGES
# Larger files are left as they parse: every repair is one more parse of the whole file.
MAX_REPAIR_BYTES = 1024 * 1024
# A MISSING node (a brace the parser had to invent) weighs the definition it spoils (see
# _errors), and never less than this many bytes inside an ERROR.
_MISSING_WEIGHT = 200
_MACRO_ROUNDS = 4


def _errors(root: ts.Node):
    """(node, the span it spoils) for every outermost ERROR node (itself) and MISSING node (the
    nearest definition or declaration holding it: a brace the parser had to invent usually
    means that definition ran on past its end and took in what follows)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR":
            yield node, node
        elif node.is_missing:
            holder = node.parent
            while holder is not None and holder.parent is not None and not _DEFINITION.search(holder.type):
                holder = holder.parent
            yield node, holder if holder is not None and holder.parent is not None else node
        elif node.has_error:
            stack.extend(node.children)


_DEFINITION = re.compile(r"definition|specifier|declaration")


def error_weight(root: ts.Node) -> int:
    """Bytes inside the outermost ERROR nodes and inside the definitions a MISSING node spoils
    (at least a fixed weight each)."""
    return sum(max(span.end_byte - span.start_byte, _MISSING_WEIGHT if node.is_missing else 0)
               for node, span in _errors(root))


def error_lines(root: ts.Node) -> set[int]:
    """The lines (0-based) of every outermost ERROR node and of the definition each MISSING
    node spoils, with the line before and after each: where a repair may look."""
    lines: set[int] = set()
    for _node, span in _errors(root):
        lines.update(range(max(0, span.start_point[0] - 1), span.end_point[0] + 2))
    return lines


def best_reading(language: str, source: bytes, tree: ts.Tree,
                 parse: Callable[[bytes], ts.Tree | None]) -> ts.Tree:
    """``tree`` (the parse of ``source``), or the parse of a repaired ``source`` with less code
    inside errors.  ``parse`` parses bytes of ``language`` (None past its deadline)."""
    if not tree.root_node.has_error or len(source) > MAX_REPAIR_BYTES:
        return tree
    best, best_weight, best_source = tree, error_weight(tree.root_node), source

    def attempt(candidate: bytes, dropped: int = 0) -> None:
        # Code a repair leaves out is lost like code inside an error: it weighs the same.
        nonlocal best, best_weight, best_source
        if candidate == best_source or dropped >= best_weight:
            return
        again = parse(candidate)
        if again is None:  # past the parse's deadline
            return
        weight = error_weight(again.root_node) + dropped
        if weight < best_weight:
            best, best_weight, best_source = again, weight, candidate

    if language in SIGNATURE_LANGUAGES:
        # Around the errors first: elsewhere a line opening with `<` may continue a comparison.
        # The error can start lines below the signature (its type parameters one per line, a
        # doc comment before it): then every such line.
        attempt(separate_generic_signatures(source, error_lines(tree.root_node)))
        if best_weight:
            attempt(separate_generic_signatures(source, None))
    if language in MACRO_LANGUAGES:
        attempt(blank_annotation_macros(source))  # every macro in a place a grammar cannot read it
    if language in CONDITIONAL_LANGUAGES and best_weight and _HAS_CONDITIONAL.search(source):
        # Every branch kept first (no definition lost); one branch when two versions of a
        # header or signature cannot be read side by side.
        base = best_source
        attempt(*blank_conditionals(base, first_branch_only=False))
        if best_weight:
            attempt(*blank_conditionals(base, first_branch_only=True))
    if language in MACRO_LANGUAGES:
        # Then, where blanking them all did not help, only the macros on the lines around an
        # error, a few rounds: one the grammar read as a type or a call elsewhere stays as read.
        for _round in range(_MACRO_ROUNDS):
            before = best_weight
            if before:
                attempt(blank_annotation_macros(best_source, error_lines(best.root_node)))
            if best_weight in (0, before):
                break
    return best


# -- TypeScript overload lists -------------------------------------------------

# A line opening a generic call signature: `<U>(`, `<S extends X>(`, or `<` alone with its type
# parameters on the lines below.
_GENERIC_SIGNATURE_LINE = re.compile(rb"^[ \t]+<[ \t]*(?:[A-Za-z_$]|\r?$)")
# A line ending so that the next one continues it (a list, an operator, an arrow): not a member's
# end, and a `<` starting the next line is not a new member.
_CONTINUED = (b";", b",", b"{", b"(", b"[", b"=", b"|", b"&", b"?", b":", b"<", b"=>", b"*/")


def separate_generic_signatures(source: bytes, only_lines: set[int] | None) -> bytes:
    """``source`` with a ``;`` written in the first blank of every line (of ``only_lines``, 0-based,
    when given) that opens a generic call signature right after a member that ended without one (``(): T`` /
    ``<U>(s: U): U``), which the grammar would read as ``T < U > (...)``; byte offsets and lines
    stay the file's own."""
    lines = source.split(b"\n")
    previous = b";"
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith((b"//", b"/*", b"*")):
            continue
        if (only_lines is None or i in only_lines) and _GENERIC_SIGNATURE_LINE.match(line) and not previous.endswith(_CONTINUED):
            lines[i] = b";" + line[1:]
        previous = _TRAILING_COMMENT.sub(b"", stripped) or stripped
    return b"\n".join(lines)


# -- conditional compilation ---------------------------------------------------

_HAS_CONDITIONAL = re.compile(rb"^[ \t]*#[ \t]*if", re.M)
_DIRECTIVE = re.compile(rb"[ \t]*#[ \t]*(ifdef|ifndef|if|elifdef|elifndef|elif|else|endif)\b")
_IF_ZERO = re.compile(rb"[ \t]*#[ \t]*if[ \t]+0[ \t]*(?://.*|/\*.*)?\r?$")


def _blank(line: bytes) -> bytes:
    return b" " * len(line)


def blank_conditionals(source: bytes, *, first_branch_only: bool) -> tuple[bytes, int]:
    """``source`` with its conditional directives blanked, and the code of every branch but one
    when ``first_branch_only`` (the first branch, or the second after an ``#if 0``, which is
    dead code either way): two branches that each hold one version of a header or signature
    then read as one.  Also how many bytes of code (not blanks) were left out of a branch."""
    lines = source.split(b"\n")
    dropped = 0
    # Per open #if: [dropping the current branch, a branch was kept already]
    stack: list[list[bool]] = []
    continued = False  # the previous line was a directive ending in a backslash
    for i, line in enumerate(lines):
        if continued:
            continued = line.rstrip(b"\r").endswith(b"\\")
            lines[i] = _blank(line)
            continue
        match = _DIRECTIVE.match(line)
        if match is None:
            if any(frame[0] for frame in stack):
                dropped += len(line.strip())
                lines[i] = _blank(line)
            continue
        kind = match.group(1)
        if kind.startswith(b"if"):
            dead = _IF_ZERO.match(line) is not None
            stack.append([dead, not dead])
        elif kind == b"endif":
            if stack:
                stack.pop()
        elif stack:  # elif / else
            frame = stack[-1]
            if frame[1] and first_branch_only:
                frame[0] = True
            else:
                frame[0] = False
                frame[1] = True
        continued = line.rstrip(b"\r").endswith(b"\\")
        lines[i] = _blank(line)
    return b"\n".join(lines), dropped


# -- annotation macros (C and C++) ---------------------------------------------

# An all-capitals name of two characters or more: LIB_API, FMT_TRY, Q_OBJECT (never a
# one-letter template parameter), with an optional argument list of one nesting level.
_MACRO = rb"\b[A-Z_][A-Z0-9_]+\b"
_ARGS = rb"(?:[ \t]*\((?:[^()\n]|\([^()\n]*\))*\))?"
_KEYWORDS = (rb"template|class|struct|union|enum|namespace|inline|static|extern|constexpr|typedef|using|"
             rb"virtual|explicit|friend|const|void|unsigned|signed|int|char|long|short|double|float|bool|auto")
# What may come before such a macro in a declaration: `static LIB_INLINE int f()`.
_SPECIFIERS = rb"(?:(?:static|inline|constexpr|virtual|explicit|friend|extern)[ \t]+)*"
_MACRO_PATTERNS = [
    # class LIB_API handle {  /  struct LIB_VISIBLE("default") error : base {
    re.compile(rb"\b(?:class|struct|union)((?:[ \t]+" + _MACRO + _ARGS + rb")+)(?=[ \t]+[A-Za-z_])"),
    # LIB_EXPORT template <typename T> class view  /  LIB_EXPORT class store
    re.compile(rb"^[ \t]*((?:" + _MACRO + _ARGS + rb"[ \t]+)+)(?=(?:template|class|struct)\b)", re.M),
    # LIB_EXPORT template <...>  /  LIB_API int f(void);  /  LIB_API json_t *make(void);
    re.compile(rb"^[ \t]*" + _SPECIFIERS + rb"(" + _MACRO + _ARGS + rb")"
               rb"(?=[ \t]+(?:(?:" + _KEYWORDS + rb")\b|[A-Za-z_][\w:<>]*[ \t*&]+[*&]*[A-Za-z_~]))", re.M),
    # LIB_CONSTEXPR size_padding(int n) : size(n) {}: before a constructor or function's name
    re.compile(rb"^[ \t]*" + _SPECIFIERS + rb"((?:" + _MACRO + _ARGS + rb"[ \t]+)+)(?=~?[A-Za-z_]\w*[ \t]*\()", re.M),
    # if LIB_CONSTEXPR (cond): a keyword a macro stands for (`if constexpr`)
    re.compile(rb"\bif((?:[ \t]+" + _MACRO + rb")+)(?=[ \t]*\()"),
    # LIB_TRY {  /  LIB_CATCH(...) {}: a wrapper before a block, at an indented statement's start
    # (at a file's margin, `TEST(suite, name) {` is read as the function it expands to)
    re.compile(rb"^[ \t]+(" + _MACRO + _ARGS + rb")(?=[ \t]*\{)", re.M),
    # void f() const LIB_NOEXCEPT {  /  int g() LIB_OVERRIDE;
    re.compile(rb"(?<=\))((?:[ \t]*const)?(?:[ \t]+" + _MACRO + _ARGS + rb")+)"
               rb"(?=[ \t]*(?:[{;=]|->|override\b|final\b))"),
]
# A line of one macro (and its arguments) and nothing else, after a line that ends a
# statement, a block or a label: LIB_BEGIN_NAMESPACE, Q_OBJECT, DISALLOW_COPY(Foo).  After
# a comma it would be an enum's last member, and stays.
_MACRO_LINE = re.compile(rb"^[ \t]*" + _MACRO + _ARGS + rb"[ \t]*\r?$")
_ENDS_STATEMENT = (b";", b"{", b"}", b":", b"*/")
_TRAILING_COMMENT = re.compile(rb"\s*//.*$")


def blank_annotation_macros(source: bytes, only_lines: set[int] | None = None) -> bytes:
    """``source`` with all-capitals macros blanked where a grammar cannot read them: between
    ``class`` and the class's name, before a declaration, before a block, after a function's
    parameter list, and alone on a line after a statement's end; on ``only_lines`` (0-based)
    when given, else everywhere."""
    def blank_group(match: re.Match) -> bytes:
        whole = match.group(0)
        start = match.start(1) - match.start(0)
        end = match.end(1) - match.start(0)
        return whole[:start] + _blank(whole[start:end]) + whole[end:]

    # Every pattern stays within a line: on some lines, each line is matched on its own.
    if only_lines is None:
        for pattern in _MACRO_PATTERNS:
            source = pattern.sub(blank_group, source)
        lines = source.split(b"\n")
    else:
        lines = source.split(b"\n")
        for i in sorted(i for i in only_lines if i < len(lines)):
            for pattern in _MACRO_PATTERNS:
                lines[i] = pattern.sub(blank_group, lines[i])
    previous = b";"  # the start of the file counts as a statement's end
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith((b"//", b"/*", b"*")):
            continue  # a comment between a statement's end and a macro line changes nothing
        if (_MACRO_LINE.match(line) and (only_lines is None or i in only_lines)
                and (previous.endswith(_ENDS_STATEMENT) or previous.startswith(b"#"))):
            lines[i] = _blank(line)
            continue
        previous = _TRAILING_COMMENT.sub(b"", stripped) or stripped  # `}  // namespace detail` ends with `}`
    return b"\n".join(lines)
