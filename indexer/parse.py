"""One file's bytes -> definitions, references and imports.

Each language has a query file (``indexer/queries/<lang>.scm``) whose matches
carry one *role* capture on the outer node plus helpers:

* ``@definition.<kind>`` + ``@name`` (+ ``@receiver`` for Go/C++ methods
  defined outside their type): a symbol;
* ``@scope`` + ``@name``: a block that prefixes nested names without being a
  symbol (Rust ``impl T``);
* ``@reference.<kind>`` + ``@name`` (+ ``@receiver`` for ``x.f()``): a use;
  the role may sit on the name itself (no ``@name``), which spares a
  capture object per match on the most frequent patterns;
* ``@import``: an import statement, handed to :mod:`indexer.imports`.

Qualified names come from byte-range nesting, so queries stay flat.

A query runs as two cursors (:func:`languages.get_query_passes`): patterns
anchored at the file's root node on their own, which walks only the top
level, and the rest.  References, most of a file's matches, are collected as
nodes and turned into folded rows in bulk (:func:`parse_rows`).
"""

from __future__ import annotations

import functools
import re
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from itertools import islice, repeat
from operator import attrgetter, gt, itemgetter

import tree_sitter as ts

from . import grammar_repair, rust_macros
from .imports import extract_imports
from .languages import QueryPass, get_definition_passes, get_parser, get_query_passes
from .model import ImportFact, ParseResult, RefFact, SymbolFact

# Bumped whenever the facts extracted from unchanged bytes change (queries,
# qualified names, spans, import targets): an index written by another
# version is re-parsed.
EXTRACTOR_VERSION = "40"  # 22: Jest mocks, codemod fixtures, `*-test-utils` packages are test code;
# 23: Rust macro_rules!, Go function-valued package vars; 24: TypeScript `export type *`;
# 25: C/C++/C# conditionals and macros read again (grammar_repair), operators, C# indexers, C++
# destructors in their class, reopened Ruby modules, `Tests/` and .NET test projects;
# 26: TypeScript declarations without a body (`declare`, `.d.ts`, overload signatures folded),
# namespaces and `declare module 'x'` blocks nest what they hold; Rust `#[path] mod x;` names its
# file, `let q = Queue::new();` and `let q = Queue { .. };` bind q; 27: JavaScript/TypeScript
# `export default name` is a bind row of `default`, `const s = new Store()` binds s;
# 28: TypeScript type tests (`*.test-d.ts`, `*.spec-d.ts`) are test code; 29: Rust struct
# fields bind their declared type (the content's, through `Arc`/`Rc`/`Box`); 30: JavaScript/
# TypeScript `const v = new ns.Klass()` binds v (to `ns.Klass`); Rust `let q = Queue::open()?;`
# (`.unwrap()`, `.expect(..)`, `.await`) binds q (to `Queue::open?`); 31: Rust items inside
# item-level brace macro calls (`cfg_feature! { .. }`, `pin_project! { .. }`) are definitions;
# 32: TypeScript `v: ns.Klass` (and `ns.Klass<T>`) binds v; 33: JavaScript/TypeScript
# `export default name` and `export { name }` are `export` rows (a use of the name); 34: an
# anonymous `export default function () {}` (arrow, class) is a definition named after its file,
# an `index` file's anonymous export (this one or `module.exports = function () {}`) after its folder;
# 35: a file whose stem ends `_tests` (a module of unit tests beside the code) is test code;
# 36: JavaScript/TypeScript object-literal members of one name named by their keys (`transform.handler`);
# 37: a workspace package whose entry is built output (`dist/node/index.js`) resolves to the same path under src/;
# 38: a signature ends before the comments between a declaration and its body
# 39: TypeScript overloads written one per line without `;` (`(): T` then `<U>(..): U`) read again separated
# 40: a Go `type T struct` (`const X`, `var v`) has the doc comment above its declaration, a
# TypeScript function the one above its first overload, a decorated member the one above its decorators

_CONTAINERS = {"class", "struct", "interface", "enum", "scope"}
_MAX_SIGNATURE = 300
_MAX_DOC = 1000
_MAX_RECEIVER = 80
_WS = re.compile(r"\s+")

# Builtin type names that can never resolve to project code; dropping them
# keeps the refs table small on large projects.
_BUILTIN_TYPES = {
    "python": frozenset(
        "int str float bool bytes bytearray complex object type None list dict set frozenset "
        "tuple Any Optional Union Callable Iterable Iterator Sequence Mapping Self".split()
    ),
}


class _Def:
    __slots__ = ("start", "end", "end_line", "kind", "name", "node", "span", "receiver", "qualname", "parent",
                 "nest")

    def __init__(self, node, span, kind, name, receiver):
        self.node = node
        self.span = span
        self.start = span.start_byte
        self.end = span.end_byte
        row, column = span.end_point
        self.end_line = row + 1
        if column == 0 and row > span.start_point[0]:
            # A node that takes its line's newline with it (a C `#define`, a
            # preprocessor block) ends on the line before: the next line is not its own.
            self.end -= 1
            self.end_line = row
        self.kind = kind
        self.name = name
        self.receiver = receiver
        self.qualname = name
        self.parent: _Def | None = None
        self.nest: str | None = None  # the qualified name what it holds is named under, when not its own


def _text(node: ts.Node) -> str:
    text = node.text
    return text.decode("utf-8", "replace") if text is not None else ""


