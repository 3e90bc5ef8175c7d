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
"""

from __future__ import annotations

import re

import tree_sitter as ts

from .imports import extract_imports
from .languages import get_parser, get_query
from .model import ImportFact, ParseResult, RefFact, SymbolFact

# Bumped whenever the facts extracted from unchanged bytes change (queries,
# qualified names, spans): an index written by another version is re-parsed.
EXTRACTOR_VERSION = "7"

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
    __slots__ = ("start", "end", "kind", "name", "node", "span", "receiver", "qualname", "parent")

    def __init__(self, node, span, kind, name, receiver):
        self.node = node
        self.span = span
        self.start = span.start_byte
        self.end = span.end_byte
        self.kind = kind
        self.name = name
        self.receiver = receiver
        self.qualname = name
        self.parent: _Def | None = None


def _text(node: ts.Node) -> str:
    text = node.text
    return text.decode("utf-8", "replace") if text is not None else ""


def parse_source(path: str, language: str, source: bytes) -> ParseResult:
    """Parse UTF-8 ``source`` of ``language``; never raises on bad code."""
    tree = get_parser(language).parse(source)
    root = tree.root_node
    result = ParseResult(path=path, language=language)
    if root.has_error:
        result.syntax_error = _describe_error(root)

    defs: list[_Def] = []
    seen_defs: set[tuple[int, int, str]] = set()
    raw_refs: list[tuple[int, str, str, int, str | None]] = []
    seen_refs: set[tuple[int, str]] = set()
    imports: list[ImportFact] = []
    builtin_types = _BUILTIN_TYPES.get(language, frozenset())
    js_like = language in _JS_LIKE

    roles = _pattern_roles(language)
    for pattern, caps in ts.QueryCursor(get_query(language)).matches(root):
        info = roles.get(pattern)
        if info is None:
            info = roles[pattern] = _role_info(caps)
        role, group, kind = info
        if group is None:
            continue
        if group == _IMPORT:
            imports.extend(extract_imports(language, caps[role][0], source))
            continue
        names = caps.get("name")
        if not names:
            if group != _REF:
                continue
            names = caps[role]
        name_node = names[0]
        name = _text(name_node)
        if not name:
            continue
        receiver_nodes = caps.get("receiver")
        if group == _REF:
            if kind == "type" and name in builtin_types:
                continue
            start = name_node.start_byte
            key = (start, kind)
            if key in seen_refs:
                continue
            seen_refs.add(key)
            receiver = None
            if receiver_nodes:
                receiver = _text(receiver_nodes[0])[:_MAX_RECEIVER]
                if "\n" in receiver or "  " in receiver or "\t" in receiver:
                    receiver = _WS.sub(" ", receiver)
            raw_refs.append((start, name, kind, name_node.start_point[0] + 1, receiver))
            continue
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

    _nest(defs)
    if language == "python":
        defs = _fold_overloads(_drop_declarations(defs))
    for d in defs:
        if d.kind == "scope":
            continue
        result.symbols.append(
            SymbolFact(
                name=d.name,
                qualname=d.qualname,
                kind=d.kind,
                start_byte=d.start,
                end_byte=d.end,
                start_line=d.span.start_point[0] + 1,
                end_line=d.span.end_point[0] + 1,
                signature=_signature(d.node, source, d.span.start_byte if js_like else None),
                docstring=_docstring(d, language),
                parent=_symbol_parent(d),
            )
        )
    result.refs = _scope_refs(raw_refs, defs)
    if language == "rust":
        result.refs += _rust_trait_refs(defs)
    result.imports = imports
    return result


_JS_LIKE = frozenset({"javascript", "typescript", "tsx"})
_JS_EXPORTS = frozenset({"exports", "module.exports"})
_JS_STATEMENTS = frozenset({"expression_statement", "lexical_declaration", "variable_declaration"})
_IDENTIFIER = re.compile(r"[^A-Za-z0-9_$]+")


def _js_statement(node: ts.Node) -> ts.Node:
    """The whole statement of a one-definition statement (``exports.f = ...;``,
    ``export const f = ...``), so its span and leading comment are the statement's."""
    parent = node.parent
    if parent is not None and parent.type == "export_statement":
        return parent  # export [default] function f() {}
    if parent is None or parent.type not in _JS_STATEMENTS or parent.named_child_count != 1:
        return node
    if parent.type == "expression_statement" and node.type != "assignment_expression":
        return node
    outer = parent.parent
    return outer if outer is not None and outer.type == "export_statement" else parent


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
        stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
        return _IDENTIFIER.sub("_", stem) or "default", None, kind
    if receiver.endswith(".prototype"):
        receiver = receiver[: -len(".prototype")]
    return name, receiver or None, kind


