"""Import statements -> ImportFacts, and ImportFacts -> project files.

``extract_imports`` turns one ``@import`` node into one fact per imported
binding.  ``resolve_import`` maps a fact to the project-relative file it
names, using only what ``build_resolve_context`` precomputed (no filesystem
calls per import: it runs for every import of every file).

Encodings beyond "the module as written" (they keep resolution unambiguous):

- Rust ``mod foo;`` -> module ``"self::foo"``, name None: the declared module is
  the child ``foo`` of the current module, which is exactly what ``self::foo``
  means.  ``use self::foo;`` stays distinguishable as (``"self"``, ``"foo"``).
  ``#[path = "p/x.rs"] mod foo;`` -> module ``"./p/x.rs"`` (the file as written,
  ``./`` put before a relative one), name None, alias ``"foo"``: a Rust path never
  starts with ``.`` or ``/``, and the alias is the name the module is bound to.
  ``use`` trees expand to one fact per leaf: ``use a::b::{c, d as e};`` ->
  (``a::b``, ``c``), (``a::b``, ``d``, ``e``); ``{self}`` -> the parent path's
  last segment as name; a single-segment ``use foo;`` -> (``foo``, None).
- Ruby ``require_relative "x"`` -> module ``"./x"`` (``"../x"`` stays as is),
  so relative requires are recognisable; ``require "x"`` keeps ``"x"``.
- C/C++ ``#include <x.h>`` -> module ``"<x.h>"`` (never resolved);
  ``#include "x.h"`` -> ``"x.h"``.
- PHP ``require __DIR__ . '/x.php'`` -> module ``"./x.php"``; only string
  literal operands are recorded.  ``use A\\B\\C;`` -> (``A\\B``, ``C``);
  ``use C as D;`` -> (``C``, None, ``D``).
- JS/TS: default import -> name ``"default"``; ``* as ns`` and
  ``const ns = require(..)`` -> name None, alias ``ns``; ``export * from`` ->
  name ``"*"``; ``export * as ns from`` -> name None, alias ``ns``.
- Java ``import a.b.C;`` -> (``a.b``, ``C``); wildcards -> name ``"*"``;
  ``import static a.b.C.m;`` -> (``a.b.C``, ``m``).
- C# ``using A.B;`` -> (``A.B``, None); ``using X = A.B.C;`` -> alias ``X``.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter as ts

from .model import ImportFact

# ---------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------


def _text(node: ts.Node | None, source: bytes) -> str:
    if node is None:
        return ""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _line(node: ts.Node) -> int:
    return node.start_point[0] + 1


def _string_value(node: ts.Node | None, source: bytes) -> str | None:
    """The contents of a plain string literal, or None if it interpolates."""
    if node is None:
        return None
    parts = [c for c in node.named_children if c.type not in ("escape_sequence",)]
    if any(c.type not in ("string_fragment", "string_content", "interpreted_string_literal_content") for c in parts):
        return None
    if not parts:
        raw = _text(node, source)
        return raw[1:-1] if len(raw) >= 2 and raw[0] in "'\"`" else None
    return "".join(_text(c, source) for c in parts)


def _fact(module: str, name: str | None, alias: str | None, node: ts.Node) -> ImportFact:
    if alias is not None and alias == name:
        alias = None
    return ImportFact(module=module, name=name, alias=alias, line=_line(node))


def _python(node: ts.Node, source: bytes) -> list[ImportFact]:
    facts: list[ImportFact] = []
    if node.type == "import_statement":
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                module = _text(child.child_by_field_name("name"), source)
                alias = _text(child.child_by_field_name("alias"), source)
                facts.append(_fact(module, None, alias, node))
            else:
                facts.append(_fact(_text(child, source), None, None, node))
        return facts
    if node.type == "import_from_statement":
        module = re.sub(r"\s+", "", _text(node.child_by_field_name("module_name"), source))
        if any(c.type == "wildcard_import" for c in node.named_children):
            return [_fact(module, "*", None, node)]
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = _text(child.child_by_field_name("name"), source)
                alias = _text(child.child_by_field_name("alias"), source)
                facts.append(_fact(module, name, alias, node))
            else:
                facts.append(_fact(module, _text(child, source), None, node))
    return facts


def _js_require_bindings(call: ts.Node, module: str, source: bytes) -> list[ImportFact]:
    parent = call.parent
    if parent is not None and parent.type == "variable_declarator":
        target = parent.child_by_field_name("name")
        if target is not None and target.type == "identifier":
            return [_fact(module, None, _text(target, source), call)]
        if target is not None and target.type == "object_pattern":
            facts = []
            for prop in target.named_children:
                if prop.type == "shorthand_property_identifier_pattern":
                    facts.append(_fact(module, _text(prop, source), None, call))
                elif prop.type == "pair_pattern":
                    key = prop.child_by_field_name("key")
                    value = prop.child_by_field_name("value")
                    local = _text(value, source) if value is not None and value.type == "identifier" else None
                    facts.append(_fact(module, _text(key, source), local, call))
            if facts:
                return facts
    return [_fact(module, None, None, call)]


def _js_specifiers(clause: ts.Node, spec_type: str, module: str, node: ts.Node, source: bytes) -> list[ImportFact]:
    """``{a, b as c}`` of an import or export clause: one fact per specifier."""
    facts = []
    for spec in clause.named_children:
        if spec.type != spec_type:
            continue
        name = _text(spec.child_by_field_name("name"), source)
        alias_node = spec.child_by_field_name("alias")
        facts.append(_fact(module, name, _text(alias_node, source) if alias_node else None, node))
    return facts


def _js(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type == "call_expression":
        args = node.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_children else None
        module = _string_value(first, source) if first is not None and first.type == "string" else None
        if module is None:
            return []
        function = node.child_by_field_name("function")
        if function is not None and function.type == "import":
            return [_fact(module, None, None, node)]
        return _js_require_bindings(node, module, source)

    if node.type == "import_statement":
        source_node = node.child_by_field_name("source")
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        require = next((c for c in node.named_children if c.type == "import_require_clause"), None)
        if require is not None:  # TS: import fs = require("fs")
            module = _string_value(require.child_by_field_name("source"), source)
            local = next((c for c in require.named_children if c.type == "identifier"), None)
            return [_fact(module, None, _text(local, source), node)] if module is not None else []
        module = _string_value(source_node, source)
        if module is None:
            return []
        if clause is None:
            return [_fact(module, None, None, node)]
        facts = []
        for child in clause.named_children:
            if child.type == "identifier":
                facts.append(_fact(module, "default", _text(child, source), node))
            elif child.type == "namespace_import":
                local = next((c for c in child.named_children if c.type == "identifier"), None)
                facts.append(_fact(module, None, _text(local, source), node))
            elif child.type == "named_imports":
                facts.extend(_js_specifiers(child, "import_specifier", module, node, source))
        return facts

    if node.type == "export_statement":
        module = _string_value(node.child_by_field_name("source"), source)
        if module is None:
            return []
        facts = []
        for child in node.named_children:
            if child.type == "export_clause":
                facts.extend(_js_specifiers(child, "export_specifier", module, node, source))
            elif child.type == "namespace_export":
                local = next((c for c in child.named_children if c.type in ("identifier", "string")), None)
                facts.append(_fact(module, None, _text(local, source), node))
        return facts or [_fact(module, "*", None, node)]
    return []


def _go(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type != "import_spec":
        return []
    path = _string_value(node.child_by_field_name("path"), source)
    if path is None:
        raw = _text(node.child_by_field_name("path"), source)
        path = raw.strip("`\"")
    name_node = node.child_by_field_name("name")
    return [_fact(path, None, _text(name_node, source) if name_node is not None else None, node)]


def _rust_path(node: ts.Node | None, source: bytes) -> str:
    return re.sub(r"\s+", "", _text(node, source))


def _rust_use_tree(node: ts.Node, prefix: str, source: bytes, stmt: ts.Node, out: list[ImportFact]) -> None:
    def join(a: str, b: str) -> str:
        return f"{a}::{b}" if a else b

    def leaf(full: str, alias: str | None) -> None:
        if "::" in full:
            module, _, name = full.rpartition("::")
            if name == "self":  # `a::b::{self}` imports module b itself
                module, _, name = module.rpartition("::")
            out.append(_fact(module, name, alias, stmt))
        else:
            out.append(_fact(full, None, alias, stmt))

    kind = node.type
    if kind in ("identifier", "scoped_identifier", "crate", "self", "super", "metavariable"):
        leaf(join(prefix, _rust_path(node, source)), None)
    elif kind == "use_as_clause":
        path = join(prefix, _rust_path(node.child_by_field_name("path"), source))
        leaf(path, _text(node.child_by_field_name("alias"), source))
    elif kind == "use_wildcard":
        inner = next(iter(node.named_children), None)
        module = join(prefix, _rust_path(inner, source)) if inner is not None else prefix
        out.append(_fact(module, "*", None, stmt))
    elif kind == "scoped_use_list":
        path_node = node.child_by_field_name("path")
        new_prefix = join(prefix, _rust_path(path_node, source)) if path_node is not None else prefix
        _rust_use_tree(node.child_by_field_name("list"), new_prefix, source, stmt, out)
    elif kind == "use_list":
        for child in node.named_children:
            _rust_use_tree(child, prefix, source, stmt, out)


def _rust_path_attribute(mod_item: ts.Node, source: bytes) -> str | None:
    """The file a ``#[path = "..."]`` attribute on ``mod_item`` names (the attributes are
    the item's preceding siblings), or None."""
    sibling = mod_item.prev_named_sibling
    while sibling is not None and sibling.type == "attribute_item":
        attribute = next(iter(sibling.named_children), None)
        if attribute is not None and attribute.type == "attribute":
            key = attribute.named_children[0] if attribute.named_children else None
            value = attribute.child_by_field_name("value")
            if key is not None and _text(key, source) == "path" and value is not None:
                return _string_value(value, source)
        sibling = sibling.prev_named_sibling
    return None