def parse_source(path: str, language: str, source: bytes) -> ParseResult:
    """Parse UTF-8 ``source`` of ``language``; never raises on bad code."""
    result, ref_rows = parse_rows(path, language, source)
    result.refs = [RefFact(name=n, kind=k, line=ln, scope=s, receiver=r, count=c)
                   for s, n, k, r, ln, c in ref_rows]
    return result


# Some inputs take a grammar's parser time that grows with the square of their length (thousands of
# comment lines after an indented block, in Python's): past a deadline such a parse is given up, so
# one odd file never holds a run, a watcher or the proxy for minutes.  Inputs under GUARD_BYTES go
# without the watch, which costs about a tenth of a parse (a callback into Python every few hundred
# steps, and the second pass below): real code that size parses in milliseconds, and the worst
# input that size found takes about ten seconds.
GUARD_BYTES = 128 * 1024
PARSE_SECONDS = 10.0  # the deadline: this, plus one second per MB (real code parses at 5-20 MB/s)
PARSE_BYTES_PER_SECOND = 1_000_000


class ParseTimeout(Exception):
    """The parse of one input went past its deadline (see GUARD_BYTES)."""


# The guard nearly every C header carries so that C++ can include it:
#     #ifdef __cplusplus / extern "C" { / #endif   ...   #ifdef __cplusplus / } / #endif
# A grammar sees the brace opened in one #if and closed in another, which it
# cannot pair: the header reads as a syntax error and what lies between is lost.
_IF_CPLUSPLUS = rb"^[ \t]*#[ \t]*if(?:def[ \t]+__cplusplus|[ \t]+defined[ \t]*\(?[ \t]*__cplusplus[ \t]*\)?)[^\n]*\n"
_ENDIF = rb"[ \t]*#[ \t]*endif[^\n]*"
_EXTERN_C_GUARD = re.compile(
    # One run of blanks, then a comment or the line's end (two runs side by
    # side would try every split of a long run of blanks).
    _IF_CPLUSPLUS + rb"(?:[ \t]*extern[ \t]+\"C\"[ \t]*\{|[ \t]*\})[ \t]*(?://[^\n]*|/\*[^\n]*\*/[ \t]*)?\r?\n" + _ENDIF,
    re.M)


# TypeScript 5.0's `export type * from './types'` (a re-export of the types only), which the
# bundled grammar reads as a syntax error: without its `type` it is the re-export the grammar
# knows, and what it re-exports is the same for an index.
_EXPORT_TYPE_STAR = re.compile(rb"^([ \t]*export[ \t]+)type(?=[ \t]+\*)", re.M)


def _grammar_source(language: str, source: bytes) -> bytes:
    """``source`` as the grammar is given it, with what the grammar cannot read blanked (spaces,
    newlines kept, so every byte offset and line stays that of the file): in C and C++, the
    ``extern "C"`` guard's lines; in TypeScript, the ``type`` of ``export type *``."""
    if language in ("c", "cpp") and b"__cplusplus" in source:
        return _EXTERN_C_GUARD.sub(lambda m: re.sub(rb"[^\n]", b" ", m.group()), source)
    if language in ("typescript", "tsx") and b"export" in source:
        return _EXPORT_TYPE_STAR.sub(rb"\1    ", source)
    return source


def parse_tree(language: str, source: bytes) -> ts.Tree:
    """The tree of ``source``; raises :class:`ParseTimeout` past the deadline.  A C, C++ or C#
    file that parses with errors is read again with its conditionals and annotation macros
    blanked (a TypeScript file, with its one-per-line generic overloads separated), and the
    reading with fewer errors is kept (see :mod:`indexer.grammar_repair`); a
    Rust file's items inside brace macro calls are read as items (:mod:`indexer.rust_macros`)."""
    source = _grammar_source(language, source)
    tree = _parse(language, source)
    if language in grammar_repair.REPAIR_LANGUAGES and tree.root_node.has_error:
        tree = grammar_repair.best_reading(language, source, tree, functools.partial(_parse_in_time, language))
    elif language == "rust":
        tree = rust_macros.unwrap_item_macros(source, tree, functools.partial(_parse_in_time, language))
    return tree


def _parse_in_time(language: str, source: bytes, old_tree: ts.Tree | None = None) -> ts.Tree | None:
    try:
        return _parse(language, source, old_tree)
    except ParseTimeout:
        return None


def _parse(language: str, source: bytes, old_tree: ts.Tree | None = None) -> ts.Tree:
    """The tree of ``source``; ``old_tree``, an earlier parse edited to match it, lends the parser
    what did not change."""
    parser = get_parser(language)
    earlier = {} if old_tree is None else {"old_tree": old_tree}  # the binding refuses None
    if len(source) < GUARD_BYTES:
        return parser.parse(source, **earlier)
    allowed = PARSE_SECONDS + len(source) / PARSE_BYTES_PER_SECOND
    deadline = time.monotonic() + allowed
    view = memoryview(source)
    try:
        tree = parser.parse(lambda byte, _point: view[byte:], **earlier,
                            progress_callback=lambda *_: time.monotonic() > deadline)
    except ValueError:  # what the binding raises when the callback cancels the parse
        parser.reset()  # or the next parse would resume this one
        raise ParseTimeout(f"the parse took over {allowed:.0f} s") from None
    # A tree parsed through a callback holds no source, and the binding's Node.text would read
    # freed memory: parsed again from the bytes with nothing edited, every node is reused
    # (about a tenth of the first parse) and the tree holds its text.
    return parser.parse(source, old_tree=tree)