_ROLE_PREFIXES = ("definition.", "reference.", "scope", "import")
_DEF, _REF, _IMPORT = "def", "ref", "import"
_roles: dict[str, dict[int, tuple]] = {}


def _pattern_roles(language: str) -> dict[int, tuple]:
    """Per-language cache: query pattern index -> (role capture, group, kind)."""
    return _roles.setdefault(language, {})


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


def _nest(defs: list[_Def]) -> None:
    """Assign parents and qualified names by span containment."""
    defs.sort(key=lambda d: (d.start, -d.end))
    stack: list[_Def] = []
    for d in defs:
        while stack and stack[-1].end <= d.start:
            stack.pop()
        parent = stack[-1] if stack and stack[-1].end >= d.end else None
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


def _fold_overloads(defs: list[_Def]) -> list[_Def]:
    """``@overload`` stubs are folded into the implementation that follows
    them: one symbol per name, spanning the code that runs."""
    last: dict[str, _Def] = {}
    for d in defs:
        last[d.qualname] = d
    return [d for d in defs if last[d.qualname] is d or not _is_overload(d)]


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


def _scope_refs(raw_refs: list, defs: list[_Def]) -> list[RefFact]:
    """Attach each reference to the innermost definition that contains it,
    folding identical uses from one scope into a single counted fact."""
    raw_refs.sort(key=lambda r: r[0])
    real = [d for d in defs if d.kind != "scope"]  # sorted by start already
    out: dict[tuple, RefFact] = {}
    # Sweep: defs sorted by start; keep a stack of open definitions.
    stack: list[_Def] = []
    di = 0
    for pos, name, kind, line, receiver in raw_refs:
        while di < len(real) and real[di].start <= pos:
            d = real[di]
            while stack and stack[-1].end <= d.start:
                stack.pop()
            stack.append(d)
            di += 1
        while stack and stack[-1].end <= pos:
            stack.pop()
        scope = stack[-1].qualname if stack else None
        key = (scope, name, kind, receiver)
        fact = out.get(key)
        if fact is None:
            out[key] = RefFact(name=name, kind=kind, line=line, scope=scope, receiver=receiver)
        else:
            fact.count += 1
    return list(out.values())


def _signature(node: ts.Node, source: bytes, start: int | None = None) -> str:
    """The declaration up to its body (or its first line); ``start`` may move
    the beginning back to an enclosing statement (``export default``)."""
    if start is None or start > node.start_byte:
        start = node.start_byte
    body = node.child_by_field_name("body")
    if body is not None and body.start_byte > node.start_byte:
        raw = source[start : body.start_byte]
    else:
        raw = source[start : node.end_byte].split(b"\n", 1)[0]
    sig = _WS.sub(" ", raw.decode("utf-8", "replace")).strip()
    if len(sig) > _MAX_SIGNATURE:
        sig = sig[: _MAX_SIGNATURE - 3] + "..."
    return sig


def _docstring(d: _Def, language: str) -> str | None:
    if language == "python":
        doc = _python_docstring(d.node)
    else:
        doc = _leading_comment(d.span)
    if doc:
        doc = doc.strip()
        if len(doc) > _MAX_DOC:
            doc = doc[:_MAX_DOC] + "..."
    return doc or None


def _python_docstring(node: ts.Node) -> str | None:
    body = node.child_by_field_name("body")
    if body is None or body.named_child_count == 0:
        return None
    first = body.named_children[0]
    if first.type != "expression_statement" or first.named_child_count == 0:
        return None
    string = first.named_children[0]
    if string.type != "string":
        return None
    parts = [_text(c) for c in string.named_children if c.type == "string_content"]
    return "".join(parts) if parts else None


_COMMENT_MARKS = re.compile(r"^\s*(?:/\*\*?|\*/|\*|///?|#|--)\s?", re.M)


def _leading_comment(span: ts.Node) -> str | None:
    lines: list[str] = []
    node = span
    expected_row = span.start_point[0]
    prev = node.prev_sibling
    while prev is not None and "comment" in prev.type and prev.end_point[0] >= expected_row - 1:
        lines.insert(0, _text(prev))
        expected_row = prev.start_point[0]
        prev = prev.prev_sibling
    if not lines:
        return None
    text = "\n".join(lines)
    text = text.replace("*/", "")
    return _COMMENT_MARKS.sub("", text)


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