def _rust(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type == "mod_item":
        if node.child_by_field_name("body") is not None:
            return []
        name = _text(node.child_by_field_name("name"), source)
        file = _rust_path_attribute(node, source)
        if file:
            return [_fact(file if file.startswith((".", "/")) else "./" + file, None, name, node)]
        return [_fact("self::" + name, None, None, node)]
    if node.type == "use_declaration":
        out: list[ImportFact] = []
        argument = node.child_by_field_name("argument")
        if argument is not None:
            _rust_use_tree(argument, "", source, node, out)
        return out
    return []


def _java(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type != "import_declaration":
        return []
    path_node = next((c for c in node.named_children if c.type in ("scoped_identifier", "identifier")), None)
    path = _text(path_node, source)
    if any(c.type == "asterisk" for c in node.named_children):
        return [_fact(path, "*", None, node)]
    module, _, name = path.rpartition(".")
    return [_fact(module, name, None, node)]


def _c(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type != "preproc_include":
        return []
    path = node.child_by_field_name("path")
    if path is None:
        return []
    if path.type == "system_lib_string":
        return [_fact(_text(path, source), None, None, node)]
    if path.type == "string_literal":
        value = _string_value(path, source)
        return [_fact(value, None, None, node)] if value else []
    return []  # macro-computed includes


def _csharp(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type != "using_directive":
        return []
    alias_node = node.child_by_field_name("name")
    target = next(
        (c for c in node.named_children if c.type in ("qualified_name", "identifier", "generic_name") and c != alias_node),
        None,
    )
    if target is None:
        return []
    alias = _text(alias_node, source) if alias_node is not None else None
    return [_fact(_text(target, source), None, alias, node)]


def _ruby(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type != "call":
        return []
    method = _text(node.child_by_field_name("method"), source)
    args = node.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    value = _string_value(first, source) if first is not None and first.type == "string" else None
    if value is None or method not in ("require", "require_relative"):
        return []
    if method == "require_relative" and not value.startswith(("./", "../", "/")):
        value = "./" + value
    return [_fact(value, None, None, node)]


def _php_name(node: ts.Node | None, source: bytes) -> str:
    return _text(node, source).lstrip("\\")


def _php(node: ts.Node, source: bytes) -> list[ImportFact]:
    if node.type == "namespace_use_declaration":
        facts = []
        group_prefix = None
        body = node.child_by_field_name("body")
        if body is not None:
            prefix_node = next((c for c in node.named_children if c.type == "namespace_name"), None)
            group_prefix = _php_name(prefix_node, source)
            clauses = [c for c in body.named_children if c.type == "namespace_use_clause"]
        else:
            clauses = [c for c in node.named_children if c.type == "namespace_use_clause"]
        for clause in clauses:
            alias_node = clause.child_by_field_name("alias")
            alias = _text(alias_node, source) if alias_node is not None else None
            target = next((c for c in clause.named_children if c != alias_node), None)
            full = _php_name(target, source)
            if group_prefix:
                full = f"{group_prefix}\\{full}"
            module, sep, name = full.rpartition("\\")
            if sep:
                facts.append(_fact(module, name, alias, node))
            else:
                facts.append(_fact(full, None, alias, node))
        return facts
    if node.type in ("require_expression", "require_once_expression", "include_expression", "include_once_expression"):
        operand = next(iter(node.named_children), None)
        while operand is not None and operand.type == "parenthesized_expression":
            operand = next(iter(operand.named_children), None)
        if operand is None:
            return []
        if operand.type in ("string", "encapsed_string"):
            value = _string_value(operand, source)
            return [_fact(value, None, None, node)] if value else []
        if operand.type == "binary_expression":
            left = operand.child_by_field_name("left")
            right = operand.child_by_field_name("right")
            if (
                left is not None
                and right is not None
                and _text(left, source) == "__DIR__"
                and right.type in ("string", "encapsed_string")
            ):
                value = _string_value(right, source)
                if value:
                    return [_fact("." + (value if value.startswith("/") else "/" + value), None, None, node)]
    return []


_EXTRACTORS = {
    "python": _python,
    "javascript": _js,
    "typescript": _js,
    "tsx": _js,
    "go": _go,
    "rust": _rust,
    "java": _java,
    "c": _c,
    "cpp": _c,
    "csharp": _csharp,
    "ruby": _ruby,
    "php": _php,
}


def extract_imports(language: str, node: ts.Node, source: bytes) -> list[ImportFact]:
    """One ImportFact per binding introduced by the ``@import`` node ``node``."""
    extractor = _EXTRACTORS.get(language)
    if extractor is None:
        return []
    return extractor(node, source)


# ---------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------

_JS_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")
_JS_SWAP = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


@dataclass
class ResolveContext:
    root: Path
    files: frozenset[str]
    # directory ("" for the root) -> sorted file names directly inside it
    dir_files: dict[str, list[str]]
    # every path suffix (by whole segments) -> files ending with it, sorted
    suffixes: dict[str, list[str]]
    python_roots: tuple[str, ...] = ("",)
    # (module path, directory of its go.mod), longest module path first
    go_modules: tuple[tuple[str, str], ...] = ()
    ts_base_url: str | None = None
    # tsconfig "paths": (pattern, [target patterns]) in the file's order; a
    # pattern holds at most one "*", targets are project-relative.
    ts_paths: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # folder -> (baseUrl, paths) of the nearest tsconfig/jsconfig below the
    # root that maps anything; folders not listed use the root's two above.
    ts_dir_configs: dict[str, tuple] = field(default_factory=dict)
    # packages of a JavaScript/TypeScript workspace: (name, directory, entry
    # file or None), longest name first, so `@scope/pkg/sub` finds `@scope/pkg`.
    js_packages: tuple[tuple[str, str, str | None], ...] = ()
    # directories holding a Rust crate root (lib.rs / main.rs)
    rust_crate_dirs: frozenset[str] = field(default_factory=frozenset)
    # a workspace's library crates: name as `use` spells it (`tokio_util`) -> crate root directory
    rust_crates: dict[str, str] = field(default_factory=dict)
    # (base, dotted) -> Python module file; thousands of files import the
    # same modules, so a cold index resolves each pair once.
    py_memo: dict[tuple[str, str], str | None] = field(default_factory=dict, compare=False, repr=False)
    # a file's directory -> the bases its absolute Python imports are looked for under (the
    # roots, and the directory itself when it is no package); every file of a folder asks the same.
    py_bases: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    def config_digest(self) -> str:
        """A digest of what the project's configuration files tell resolution (tsconfig and
        jsconfig mappings, package.json names, go.mod modules, Cargo crates): when it moves, an
        import can point elsewhere though no source file changed."""
        read = (self.go_modules, self.ts_base_url, self.ts_paths, sorted(self.ts_dir_configs.items()),
                self.js_packages, sorted(self.rust_crates.items()))
        return hashlib.blake2b(repr(read).encode(), digest_size=16).hexdigest()


def _dirname(path: str) -> str:
    return posixpath.dirname(path)


def _join(*parts: str) -> str:
    parts = tuple(p for p in parts if p)
    if not parts:  # e.g. a Go import of the module root itself
        return ""
    joined = posixpath.normpath(posixpath.join(*parts))
    return "" if joined == "." else joined


def _read_go_mod(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^\s*module\s+\"?([^\s\"]+)\"?", text, re.M)
    return match.group(1) if match else None


# A string's closing quote is optional: a string JSON cannot end on its line makes the file invalid
# whatever else is dropped, and taking it as it stands keeps the scan linear (with the quote required,
# every quote after an unclosed one scanned to the end of the line again: the square of a hostile line).
_JSONC_NOISE = re.compile(r'("(?:\\.|[^"\\\n])*"?)|/\*.*?\*/|//[^\n]*|,(?=\s*[}\]])', re.S)


def _read_json_loose(path: Path) -> dict | None:
    """A JSON config that may carry comments and trailing commas (tsconfig)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # JSONC: comments and trailing commas are dropped outside strings only;
    # "paths" patterns such as "@app/*" hold "/*" and "*/" themselves.
    text = _JSONC_NOISE.sub(lambda m: m.group(1) or "", text)
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# The files build_resolve_context reads besides the sources: none is an indexed source, so an edit
# of one names no file to parse, but it can move where imports point.
_RESOLUTION_CONFIG = re.compile(r"(?:tsconfig|jsconfig)[\w.-]*\.json|package\.json|go\.mod|Cargo\.toml")


def is_resolution_config(path: str) -> bool:
    return _RESOLUTION_CONFIG.fullmatch(posixpath.basename(path)) is not None


TsMapping = tuple[str | None, tuple[tuple[str, tuple[str, ...]], ...]]
_TS_CONFIG_NAMES = ("tsconfig.json", "jsconfig.json")


def _inside_project(rel: str) -> bool:
    return rel != ".." and not rel.startswith("../") and "node_modules" not in rel.split("/")


def _ts_extends(root: Path, config: str, value: object) -> list[str]:
    """The project-relative configs ``extends`` names, earliest first."""
    found: list[str] = []
    for spec in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        if not isinstance(spec, str) or not spec:
            continue
        if spec.startswith(("./", "../")):
            candidates = [_join(_dirname(config), spec)]
        else:
            # A package name, as node resolves it from the config's folder up:
            # followed only when it leads back into the project (a workspace
            # package linked under node_modules), never into an installed one.
            candidates, probe = [], _dirname(config)
            while True:
                candidates.append(_join(probe, "node_modules", spec))
                if not probe:
                    break
                probe = _dirname(probe)
        for candidate in candidates:
            for path in (candidate, candidate + ".json", _join(candidate, "tsconfig.json")):
                file = root / path
                if file.is_file():
                    real = Path(os.path.realpath(file))
                    try:
                        rel = real.relative_to(root.resolve()).as_posix()
                    except ValueError:
                        rel = ".."
                    if _inside_project(rel):
                        found.append(rel)
                    break
            else:
                continue
            break
    return found


def _ts_config_options(root: Path, config: str, memo: dict) -> tuple[str | None, tuple[str, dict] | None]:
    """A config's ``baseUrl`` and ``paths`` after ``extends``, as tsc reads them:
    the nearest declaration of each wins, and each is relative to the config
    that declares it (``paths`` to that config's folder when no ``baseUrl``)."""
    if config in memo:
        return memo[config]
    memo[config] = (None, None)  # an extends cycle ends here
    data = _read_json_loose(root / config)
    base: str | None = None
    paths: tuple[str, dict] | None = None
    if data is not None:
        for parent in _ts_extends(root, config, data.get("extends")):
            parent_base, parent_paths = _ts_config_options(root, parent, memo)
            base = parent_base if parent_base is not None else base
            paths = parent_paths or paths
        options = data.get("compilerOptions")
        if isinstance(options, dict):
            if isinstance(options.get("baseUrl"), str):
                base = _join(_dirname(config), options["baseUrl"])
            if isinstance(options.get("paths"), dict):
                paths = (_dirname(config), options["paths"])
    memo[config] = (base, paths)
    return base, paths


def _read_ts_config(root: Path, config: str, memo: dict) -> TsMapping:
    """One config's ``baseUrl`` and ``paths`` mapping, targets project-relative."""
    base, paths = _ts_config_options(root, config, memo)
    mapping: list[tuple[str, tuple[str, ...]]] = []
    if paths is not None:
        declared_in, raw = paths
        anchor = base if base is not None else declared_in
        for pattern, targets in raw.items():
            if isinstance(pattern, str) and isinstance(targets, list) and pattern.count("*") <= 1:
                kept = tuple(_join(anchor, t) for t in targets if isinstance(t, str) and t.count("*") <= 1)
                if kept:
                    mapping.append((pattern, kept))
    return base, tuple(mapping)


def _ts_configs(root: Path, dir_files: dict[str, list[str]]) -> tuple[TsMapping, dict[str, TsMapping]]:
    """The root config's mapping, and the mapping of each folder of
    JavaScript/TypeScript files whose nearest config (a package's own
    tsconfig.json or jsconfig.json) declares one: in a monorepo each package
    resolves its aliases (``@/*``, ``~/*``) through its own config."""
    memo: dict = {}
    root_mapping: TsMapping = (None, ())
    for name in (*_TS_CONFIG_NAMES, "tsconfig.base.json"):
        if (root / name).is_file():
            mapping = _read_ts_config(root, name, memo)
            if mapping[0] is not None or mapping[1]:
                root_mapping = mapping
                break
    nearest: dict[str, TsMapping | None] = {"": None}  # folder -> its nearest config's mapping, None for the root's

    def lookup(directory: str) -> TsMapping | None:
        if directory not in nearest:
            name = next((n for n in _TS_CONFIG_NAMES if (root / directory / n).is_file()), None)
            if name is None:
                nearest[directory] = lookup(_dirname(directory))
            else:
                mapping = _read_ts_config(root, _join(directory, name), memo)
                # A package config that maps nothing keeps the root's mapping:
                # solution-style monorepos declare aliases once, at the root.
                nearest[directory] = mapping if mapping[0] is not None or mapping[1] else None
        return nearest[directory]

    by_dir: dict[str, TsMapping] = {}
    for directory, names in dir_files.items():
        if any(n.endswith(_JS_EXTENSIONS) for n in names):
            mapping = lookup(directory)
            if mapping is not None:
                by_dir[directory] = mapping
    return root_mapping, by_dir


# Fields of package.json that name a package's entry, most source-like first:
# a workspace package is imported by name, and its source (not its build
# output, which is never indexed) is what the import means to a reader.
_PACKAGE_ENTRY_FIELDS = ("source", "types", "typings", "module", "main")


_BUILD_DIRS = frozenset({"dist", "build", "out", "esm", "cjs"})  # where packages put their build output


def _package_entry(ctx_files: frozenset[str], directory: str, data: dict) -> str | None:
    candidates: list[str] = []
    for field_name in _PACKAGE_ENTRY_FIELDS:
        value = data.get(field_name)
        if isinstance(value, str):
            candidates.append(value)
    exports = data.get("exports")
    if isinstance(exports, str):
        candidates.append(exports)
    elif isinstance(exports, dict):
        dot = exports.get(".", exports)
        if isinstance(dot, str):
            candidates.append(dot)
        elif isinstance(dot, dict):
            candidates += [v for k, v in dot.items() if isinstance(v, str) and k in ("source", "types", "import", "default", "require")]
    # Built entries (dist/index.js) are not indexed: their source usually
    # sits under src/ with the same stem.
    probes: list[str] = []
    for c in candidates:
        rel = _join(directory, c)
        probes.append(rel)
        stem = posixpath.basename(c)
        for ext in (".d.ts", ".js", ".mjs", ".cjs", ".ts"):
            if stem.endswith(ext):
                stem = stem[: -len(ext)]
                break
        # A build mirrors its source tree (`dist/node/index.js` is built from
        # `src/node/index.ts`): the same path under src/ comes first.
        parts = [p for p in c.split("/") if p not in ("", ".")]
        if len(parts) > 2 and parts[0] in _BUILD_DIRS:
            probes.append(_join(directory, "/".join(["src", *parts[1:-1], stem])))
        probes.append(_join(directory, "src", stem))
    probes += [_join(directory, "src", "index"), _join(directory, "index")]
    for probe in probes:
        hit = _js_probe_files(ctx_files, probe)
        if hit is not None:
            return hit
    return None


def _js_packages(root: Path, files: frozenset[str], dir_files: dict[str, list[str]]) -> tuple:
    """Every package.json above the JavaScript/TypeScript files, by package name."""
    js_dirs = [d for d, names in dir_files.items() if any(n.endswith(_JS_EXTENSIONS) for n in names)]
    checked: set[str] = set()
    packages: dict[str, tuple[str, str | None]] = {}
    for directory in js_dirs:
        probe = directory
        while probe not in checked:
            checked.add(probe)
            data = _read_json_loose(root / probe / "package.json") if (root / probe / "package.json").is_file() else None
            name = data.get("name") if data else None
            if isinstance(name, str) and name and name not in packages:
                packages[name] = (probe, _package_entry(files, probe, data))
            if not probe:
                break
            probe = _dirname(probe)
    return tuple(sorted(((n, d, e) for n, (d, e) in packages.items()), key=lambda x: (-len(x[0]), x[0])))


def build_resolve_context(root: Path, files: Iterable[str]) -> ResolveContext:
    """Precompute everything resolution needs from the project's file list."""
    root = Path(root)
    file_set = frozenset(files)
    dir_files: dict[str, list[str]] = defaultdict(list)
    suffixes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(file_set):
        directory, _, base = path.rpartition("/")
        dir_files[directory].append(base)
        parts = path.split("/")
        for i in range(len(parts)):
            suffixes["/".join(parts[i:])].append(path)

    # Python: the root, plus src/ and lib/ when they hold packages or modules.
    python_roots = [""]
    for candidate in ("src", "lib"):
        if any(
            name.endswith((".py", ".pyi"))
            for sub in dir_files
            if sub == candidate or sub.startswith(candidate + "/")
            for name in dir_files[sub]
        ):
            python_roots.append(candidate)

    # Go: every go.mod governing a directory that holds .go files.
    go_modules: dict[str, str] = {}
    seen: dict[str, str | None] = {}
    for directory, names in dir_files.items():
        if not any(n.endswith(".go") for n in names):
            continue
        probe = directory
        while True:
            if probe in seen:
                break
            module = _read_go_mod(root / probe / "go.mod")
            seen[probe] = module
            if module is not None:
                go_modules[module] = probe
                break
            if not probe:
                break
            probe = _dirname(probe)

    rust_crate_dirs = frozenset(
        directory for directory, names in dir_files.items() if "lib.rs" in names or "main.rs" in names
    )

    rust_crates = _rust_library_crates(root, dir_files)
    (ts_base_url, ts_paths), ts_dir_configs = _ts_configs(root, dir_files)

    return ResolveContext(
        root=root,
        files=file_set,
        dir_files=dict(dir_files),
        suffixes=dict(suffixes),
        python_roots=tuple(python_roots),
        go_modules=tuple(sorted(go_modules.items(), key=lambda kv: -len(kv[0]))),
        ts_base_url=ts_base_url,
        ts_paths=ts_paths,
        ts_dir_configs=ts_dir_configs,
        js_packages=_js_packages(root, file_set, dir_files),
        rust_crate_dirs=rust_crate_dirs,
        rust_crates=rust_crates,
    )


# TOML's whitespace within a line (space, tab): `\s*` after `^` would also cross blank lines, and every
# line of a run of them would scan the rest of the run again.
_CARGO_NAME = re.compile(r"^[ \t]*name[ \t]*=[ \t]*[\"']([^\"']+)[\"']", re.M)


def _toml_table(text: str, header: str) -> str | None:
    """The body of TOML table ``[header]``: up to the next line opening a
    table.  A table's values may hold arrays (``categories = ["a", "b"]``),
    so a ``[`` inside a line does not end it."""
    match = re.search(r"^\[" + re.escape(header) + r"\][^\n]*\n?(.*?)(?=^\[|\Z)", text, re.M | re.S)
    return match.group(1) if match else None


def _rust_library_crates(root: Path, dir_files: dict[str, list[str]]) -> dict[str, str]:
    """Library crates of a Cargo workspace, by the name other crates `use`
    them by (hyphens become underscores; `[lib] name` wins), mapped to the
    directory of their ``src/lib.rs``."""
    crates: dict[str, str] = {}
    for directory in sorted(dir_files):
        if directory.rsplit("/", 1)[-1] != "src" and directory != "src":
            continue
        if "lib.rs" not in dir_files[directory]:
            continue
        crate = _dirname(directory)
        try:
            text = (root / crate / "Cargo.toml").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        package = _toml_table(text, "package")
        lib = _toml_table(text, "lib")
        name = None
        if lib is not None and (m := _CARGO_NAME.search(lib)):
            name = m.group(1)
        elif package is not None and (m := _CARGO_NAME.search(package)):
            name = m.group(1)
        if name:
            crates.setdefault(name.replace("-", "_"), directory)
    return crates


def _unique_suffix(ctx: ResolveContext, suffix: str) -> str | None:
    hits = ctx.suffixes.get(suffix)
    return hits[0] if hits and len(hits) == 1 else None


def _dir_sources(ctx: ResolveContext, directory: str, exts: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[str]:
    names = ctx.dir_files.get(directory, [])
    return [
        _join(directory, n) for n in names if n.endswith(exts) and not n.endswith(skip)
    ]


# -- python ------------------------------------------------------------------


def _py_module_file(ctx: ResolveContext, base: str, dotted: str) -> str | None:
    key = (base, dotted)
    try:
        return ctx.py_memo[key]
    except KeyError:
        found = ctx.py_memo[key] = _py_module_lookup(ctx, base, dotted)
        return found


def _py_module_lookup(ctx: ResolveContext, base: str, dotted: str) -> str | None:
    if not dotted:  # the package itself, e.g. `from . import x` falling back
        candidates: tuple[str, ...] = (_join(base, "__init__.py"), _join(base, "__init__.pyi"))
    else:
        rel = _join(base, dotted.replace(".", "/"))
        candidates = (rel + ".py", rel + ".pyi", _join(rel, "__init__.py"), _join(rel, "__init__.pyi"))
    for candidate in candidates:
        if candidate in ctx.files:
            return candidate
    return None


def _py_absolute_bases(ctx: ResolveContext, here: str) -> tuple[str, ...]:
    """Where an absolute import of a file in directory ``here`` is looked for, in order."""
    bases = list(ctx.python_roots)
    # A script outside any package sees its own directory too.
    if _join(here, "__init__.py") not in ctx.files and here not in bases:
        bases.append(here)
    return tuple(bases)


def _resolve_python(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    module = imp.module
    submodule = imp.name if imp.name not in (None, "*") else None
    if module.startswith("."):
        level = len(module) - len(module.lstrip("."))
        rest = module[level:]
        package = _dirname(from_path)
        for _ in range(level - 1):
            if not package:
                return None
            package = _dirname(package)
        bases = [package]
    else:
        rest = module
        here = _dirname(from_path)
        bases = ctx.py_bases.get(here)
        if bases is None:
            bases = ctx.py_bases[here] = _py_absolute_bases(ctx, here)
    for base in bases:
        if submodule is not None:
            found = _py_module_file(ctx, base, f"{rest}.{submodule}" if rest else submodule)
            if found:
                return found
        found = _py_module_file(ctx, base, rest)
        if found:
            return found
    return None


# -- javascript / typescript -------------------------------------------------


def _js_probe(ctx: ResolveContext, target: str) -> str | None:
    return _js_probe_files(ctx.files, target)


def _js_probe_files(files: frozenset[str], target: str) -> str | None:
    if target in files:
        return target
    for ext, replacements in _JS_SWAP.items():
        if target.endswith(ext):
            stem = target[: -len(ext)]
            for replacement in replacements:
                if stem + replacement in files:
                    return stem + replacement
    for ext in _JS_EXTENSIONS:
        if target + ext in files:
            return target + ext
    for ext in _JS_EXTENSIONS:
        candidate = _join(target, "index" + ext)
        if candidate in files:
            return candidate
    return None


def _resolve_js(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    spec = imp.module.split("?", 1)[0]
    if spec.startswith(("./", "../")) or spec in (".", ".."):
        return _js_probe(ctx, _join(_dirname(from_path), spec))
    if spec.startswith("/"):
        return _js_probe(ctx, _join(spec.lstrip("/")))
    # A monorepo names its own packages as bare specifiers: tsconfig "paths"
    # first (what the compiler itself resolves), then the workspace's
    # package.json names, then baseUrl.
    base_url, ts_paths = ctx.ts_dir_configs.get(_dirname(from_path), (ctx.ts_base_url, ctx.ts_paths))
    for pattern, targets in ts_paths:
        if "*" in pattern:
            head, tail = pattern.split("*", 1)
            if not (spec.startswith(head) and spec.endswith(tail) and len(spec) >= len(head) + len(tail)):
                continue
            star = spec[len(head) : len(spec) - len(tail)]
        elif spec != pattern:
            continue
        else:
            star = ""
        for target in targets:
            hit = _js_probe(ctx, target.replace("*", star))
            if hit is not None:
                return hit
    for name, directory, entry in ctx.js_packages:
        if spec == name:
            if entry is not None:
                return entry
        elif spec.startswith(name + "/"):
            sub = spec[len(name) + 1 :]
            hit = _js_probe(ctx, _join(directory, sub)) or _js_probe(ctx, _join(directory, "src", sub))
            if hit is not None:
                return hit
    if base_url is not None:
        return _js_probe(ctx, _join(base_url, spec))
    return None


# -- go ----------------------------------------------------------------------


def _go_package_dir(imp: ImportFact, ctx: ResolveContext) -> str | None:
    for module, directory in ctx.go_modules:
        if imp.module == module or imp.module.startswith(module + "/"):
            return _join(directory, imp.module[len(module) :].lstrip("/"))
    return None


def _go_files(ctx: ResolveContext, directory: str) -> list[str]:
    return _dir_sources(ctx, directory, (".go",), ("_test.go",))


# -- rust --------------------------------------------------------------------


def _rust_crate_dir(ctx: ResolveContext, from_path: str) -> str | None:
    probe = _dirname(from_path)
    while True:
        if probe in ctx.rust_crate_dirs:
            return probe
        if not probe:
            return None
        probe = _dirname(probe)


def _rust_root_file(ctx: ResolveContext, crate_dir: str) -> str | None:
    for name in ("lib.rs", "main.rs"):
        candidate = _join(crate_dir, name)
        if candidate in ctx.files:
            return candidate
    return None


def _rust_module_of(from_path: str, crate_dir: str) -> list[str]:
    rel = posixpath.relpath(from_path, crate_dir or ".")
    parts = rel[:-3].split("/") if rel.endswith(".rs") else rel.split("/")
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return parts


def _rust_module_file(ctx: ResolveContext, crate_dir: str, segments: list[str]) -> str | None:
    if not segments:
        return _rust_root_file(ctx, crate_dir)
    base = _join(crate_dir, *segments)
    for candidate in (base + ".rs", _join(base, "mod.rs")):
        if candidate in ctx.files:
            return candidate
    return None


def _resolve_rust(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    if imp.module.startswith((".", "/")):
        # `#[path = "..."] mod x;`: rustc reads the file relative to the directory of the
        # file that declares the module (a module declared inside an inline `mod { }` block
        # is not told apart).
        target = posixpath.normpath(_join(_dirname(from_path), imp.module))
        return target if target in ctx.files else None  # (an absolute path is outside the project)
    path = [s for s in imp.module.split("::") if s]
    if imp.name not in (None, "*"):
        path.append(imp.name)
    if not path:
        return None
    crate_dir = _rust_crate_dir(ctx, from_path)
    if crate_dir is None:
        # Cargo's integration tests, examples and benches (`tests/*.rs`
        # beside `src/`) are each a crate whose root is the file itself: its
        # `mod x;` children sit in its directory, and it reaches the
        # package's library by the crate name.
        crate_dir, current = _dirname(from_path), []
    else:
        current = _rust_module_of(from_path, crate_dir)
    head, rest = path[0], path[1:]
    if head == "crate":
        segments: list[str] = []
    elif head == "self":
        segments = list(current)
    elif head == "super":
        segments = current[:-1]
        while rest and rest[0] == "super":
            segments = segments[:-1]
            rest = rest[1:]
    elif _rust_module_file(ctx, crate_dir, current + [head]) is not None:
        segments = list(current)  # `use child::Item` names a child module (2018 paths)
        rest = path
    elif head in ctx.rust_crates:  # another crate of the workspace
        crate_dir, segments = ctx.rust_crates[head], []
    else:
        return None  # std or a dependency outside the project
    best = _rust_module_file(ctx, crate_dir, segments)
    for segment in rest:
        segments = segments + [segment]
        found = _rust_module_file(ctx, crate_dir, segments)
        if found is None:
            break  # the rest are items inside the deepest module found
        best = found
    return best


# -- c / c++ -----------------------------------------------------------------


def _resolve_c(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    header = imp.module
    if header.startswith("<"):
        # `#include <lib.h>` searches the include path, not the including file's
        # folder: the project's own headers there (its root, `include/`, or a
        # path with a folder, `<fmt/core.h>`) -- a bare `<string.h>` found
        # deeper is a system header's namesake.
        header = header.strip("<>").strip()
        for candidate in (_join(header), _join("include", header)):
            if candidate in ctx.files:
                return candidate
        return _unique_suffix(ctx, posixpath.normpath(header)) if "/" in header else None
    for candidate in (_join(_dirname(from_path), header), _join(header), _join("include", header)):
        if candidate in ctx.files:
            return candidate
    return _unique_suffix(ctx, posixpath.normpath(header))


# -- java / c# / php ---------------------------------------------------------


def _dir_by_suffix(ctx: ResolveContext, dotted: list[str]) -> str | None:
    """The unique directory whose path ends with the given segments."""
    suffix = "/".join(dotted)
    matches = [d for d in ctx.dir_files if d == suffix or d.endswith("/" + suffix)]
    return matches[0] if len(matches) == 1 else None


def _java_class_file(ctx: ResolveContext, dotted: str) -> str | None:
    return _unique_suffix(ctx, dotted.replace(".", "/") + ".java")


def _java_package_files(imp: ImportFact, ctx: ResolveContext) -> list[str]:
    if imp.name != "*":
        return []
    directory = _dir_by_suffix(ctx, imp.module.split("."))
    return _dir_sources(ctx, directory, (".java",)) if directory is not None else []


def _resolve_java(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    if imp.name not in (None, "*"):
        found = _java_class_file(ctx, f"{imp.module}.{imp.name}")
        if found:
            return found
    # static imports name a member of the class `module`; `a.b.*` a package
    found = _java_class_file(ctx, imp.module)
    if found:
        return found
    files = _java_package_files(imp, ctx)
    return files[0] if files else None


def _csharp_files(imp: ImportFact, ctx: ResolveContext) -> list[str]:
    segments = imp.module.split(".")
    for start in range(len(segments)):
        directory = _dir_by_suffix(ctx, segments[start:])
        if directory is not None:
            return _dir_sources(ctx, directory, (".cs",))
    return []


def _resolve_csharp(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    # `using static A.B.C;` / `using X = A.B.C;` may name a class: C.cs
    segments = imp.module.split(".")
    for start in range(len(segments) - 1):
        found = _unique_suffix(ctx, "/".join(segments[start:]) + ".cs")
        if found:
            return found
    files = _csharp_files(imp, ctx)
    if files:
        return files[0]
    return _unique_suffix(ctx, segments[-1] + ".cs")


def _resolve_php(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    module = imp.module
    if module.endswith(".php") or "/" in module:
        for candidate in (_join(_dirname(from_path), module), _join(module)):
            if candidate in ctx.files:
                return candidate
        return _unique_suffix(ctx, posixpath.normpath(module.lstrip("./")))
    full = f"{module}\\{imp.name}" if imp.name else module
    segments = full.split("\\")
    # PSR-4 style: the longest path suffix that names exactly one file wins.
    for start in range(len(segments)):
        found = _unique_suffix(ctx, "/".join(segments[start:]) + ".php")
        if found:
            return found
    return None


# -- ruby --------------------------------------------------------------------


def _resolve_ruby(imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    spec = imp.module if imp.module.endswith(".rb") else imp.module + ".rb"
    if spec.startswith(("./", "../")):
        candidate = _join(_dirname(from_path), spec)
        return candidate if candidate in ctx.files else None
    for candidate in (_join("lib", spec), _join(spec)):
        if candidate in ctx.files:
            return candidate
    hits = [p for p in ctx.suffixes.get(spec, []) if p.endswith("lib/" + spec)]
    return hits[0] if len(hits) == 1 else None


_RESOLVERS = {
    "python": _resolve_python,
    "javascript": _resolve_js,
    "typescript": _resolve_js,
    "tsx": _resolve_js,
    "rust": _resolve_rust,
    "java": _resolve_java,
    "c": _resolve_c,
    "cpp": _resolve_c,
    "csharp": _resolve_csharp,
    "php": _resolve_php,
    "ruby": _resolve_ruby,
}


def resolve_import_all(language: str, imp: ImportFact, from_path: str, ctx: ResolveContext) -> list[str]:
    """Every project file the import brings in.

    Package-level imports (Go packages, Java ``a.b.*``, C# namespaces) name a
    directory of files; everything else names at most one file.
    """
    if language == "go":
        directory = _go_package_dir(imp, ctx)
        return _go_files(ctx, directory) if directory is not None else []
    if language == "java" and imp.name == "*":
        files = _java_package_files(imp, ctx)
        if files:
            return files
    if language == "csharp":
        files = _csharp_files(imp, ctx)
        if files:
            return files
    one = resolve_import(language, imp, from_path, ctx)
    return [one] if one is not None else []


def resolve_import(language: str, imp: ImportFact, from_path: str, ctx: ResolveContext) -> str | None:
    """The project-relative file ``imp`` refers to, or None if it is outside the project.

    For a Go package (a directory) the representative file is the first
    non-test ``.go`` file in sorted order; ``resolve_import_all`` lists them all.
    """
    if language == "go":
        directory = _go_package_dir(imp, ctx)
        if directory is None:
            return None
        files = _go_files(ctx, directory)
        return files[0] if files else None
    resolver = _RESOLVERS.get(language)
    if resolver is None:
        return None
    result = resolver(imp, from_path, ctx)
    return result if result != from_path else None