def parse_rows(path: str, language: str, source: bytes) -> tuple[ParseResult, list[tuple]]:
    """:func:`parse_source` with the references as storage rows, (scope, name,
    kind, receiver, line, count), and ``result.refs`` left empty: the index
    run writes rows, and most of a file's facts are references.  Raises
    :class:`ParseTimeout` for an input the parser cannot finish in time."""
    tree = parse_tree(language, source)
    root = tree.root_node
    result = ParseResult(path=path, language=language)
    if root.has_error:
        result.syntax_error = _describe_error(root)
    # A use is kept as (name node, kind, receiver nodes) and turned into text
    # and positions in bulk below: references are most of a file's matches.
    uses: list[tuple] = []
    imports: list[ImportFact] = []
    defs = _definitions(root, _passes(language), language, path, source, uses, imports)
    result.symbols = _symbols(defs, language, source)
    ref_rows = _ref_rows(_uses(uses, _BUILTIN_TYPES.get(language), source), defs, source)
    if language == "rust":
        ref_rows += [(r.scope, r.name, r.kind, r.receiver, r.line, r.count) for r in _rust_trait_refs(defs)]
    result.imports = imports
    return result, ref_rows


def parse_definitions(path: str, language: str, source: bytes) -> list[SymbolFact]:
    """The symbols :func:`parse_source` finds in ``source``, and nothing else: only the query's
    definition patterns run (an outline of a block needs no references or imports, which are
    most of a file's matches).  Never raises on bad code; an input the parser cannot finish in
    time (see GUARD_BYTES) has no definitions."""
    try:
        root = parse_tree(language, source).root_node
    except ParseTimeout:
        return []
    return _symbols(_definitions(root, _definition_passes(language), language, path, source, [], []),
                    language, source)


def _definitions(root: ts.Node, passes, language: str, path: str, source: bytes, uses: list[tuple],
                 imports: list[ImportFact]) -> list[_Def]:
    """The definitions the query passes match under ``root``, nested and named (uses and imports
    the passes match go to ``uses`` and ``imports``)."""
    defs: list[_Def] = []
    seen_defs: set[tuple[int, int, str]] = set()
    for query_pass, plans in passes:
        cursor = ts.QueryCursor(query_pass.query)
        if query_pass.max_start_depth is not None:
            cursor.set_max_start_depth(query_pass.max_start_depth)
        _read_matches(cursor.matches(root), query_pass, plans, language, path, source,
                      uses, defs, seen_defs, imports)
    _nest(defs)
    if language == "python":
        defs = _fold_overloads(_drop_declarations(defs))
    elif language in _JS_LIKE:
        defs = _fold_signatures(defs)
    _disambiguate(defs, reopens=language in _REOPENING, keyed=language in _JS_LIKE)
    return defs


def _symbols(defs: list[_Def], language: str, source: bytes) -> list[SymbolFact]:
    js_like = language in _JS_LIKE
    return [
        SymbolFact(
            name=d.name,
            qualname=d.qualname,
            kind=d.kind,
            start_byte=d.start,
            end_byte=d.end,
            start_line=d.span.start_point[0] + 1,
            end_line=d.end_line,
            signature=_signature(d.node, source, d.span.start_byte if js_like
                                 else _go_keyword(d.node) if language == "go" else None),
            docstring=_docstring(d, language),
            parent=_symbol_parent(d),
        )
        for d in defs if d.kind != "scope"
    ]


def _read_matches(matches, query_pass: QueryPass, plans: dict[int, tuple], language: str, path: str,
                  source: bytes, uses: list[tuple], defs: list[_Def], seen_defs: set, imports: list) -> None:
    add_use = uses.append
    js_like = language in _JS_LIKE
    for pattern, caps in matches:
        plan = plans.get(pattern)
        if plan is None:
            plan = plans[pattern] = _plan(query_pass, pattern, caps)
        group, role, kind, name_cap, has_receiver = plan
        if group is _REF:
            names = caps.get(name_cap) or caps[role] if name_cap else caps[role]
            add_use((names[0], kind, caps.get("receiver") if has_receiver else None))
            continue
        if group is None:
            continue
        if group is _IMPORT:
            imports.extend(extract_imports(language, caps[role][0], source))
            continue
        names = caps.get("name")
        if not names:
            continue
        name_node = names[0]
        name = _text(name_node)
        if name_node.type == "simple_symbol":  # Ruby's `attr_reader :size` defines `size`
            name = name.lstrip(":")
        elif name_node.type in _OPERATORS:
            name = _operator_name(name_node)
        elif js_like and name_node.type == "default":  # `export default function () {}`
            own = caps[role][0].child_by_field_name("name")
            name = _text(own) if own is not None else _js_module_name(path)
        if not name:
            continue
        receiver_nodes = caps.get("receiver")
        node = caps[role][0]
        span = node
        parent = node.parent
        if parent is not None and parent.type == "decorated_definition":
            span = parent
        elif js_like:
            span = _js_statement(node)
        receiver = _text(receiver_nodes[0]) if receiver_nodes else None
        if js_like and receiver is not None:
            name, receiver, kind = _js_assignment(node, name, receiver, kind, path)
        key = (span.start_byte, span.end_byte, name)
        if key in seen_defs:
            continue
        seen_defs.add(key)
        defs.append(_Def(node, span, kind, name, receiver))



# C++ and C# operators and conversions, named as written without the spaces a style puts in:
# `operator==`, `operator()`, `operator new`, `operator bool` (the conversion to bool); a C#
# indexer is `this[]`.
_OPERATORS = frozenset({"operator_name", "operator_cast", "operator_declaration", "conversion_operator_declaration",
                        "indexer_declaration"})
_OPERATOR_SPACE = re.compile(r"^operator\s*(?=[^\sA-Za-z_])|\s+")


def _operator_name(node: ts.Node) -> str:
    if node.type == "indexer_declaration":  # C#'s `public T this[int i]`: `this[]`, overloads `this[]:2`
        return "this[]"
    if node.type == "operator_name":
        text = _text(node)
    elif node.type == "operator_declaration":
        symbol = node.child_by_field_name("operator")
        text = "operator" + (_text(symbol) if symbol is not None else "")
    else:  # a conversion: C++ operator_cast, C# conversion_operator_declaration
        target = node.child_by_field_name("type")
        text = "operator " + (_text(target) if target is not None else "")
    return _OPERATOR_SPACE.sub(lambda m: " " if m.group().isspace() else "operator", text.strip())


_byte_range = attrgetter("byte_range")
_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)


def _uses(uses: list[tuple], builtin_types: frozenset[str] | None, source: bytes) -> tuple[list, list, list, list]:
    """(starts, names, kinds, receivers) of the matched uses in match order:
    empty names and builtin types dropped, then one use per (position, kind),
    the first match winning (two patterns may capture the same name)."""
    # Slicing the source is a fraction of the cost of ``Node.text``.
    ranges = list(map(_byte_range, map(_first, uses)))
    starts = list(map(_first, ranges))
    names = [source[a:b].decode("utf-8", "replace") for a, b in ranges]
    kinds = list(map(_second, uses))
    if "bind" in kinds:
        names = [_bind_name(n, u[0]) if k == "bind" else n for n, k, u in zip(names, kinds, uses)]
    receivers = [_receiver(r, source) if r else None for r in map(_third, uses)]
    keep = None
    if "" in names or (builtin_types is not None and ("type" in kinds or "bind" in kinds)):
        keep = [bool(n) and not (builtin_types is not None and n in builtin_types and k in ("type", "bind"))
                for n, k in zip(names, kinds)]
    keys = list(zip(starts, kinds))
    if keep is not None or len(set(keys)) != len(keys):
        seen: set[tuple[int, str]] = set()
        kept = []
        for i, key in enumerate(keys):
            if (keep is None or keep[i]) and key not in seen:
                seen.add(key)
                kept.append(i)
        starts = [starts[i] for i in kept]
        names = [names[i] for i in kept]
        kinds = [kinds[i] for i in kept]
        receivers = [receivers[i] for i in kept]
    return starts, names, kinds, receivers


def _bind_name(name: str, node: ts.Node) -> str:
    """A bind row's type as stored: a path written over lines (`new ns\n  .Store()`) as one
    name; a Rust function's path followed by `?` when the local holds what its Result or Option
    holds (`Queue::open()?`, `.unwrap()`, `.expect(..)`)."""
    name = _WS.sub("", name)
    if node.type == "scoped_identifier":
        call = node.parent
        outer = call.parent if call is not None else None
        if outer is not None and outer.type == "await_expression":
            outer = outer.parent
        if outer is not None and outer.type in ("try_expression", "field_expression"):
            name += "?"  # (a field_expression here is the `.unwrap`/`.expect` the query matched)
    return name


def _receiver(nodes: list[ts.Node], source: bytes) -> str:
    start, end = nodes[0].byte_range
    receiver = source[start:end].decode("utf-8", "replace")[:_MAX_RECEIVER]
    if "\n" in receiver or "  " in receiver or "\t" in receiver:
        receiver = _WS.sub(" ", receiver)
    return receiver


_JS_LIKE = frozenset({"javascript", "typescript", "tsx"})
_JS_EXPORTS = frozenset({"exports", "module.exports"})
_JS_STATEMENTS = frozenset({"expression_statement", "lexical_declaration", "variable_declaration"})
_IDENTIFIER = re.compile(r"[^A-Za-z0-9_$]+")


def _js_statement(node: ts.Node) -> ts.Node:
    """The whole statement of a one-definition statement (``exports.f = ...;``,
    ``export const f = ...``, ``export declare function f(): T``), so its span and leading
    comment are the statement's."""
    parent = node.parent
    if parent is not None and parent.type in _JS_PREFIXES:
        return _js_prefixed(parent)  # export [default] function f() {}, declare class C {}
    if parent is None or parent.type not in _JS_STATEMENTS or parent.named_child_count != 1:
        return node
    if parent.type == "expression_statement" and node.type != "assignment_expression":
        return node
    return _js_prefixed(parent)


# The keywords a declaration may be written behind, each wrapping it in a node of its own.
_JS_PREFIXES = frozenset({"export_statement", "ambient_declaration"})


def _js_prefixed(node: ts.Node) -> ts.Node:
    """``node`` with the ``export`` and ``declare`` written before it."""
    parent = node.parent
    while parent is not None and parent.type in _JS_PREFIXES:
        node, parent = parent, parent.parent
    return node


def _js_assignment(node: ts.Node, name: str, receiver: str, kind: str, path: str) -> tuple[str, str | None, str]:
    """(name, receiver, kind) of a definition by assignment: ``exports.f`` and
    ``module.exports.f`` are the module's ``f``; ``module.exports = function g``
    is ``g`` (the file's stem when anonymous); ``Foo.prototype.m`` is ``Foo``'s
    ``m``; ``this.m`` nests in the enclosing definition."""
    receiver = _WS.sub("", receiver)
    if receiver == "this":
        return name, None, kind
    if receiver in _JS_EXPORTS:
        return name, None, kind
    if receiver == "module" and name == "exports":
        value = node.child_by_field_name("right")
        own = value.child_by_field_name("name") if value is not None else None
        if own is not None:
            return _text(own), None, kind
        return _js_module_name(path), None, kind
    if receiver.endswith(".prototype"):
        receiver = receiver[: -len(".prototype")]
    return name, receiver or None, kind


def _js_module_name(path: str) -> str:
    """The name of a module's anonymous export (``module.exports = function () {}``, ``export
    default () => {}``): the file's stem, as an importer usually names it; an ``index`` file's
    folder, which is what its importers write (``import Button from './Button'`` for
    ``Button/index.tsx``)."""
    parts = path.split("/")
    stem = parts[-1].split(".", 1)[0]
    if stem == "index" and len(parts) > 1:
        stem = parts[-2]
    return _IDENTIFIER.sub("_", stem) or "default"


_ROLE_PREFIXES = ("definition.", "reference.", "scope", "import")
_DEF, _REF, _IMPORT = "def", "ref", "import"
_passes_by_language: dict[str, list[tuple[QueryPass, dict[int, tuple]]]] = {}
_CAPTURE = re.compile(r"@([\w.]+)")


_definition_passes_by_language: dict[str, list[tuple[QueryPass, dict[int, tuple]]]] = {}


def _passes(language: str) -> list[tuple[QueryPass, dict[int, tuple]]]:
    """The language's query passes, each with its cache: pattern index -> how
    its matches are read."""
    passes = _passes_by_language.get(language)
    if passes is None:
        passes = _passes_by_language[language] = [(p, {}) for p in get_query_passes(language)]
    return passes


def warm_queries(languages: Iterable[str | None]) -> None:
    """Compile the query passes of ``languages`` now, in this process (a process about to fork
    its parse workers: they inherit them)."""
    for language in languages:
        if language is None:
            continue
        try:
            _passes(language)
        except Exception:  # only a head start: the worker meets the same error as it did before
            pass


def _definition_passes(language: str) -> list[tuple[QueryPass, dict[int, tuple]]]:
    """:func:`_passes` of the definition patterns alone (:func:`languages.get_definition_passes`)."""
    passes = _definition_passes_by_language.get(language)
    if passes is None:
        passes = _definition_passes_by_language[language] = [(p, {}) for p in get_definition_passes(language)]
    return passes


def _plan(query_pass: QueryPass, pattern: int, caps: dict) -> tuple:
    """(group, role capture, kind, name capture, has receiver) of a pattern,
    from its first match; ``name capture`` is None when the pattern has no
    ``@name`` (the role sits on the name) and ``has receiver`` says whether a
    ``@receiver`` can be there, so most matches need no look-ups for them."""
    role, group, kind = _role_info(caps)
    captures = set(_CAPTURE.findall(query_pass.patterns[pattern]))
    return group, role, kind, "name" if "name" in captures else None, "receiver" in captures


def _role_info(caps: dict) -> tuple[str, str | None, str]:
    role = next((k for k in caps if k.startswith(_ROLE_PREFIXES)), "")
    if role.startswith("reference."):
        return role, _REF, role[len("reference."):]
    if role.startswith("definition."):
        return role, _DEF, role[len("definition."):]
    if role == "scope":
        return role, _DEF, "scope"
    if role == "import":
        return role, _IMPORT, ""
    return role, None, ""


_PREPROCESSOR_DEFINITIONS = frozenset({"preproc_def", "preproc_function_def"})


def _nest(defs: list[_Def]) -> None:
    """Assign parents and qualified names by span containment."""
    defs.sort(key=lambda d: (d.start, -d.end))
    stack: list[_Def] = []
    for d in defs:
        if d.node.type in _PREPROCESSOR_DEFINITIONS:
            # A C macro belongs to no scope, wherever it is written (flags
            # defined beside the struct field they go with, a helper inside
            # a function): the preprocessor knows no braces.
            continue
        while stack and stack[-1].end <= d.start:
            stack.pop()
        parent = stack[-1] if stack and stack[-1].end >= d.end else None
        if parent is not None and d.kind == parent.kind and (parent.start, parent.end) == (d.start, d.end):
            # Two names of one declaration (`static final int A = 1, B = 2;`,
            # `attr_reader :a, :b`) are siblings.
            parent = parent.parent
        d.parent = parent
        if d.receiver:
            d.qualname = f"{_strip_receiver(d.receiver)}.{d.name}"
            if d.kind == "function":
                d.kind = "method"

        elif parent is not None:
            d.qualname = f"{parent.qualname}.{d.name}"
            if d.kind == "function" and parent.kind in _CONTAINERS:
                d.kind = "method"
        stack.append(d)


# Languages where a class or module named twice in one scope is one type opened again (Ruby's
# `module Rack; end` then `module Rack ... end`, C#'s partial classes, TypeScript's declaration
# merging: `namespace A {}` twice, a class and a namespace of one name): what the second holds
# is named under the type's own name, not under `Rack:2`.
_REOPENING = frozenset({"ruby", "csharp", "typescript", "tsx"})


def _disambiguate(defs: list[_Def], reopens: bool = False, keyed: bool = False) -> None:
    """One qualified name per definition.  A name defined twice in one scope
    -- a property's setter or deleter beside its getter (``set size(v)``,
    ``@size.setter``), an overload (Java, C#, C++), a Rust method of the same
    name in two trait impls, a function defined under either branch of an
    ``if`` -- was one symbol: the first, every later one dropped from the
    graph, so its code could not be found, ranked or shown.  A setter is now
    ``size:set`` (a deleter ``size:delete``), any other later definition
    ``name:2``, ``name:3``...; what is nested in a renamed one follows it (in a language
    that reopens types, what a reopened class or module holds keeps the type's name)."""
    counts = Counter(d.qualname for d in defs if d.kind != "scope")
    if all(n == 1 for n in counts.values()):
        return
    used: set[str] = set()
    for d in defs:  # source order: a scope before what it holds
        if d.parent is not None and not d.receiver:
            d.qualname = f"{d.parent.nest or d.parent.qualname}.{d.name}"
        if d.kind == "scope":
            continue
        base = d.qualname
        if keyed and counts.get(base, 1) > 1 and not d.receiver:
            # Object-literal members of one name under different keys (a plugin's hooks
            # `transform: { handler() {} }`, `load: { handler() {} }`; an options object's
            # `on: { click() {} }`): the keys that hold them tell them apart, where `:2` says nothing
            # a question or a search could match.
            keys = _object_keys(d)
            if keys:
                owner = f"{d.parent.nest or d.parent.qualname}." if d.parent is not None else ""
                keyed_name = f"{owner}{keys}.{d.name}"
                if keyed_name not in used and keyed_name not in counts:
                    d.qualname = base = keyed_name
        if counts.get(base, 1) > 1 or base in used:
            role = _accessor_role(d)
            if role is not None:
                d.qualname = f"{base}:{role}"
            k = 2
            while d.qualname in used:
                d.qualname = f"{base}:{k}"
                k += 1
            if reopens and d.qualname != base and (d.kind in _CONTAINERS or d.kind == "module"):
                d.nest = base
        used.add(d.qualname)


def _object_keys(d: _Def) -> str:
    """The keys of the object literals that hold ``d`` inside its parent definition, outermost
    first (``transform.handler``'s ``transform``), or '' when it is no object-literal member."""
    stops = (d.parent.node, d.parent.span) if d.parent is not None else ()
    keys: list[str] = []
    node = d.node.parent
    while node is not None and node not in stops:
        if node.type == "pair":
            key = node.child_by_field_name("key")
            if key is None or key.type not in ("property_identifier", "string"):
                return ""
            text = _text(key).strip("'\"`")
            if not text or not text.replace("_", "a").replace("$", "a").isalnum():
                return ""
            keys.append(text)
        node = node.parent
    return ".".join(reversed(keys))


def _accessor_role(d: _Def) -> str | None:
    """``set`` / ``delete`` for a property's setter or deleter, else None."""
    node = d.node
    if node.type == "method_definition":  # JavaScript / TypeScript ``set name(v) {}``
        return "set" if any(c.type == "set" and not c.is_named for c in node.children[:4]) else None
    if d.span.type == "decorated_definition":  # Python ``@name.setter``
        for child in d.span.named_children:
            if child.type == "decorator":
                text = _text(child).split("#", 1)[0].strip()
                if text.endswith(".setter"):
                    return "set"
                if text.endswith(".deleter"):
                    return "delete"
    return None


def _fold_overloads(defs: list[_Def]) -> list[_Def]:
    """``@overload`` stubs are folded into the implementation that follows
    them: one symbol per name, spanning the code that runs."""
    last: dict[str, _Def] = {}
    for d in defs:
        last[d.qualname] = d
    return [d for d in defs if last[d.qualname] is d or not _is_overload(d)]


# TypeScript declarations without a body: an overload's signature, or what a `declare` or a
# `.d.ts` file states.
_SIGNATURES = frozenset({"function_signature", "method_signature"})


def _fold_signatures(defs: list[_Def]) -> list[_Def]:
    """A TypeScript overload's signatures (``function f(a: string): string;`` written before
    ``function f(a: any) { .. }``) are folded into the implementation of their name: one symbol,
    spanning the code that runs.  Signatures with no implementation (a ``.d.ts`` file's, a
    ``declare``'s, an interface's) are the definitions, one per signature."""
    implemented = {d.qualname for d in defs if d.node.type not in _SIGNATURES}
    return [d for d in defs if d.node.type not in _SIGNATURES or d.qualname not in implemented]


def _drop_declarations(defs: list[_Def]) -> list[_Def]:
    """A bare annotation (``XFAIL: Callable[..., Any]``) declares the type of a
    name some later statement defines (often a function chosen under an
    ``if``): when a definition of that name follows, it is the symbol."""
    declaration = [d.kind == "constant" and _is_declaration(d) for d in defs]
    if not any(declaration):
        return defs
    defined = {d.qualname for d, only_declared in zip(defs, declaration) if not only_declared}
    return [d for d, only_declared in zip(defs, declaration) if not (only_declared and d.qualname in defined)]


def _is_declaration(d: _Def) -> bool:
    """A constant written as an annotation with no value."""
    node = d.node
    while node is not None and node.type != "assignment":
        node = node.parent
    return node is not None and node.child_by_field_name("type") is not None \
        and node.child_by_field_name("right") is None


def _is_overload(d: _Def) -> bool:
    if d.span.type != "decorated_definition":
        return False
    for child in d.span.named_children:
        if child.type == "decorator":
            # A trailing comment (`@overload  # type: ignore`) is part of the node.
            text = _text(child).split("#", 1)[0].strip()
            if text == "@overload" or text.endswith(".overload"):
                return True
    return False


def _strip_receiver(receiver: str) -> str:
    # Go `*T`, `T[K]`; C++ `ns::T`
    receiver = receiver.lstrip("*&").split("[", 1)[0].split("<", 1)[0]
    return receiver.rsplit("::", 1)[-1].strip() or receiver


def _symbol_parent(d: _Def) -> str | None:
    # A Rust ``impl T`` scope is reported as the parent ``T`` even though it
    # is not a symbol itself; the graph links it to T's definition by name.
    return d.parent.qualname if d.parent is not None else None


def _rust_trait_refs(defs: list[_Def]) -> list[RefFact]:
    """``impl Trait for T``: T inherits Trait, and each method of the block
    overrides (inherits from) the trait's method of that name."""
    out = []
    for d in defs:
        if d.kind != "scope" or d.node.type != "impl_item":
            continue
        trait = d.node.child_by_field_name("trait")
        if trait is None:
            continue
        path = _WS.sub("", _text(trait)).split("<", 1)[0]
        prefix, _, name = path.rpartition("::")
        line = trait.start_point[0] + 1
        out.append(RefFact(name=name, kind="inherit", line=line, scope=d.qualname, receiver=prefix or None))
        for m in defs:
            if m.parent is d and m.kind in ("method", "function"):
                out.append(RefFact(name=m.name, kind="inherit", line=m.span.start_point[0] + 1,
                                   scope=m.qualname, receiver=path))
    return out


def _ref_rows(uses: tuple[list, list, list, list], defs: list[_Def], source: bytes) -> list[tuple]:
    """Attach each use to the innermost definition that contains it, folding
    identical uses from one scope into one counted row (scope, name, kind,
    receiver, line, count) whose line is the first use's; rows come in the
    order of their first use."""
    starts, names, kinds, receivers = uses
    if not starts:
        return []
    if any(map(gt, starts, islice(starts, 1, None))):  # matches mostly come in position order
        order = sorted(range(len(starts)), key=starts.__getitem__)  # stable: ties keep match order
        starts = [starts[i] for i in order]
        names = [names[i] for i in order]
        kinds = [kinds[i] for i in order]
        receivers = [receivers[i] for i in order]
    # The innermost scope only changes where a definition starts or ends, so
    # it is found once per such boundary and handed to the uses between two
    # boundaries in one go.
    keys: list[tuple] = []
    i, n = 0, len(starts)
    for scope, nxt in _scope_steps(defs):
        if i >= n:
            break
        j = n if nxt is None else bisect_left(starts, nxt, i)
        if j > i:
            keys += zip(repeat(scope, j - i), names[i:j], kinds[i:j], receivers[i:j])
            i = j
    counts = Counter(keys)  # keeps first-use order
    first = dict(zip(reversed(keys), reversed(starts)))  # the earliest position wins
    rows = []
    line, at = 1, 0
    for key, count in counts.items():
        pos = first[key]  # non-decreasing over first-use order
        line += source.count(b"\n", at, pos)
        at = pos
        rows.append((*key, line, count))
    return rows


def _scope_steps(defs: list[_Def]):
    """(innermost scope qualname, where the next step starts or None) for each
    step along the file from position 0: the scope at a position is what a sweep over the
    definitions sorted by start (pushing each as it starts, popping the top
    while it has ended) leaves on top of its stack."""
    real = [d for d in defs if d.kind != "scope"]  # sorted by start already
    bounds = sorted({0, *(d.start for d in real), *(d.end for d in real)})
    stack: list[_Def] = []
    di = 0
    last = len(bounds) - 1
    for k, pos in enumerate(bounds):
        while di < len(real) and real[di].start <= pos:
            d = real[di]
            while stack and stack[-1].end <= d.start:
                stack.pop()
            stack.append(d)
            di += 1
        while stack and stack[-1].end <= pos:
            stack.pop()
        yield stack[-1].qualname if stack else None, bounds[k + 1] if k < last else None


def _go_keyword(node: ts.Node) -> int | None:
    """Where a Go type's declaration begins when it declares that type alone: its signature then
    reads ``type Level int8`` as written, not ``Level int8``.  A member of a ``type (...)`` group
    is written without the keyword, and its signature is its own line."""
    parent = node.parent
    if node.type in ("type_spec", "type_alias") and parent is not None and parent.type == "type_declaration":
        if parent.named_child_count == 1 and parent.start_point[0] == node.start_point[0]:
            return parent.start_byte
    return None


def _literal_body(spec: ts.Node) -> ts.Node | None:
    """A Go `name = func(..) T { .. }`'s body: the function literal's."""
    value = spec.child_by_field_name("value")
    literal = value.named_child(0) if value is not None and value.named_child_count else None
    return literal.child_by_field_name("body") if literal is not None else None


def _first_rule(macro: ts.Node) -> ts.Node | None:
    """Where a `macro_rules! name { .. }`'s rules begin: its signature is what comes before."""
    for child in macro.children:
        if child.type in ("{", "(", "["):
            return child
    return None


# Definitions whose body is no field of their own node.
_BODY_INSIDE = {"var_spec": _literal_body, "macro_definition": _first_rule}


def _signature(node: ts.Node, source: bytes, start: int | None = None) -> str:
    """The declaration up to its body (or its first line); ``start`` may move
    the beginning back to an enclosing statement (``export default``)."""
    if start is None or start > node.start_byte:
        start = node.start_byte
    body = node.child_by_field_name("body")
    if body is None and node.type in _BODY_INSIDE:
        body = _BODY_INSIDE[node.type](node)
    if body is not None and body.start_byte > node.start_byte:
        end = body.start_byte
        # Comments between a declaration and its body are no part of it: a grammar hangs a
        # trailing `def f():  # note`, and the comment lines a block opens with, on the
        # definition ahead of its body, and joined into one line they would read as code.
        prev = body.prev_sibling
        while prev is not None and "comment" in prev.type and prev.start_byte > start:
            end = prev.start_byte
            prev = prev.prev_sibling
        raw = source[start:end]
    else:
        raw = source[start : node.end_byte].split(b"\n", 1)[0]
    sig = _WS.sub(" ", raw.decode("utf-8", "replace")).strip()
    if sig.endswith("\\") and node.type in _PREPROCESSOR_DEFINITIONS:
        sig = sig[:-1].rstrip()  # a macro continued on the next line: the backslash is no part of it
    if len(sig) > _MAX_SIGNATURE:
        sig = sig[: _MAX_SIGNATURE - 3] + "..."
    return sig


def _docstring(d: _Def, language: str) -> str | None:
    if language == "python":
        doc = _python_docstring(d.node)
    else:
        doc = _leading_comment(d.span, d.name)
    if doc:
        doc = doc.strip()
        if len(doc) > _MAX_DOC:
            doc = doc[:_MAX_DOC] + "..."
    return doc or None


def _python_docstring(node: ts.Node) -> str | None:
    body = node.child_by_field_name("body")
    if body is None or body.named_child_count == 0:
        return None
    first = body.named_child(0)  # not ``named_children``: a class body has many
    if first.type != "expression_statement" or first.named_child_count == 0:
        return None
    string = first.named_child(0)
    if string.type != "string":
        return None
    parts = [_text(c) for c in string.named_children if c.type == "string_content"]
    return "".join(parts) if parts else None


# The indentation before a mark is read within its line: whitespace that may cross lines (`\s*`) let
# every line of a run of blank lines scan the rest of the run, quadratic in a hostile comment.
_COMMENT_MARKS = re.compile(r"^[^\S\n]*(?:/\*\*?|\*/|\*|///?|#|--)\s?", re.M)


# Decorators stand between a TypeScript/JavaScript class member and its doc comment (`/** Doc */`
# then `@memo()` above `m() {}`): they are siblings of the member, not part of it, and the
# comment above them is still the member's documentation.  (Rust's outer attributes are the same
# shape, `/// Doc` then `#[derive(..)]`, but giving those items their docs lost recall on the
# development half's Rust repositories: the ranking was fitted without them; docs/benchmarks.md.)
_ATTRIBUTE_NODES = frozenset({"decorator"})

# Go documents `type T struct`, `const X = 1` and `var v = f` above the declaration: the
# definition is the spec inside it (`type_spec`), whose sibling before it is the keyword, and
# the comment is the declaration's sibling.  (In a parenthesized group each spec has its own.)
_GO_SPEC_KEYWORDS = frozenset({"type", "const", "var"})


def _leading_comment(span: ts.Node, name: str | None = None) -> str | None:
    lines: list[str] = []
    node = span
    if (span.prev_sibling is not None and span.prev_sibling.type in _GO_SPEC_KEYWORDS
            and span.parent is not None and span.parent.type.endswith("_declaration")):
        node = span.parent
    expected_row = node.start_point[0]
    prev = node.prev_sibling
    while prev is not None and prev.end_point[0] >= expected_row - 1:
        if "comment" in prev.type:
            lines.insert(0, _text(prev))
        elif prev.type not in _ATTRIBUTE_NODES and (lines or not _overload_of(prev, name)):
            break
        expected_row = prev.start_point[0]
        prev = prev.prev_sibling
    if not lines:
        return None
    text = "\n".join(lines)
    text = text.replace("*/", "")
    return _COMMENT_MARKS.sub("", text)


def _overload_of(node: ts.Node, name: str | None) -> bool:
    """Whether ``node`` is a TypeScript overload signature of ``name`` (``export function f(a:
    string): string`` written before the implementation): the doc comment of a function written
    with overloads stands above the first of them, the implementation's symbol spans the last."""
    if name is None:
        return False
    if node.type == "export_statement":
        node = node.child_by_field_name("declaration") or node
    if node.type not in _SIGNATURES:
        return False
    named = node.child_by_field_name("name")
    return named is not None and _text(named) == name


def _describe_error(root: ts.Node) -> str:
    """The position of the first ERROR or MISSING node, for the file's status."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            what = f"missing {node.type}" if node.is_missing else "syntax error"
            return f"{what} at line {node.start_point[0] + 1}"
        if node.has_error:
            stack.extend(reversed(node.children))
    return "syntax error"
