"""The project's dependency graph, built from storage and kept in step with it.

Nodes are files (id = project-relative path) and symbols (id =
``"path::qualname"``).  Edges live in a ``networkx.MultiDiGraph`` keyed by
kind, with a ``weight`` counting how many references back them:

==========  ==========================  ===================================
kind        from -> to                  meaning
==========  ==========================  ===================================
contains    file -> symbol,             the symbol is defined there
            symbol -> nested symbol
imports     file -> file                the source imports the target
calls       symbol|file -> symbol       a call (or constructor call)
references  symbol|file -> symbol       a type use (annotation, field type)
inherits    class -> class              base class / implemented interface
==========  ==========================  ===================================

References are resolved in this order: the enclosing class for
``self``/``this`` receivers (and its bases), the file's import bindings
(aliases, ``from x import y``, module receivers such as ``mod.f()``), the
file's own definitions (the package's, for Go), and finally a name defined
exactly once in the project.  Anything else stays unresolved rather than
guessed.
"""

from __future__ import annotations

import builtins
import itertools
import posixpath
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from memstrata.storage import Store
from memstrata.storage import code_index as ci

from .graph_view import Adjacent, GraphQueries, GraphView, Neighbor
from .model import REF_EDGE
from .scan import is_test_module

FILE = "file"
SYMBOL = "symbol"
EDGE_KINDS = ("contains", "imports", "calls", "references", "inherits")
_SELF = frozenset({"self", "this", "cls", "$this", "static", "Self", "super()", "super"})
_CLASSLIKE = frozenset({"class", "struct", "interface", "enum", "type"})
# What a call reaches members of through its name (`Cls.create()`): a type, or a module
# defined in a file (a TypeScript namespace's `Geometry.area()`, a Rust inline `mod`'s `io::f()`).
_MEMBER_HOLDERS = _CLASSLIKE | {"module"}
_WILDCARD = "*"
_JS_LIKE = frozenset({"javascript", "typescript", "tsx"})
# Python's builtin names: a bare call of one that nothing in its file defines or imports is
# the builtin's.
_PY_BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))
_BIND = "bind"  # a reference row that says what a variable is declared as (indexer/model.py)
_DEFAULT = "default"  # the variable a bind row of `export default name` declares (queries/*.scm)
_MEMBER = "member"  # a method linked to its type in another file (graph-internal ref kind)
# What a method is found through: base classes, and methods defined away from their type.  They
# are resolved for every file before the rest, so a call reaching an inherited method does not
# depend on the order files are resolved in.
_LINKS = frozenset({"inherit", _MEMBER})
_PHASES = ("links", "uses")

STEP_S = 0.002  # how long a background build runs between two calls of its pause


class _Paced:
    """A background build's pause, called after every row or reference but
    passed on only once ``STEP_S`` has gone by: steps of the same length
    whatever a row costs (one reference may take a millisecond to resolve
    through a deep class hierarchy, a thousand others no more than that)."""

    __slots__ = ("pause", "since")

    def __init__(self, pause: Callable[[], None]):
        self.pause = pause
        self.since = time.perf_counter()

    def __call__(self) -> None:
        if time.perf_counter() - self.since >= STEP_S:
            self.pause()
            self.since = time.perf_counter()


def _in_steps(rows: list, pause: Callable[[], None] | None) -> Iterable:
    """``rows``, with ``pause`` called before each (when there is one)."""
    if pause is None:
        return rows
    return _paced(rows, pause)


def _paced(rows: list, pause: Callable[[], None]) -> Iterator:
    for row in rows:
        pause()
        yield row


# Where a class's fields are also declared: its constructor's parameters of the same name.
_INITIALISERS = ("__init__", "constructor")
# Languages whose package is a directory: its files see each other's top-level names unimported.
_PACKAGE_IS_DIRECTORY = {"go": ".go", "java": ".java"}
# Languages where a bare name reaches only what is in scope (a top-level definition, or one
# of the caller's own enclosing scopes): a method needs a receiver (`self.`, `this.`, `$this->`,
# `Type::`).  Java, C#, C++, Kotlin and Ruby call their own and inherited methods bare.
_EXPLICIT_RECEIVER = frozenset({"python", "javascript", "typescript", "tsx", "rust", "go", "php", "c"})
# Languages where a call on an object (`x.m()`) can only mean a method: a free function is reached
# through a module, never through a value.  (C calls through function-pointer fields, and
# JavaScript objects hold functions: see _value_receiver.)
_VALUE_RECEIVERS = frozenset({"python", "go", "rust"})
# The Rust crates every project links without naming them in Cargo.toml.
_RUST_STD = frozenset({"std", "core", "alloc"})
# Import spellings that stay inside the project even when no file was found for them: relative
# paths and path aliases (`@/x`, `~/x`, Node's `#x`); Rust's `crate::`, `self::`, `super::` are
# _RELATIVE_HEADS.
_PROJECT_SPELLINGS = (".", "/", "~", "@/", "#")
# Re-export hops followed from an import to a definition (see _member).
_REEXPORT_HOPS = 8
# Versions are unique across graph instances, so a cache keyed by version
# can never mistake a new graph for an old one that happened to share an id.
_VERSIONS = itertools.count(1)


# Builtin types written in lower case, which name a type as a receiver (`i32::from`, `str.join`).
_LOWER_TYPES = frozenset("i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str "
                         "int float bytes list dict set tuple frozenset object string number".split())


# A Rust path that may name a module (`sys`, `crate::util`, `super::x`, `facade::inner`).
_RUST_PATH = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
# The type a Rust function signature returns, when it is a plain path (`-> Self`, `-> Queue<T>`;
# not `-> Result<Self, E>`).
_RETURNS = re.compile(r"->\s*([\w:]+)(?:<.*>)?\s*(?:where\b.*|\{.*)?$", re.S)
# ... and what the Result or Option it returns holds (`-> io::Result<Self>`, `-> Option<Queue<T>>`).
_RETURNS_WRAPPED = re.compile(r"->\s*(?:[\w:]+::)?(?:Result|Option)\s*<\s*([\w:]+)")
_TYPE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _type_parts(type_name: str) -> list[str]:
    """The names a bind row's type is spelled with: `Queue::new` -> Queue, new; `Queue::open?` ->
    Queue, open; `ns.Store` -> ns, Store."""
    return _TYPE_PARTS.split(type_name)


_TYPE_PARTS = re.compile(r"::|\.|\?")


def _names_type(receiver: str) -> bool:
    """Whether a call's receiver is written as a type name (a capitalised last segment, or a
    builtin type), not as a value whose type the index cannot know."""
    if not _TYPE_PATH.fullmatch(receiver):
        return False  # `Service().login()`, `items[0].keys()`: a value
    last = receiver.rsplit(".", 1)[-1]
    return last[:1].isupper() or last in _LOWER_TYPES


def _last_part(module: str) -> str:
    """The last name of a module path however it is spelled (`a.b`, `a::b`, `a/b`, `a\\b`)."""
    return re.split(r"::|[./\\]", module.rstrip("/"))[-1] if module else ""


# The file that stands for its directory's module: Rust `mod.rs` / `lib.rs` / `main.rs`, Python
# `__init__.py`, a JavaScript `index.js`.
_MODULE_FILES = frozenset({"mod", "lib", "main", "__init__", "index"})
# Path heads that name no module directory: Rust's `crate::`, `self::`, `super::`.
_RELATIVE_HEADS = frozenset({"crate", "self", "super", ""})


def _at_module_path(classes: list[str], module: str) -> list[str]:
    """Of several types of one name, those the module path a call spells (`flavors::tick` in
    `flavors::tick::Channel::new()`, `pkg.sub` in `pkg.sub.Reader.open()`) points at most
    closely: most trailing segments in common with the type's file (or its directory: a Go
    package is one) and the modules it is nested in.  All of them when the path matches none."""
    wanted = [p for p in module.split(".") if p not in _RELATIVE_HEADS]
    if not wanted:
        return classes
    best, scored = 0, []
    for cls in classes:
        path, qualname = split_symbol_id(cls)
        stem = posixpath.splitext(path)[0].split("/")
        if stem[-1] in _MODULE_FILES:
            stem.pop()
        nesting = qualname.split(".")[:-1]
        score = max(_common_tail([*stem, *nesting], wanted), _common_tail([*stem[:-1], *nesting], wanted))
        best = max(best, score)
        scored.append((score, cls))
    return [cls for score, cls in scored if score == best] if best else classes


def _common_tail(have: list[str], wanted: list[str]) -> int:
    """How many trailing segments ``have`` and ``wanted`` share (`-` and `_` alike: a crate
    directory `crossbeam-channel` is `crossbeam_channel` in code)."""
    n = 0
    while n < len(have) and n < len(wanted) and have[-1 - n].replace("-", "_") == wanted[-1 - n].replace("-", "_"):
        n += 1
    return n


def _qual_ends(qualname: str, suffix: str) -> bool:
    return qualname == suffix or qualname.endswith("." + suffix)


def symbol_id(path: str, qualname: str) -> str:
    return f"{path}::{qualname}"


def split_symbol_id(node: str) -> tuple[str, str]:
    path, _, qual = node.partition("::")
    return path, qual


class _Bindings:
    """What names a file's imports bring into scope."""

    __slots__ = ("names", "modules", "wildcards", "imported", "external", "submodules")

    def __init__(self) -> None:
        self.names: dict[str, tuple[str, str | None]] = {}  # local name -> (target file, member)
        self.modules: dict[str, str] = {}  # dotted module spelling -> target file
        self.wildcards: list[str] = []  # files whose top-level names are all visible
        # local name -> the name it imports (`use std::path::PathBuf`, `using H = Acme.Util.Hasher`),
        # whether or not a project file was found for it: what a type-named receiver stands for
        self.imported: dict[str, str] = {}
        # local names bound only by imports that no project file answers (`import fmt`,
        # `import pytest`, `import * as assert from "assert"`): a library's
        self.external: set[str] = set()
        self.submodules: dict[str, str] = {}  # Rust `mod x;` (or `#[path] mod x;`) -> x's file


class CodeGraph(GraphQueries):
    """In-memory dependency graph over one project's index; the only graph
    that can be refreshed (it implements :class:`GraphView`)."""

    def __init__(self) -> None:
        import networkx as nx  # here, not at the top: a snapshot graph never needs it (0.1 s to import)

        self.g = nx.MultiDiGraph()
        self._by_name: dict[str, set[str]] = defaultdict(set)
        self._file_symbols: dict[str, list[str]] = {}
        self._bindings: dict[str, _Bindings] = {}
        self._refs: dict[str, list[tuple]] = {}  # path -> [(id, scope, name, kind, receiver, count)]
        # path -> the target the index holds for each of _refs[path] (same order): what a
        # resolution is compared with to know which rows to write (see take_resolved_targets)
        self._saved: dict[str, list[str | None]] = {}
        # path -> {(scope, variable): type name}: what a parameter, variable or field is declared
        # as (`bind` rows), for the calls made on it
        self._declared: dict[str, dict[tuple[str | None, str], str]] = {}
        # (path, scope, variable) being looked up through its declared type just now: a variable
        # declared through its own name or a cycle of names (`ts: ts.Node`) names no class so
        self._declaring: set[tuple[str, str | None, str]] = set()
        self._ref_edges: dict[str, list[tuple[str, str, str, float] | None]] = {}
        # node -> files whose reference edges start or end at it (some may since point elsewhere):
        # when a node goes, the edges it takes with it are found in those files alone.  Built at
        # the first refresh (a graph that is only read never needs it), kept up to date after.
        self._edge_files: defaultdict[str, set[str]] | None = None
        self._name_users: dict[str, set[str]] = defaultdict(set)
        self._dir_files: dict[str, set[str]] = defaultdict(set)
        self._mod_parents: dict[str, set[str]] = defaultdict(set)  # Rust module file -> files declaring it
        self._crates: tuple[int, dict[str, str]] = (0, {})  # (graph version, _rust_crates())
        self._module_names: tuple[int, set[str]] = (0, set())  # (graph version, _rust_module_names())
        self._pending_targets: dict[int, str | None] = {}
        self._by_db_id: dict[int, str] = {}
        self._adj_cache: dict[str, list[Adjacent]] = {}  # node -> adjacency(node), dropped when its edges change
        self.test_files: set[str] = set()
        self.test_symbols: set[str] = set()  # test code inside a source file (a Rust `mod tests`)
        self.version = next(_VERSIONS)  # renewed on every change, for caches built over the graph
        self.generation: str | None = None  # the store's code generation this graph reflects

    # -- building -------------------------------------------------------------

    @classmethod
    def load(cls, store: Store, pause: Callable[[], None] | None = None) -> "CodeGraph":
        """The whole graph from the index rows.  ``pause``, when given, is called
        between steps of a few milliseconds: a build in the background of a
        server passes one that waits while a question is answered, since both
        share one interpreter lock (and the store).  A step that runs on when a
        question arrives slows that question down for as long as it lasts.
        Raises :class:`storage.code_index.RowsMoved` when, with ``pause``, the
        index changed while its rows were read."""
        if pause is not None:
            pause()  # the first graph of a process imports networkx, a step of its own
            pause = _Paced(pause)
        graph = cls()
        if pause is None:
            with store.read():
                graph.generation = ci.code_generation(store)
                files = ci.load_files(store)
                symbols = ci.load_symbols(store)
                imports = ci.load_imports(store)
                refs = ci.load_refs(store)
        else:
            graph.generation, files, symbols, imports, refs = ci.load_graph_rows_in_pages(store, pause)
        graph._add_files(files, symbols, imports, refs, pause)
        paths = [f[0] for f in files]
        reset: set[str] = set()
        for phase in _PHASES:  # every file's links first: a method found through a base needs them
            graph._resolve_files(paths, phase=phase, reset=reset, pause=pause)
        if pause is not None:
            # A million rows freed at once is a step of tens of milliseconds: free them in steps.
            for rows in (refs, symbols, imports, files):
                while rows:
                    del rows[-500:]
                    pause()
        return graph

    def refresh(self, store: Store, changed: Iterable[str] = (), removed: Iterable[str] = ()) -> set[str]:
        """Bring the given files up to date with storage; returns every file whose edges changed."""
        changed = sorted(set(changed))
        removed = sorted(set(removed) - set(changed))
        added = [p for p in changed if p not in self.g]
        rebound: set[str] = set()
        if added or removed:
            rebound = self._rebound_files(store, set(changed) | set(removed))
            changed = sorted(set(changed) | rebound)
        keep = set(changed) | set(removed)
        incoming = [(u, v, w) for v in changed if v in self.g
                    for u, _, k, w in self.g.in_edges(v, keys=True, data="weight")
                    if k == "imports" and u not in keep]
        old_names: set[str] = set()
        cut = self._cut_edges(keep)
        for path in [*changed, *removed]:
            old_names |= self._defined_names(path)
            self._drop_file(path)
        with store.read():
            files = ci.load_files(store, changed) if changed else []
            present = [f[0] for f in files]
            symbols = ci.load_symbols(store, present) if present else []
            imports = ci.load_imports(store, present) if present else []
            refs = ci.load_refs(store, present) if present else []
        self._add_files(files, symbols, imports, refs)
        for u, v, w in incoming:
            if v in self.g and u in self.g:
                self._inc_edge(u, v, "imports", w)
        new_names: set[str] = set()
        for path in present:
            new_names |= self._defined_names(path)
        self.version = next(_VERSIONS)
        touched = set(present) | set(removed)
        # Other files' references to names that appeared or disappeared may now
        # resolve differently; names defined both before and after keep their
        # node ids, but their edges went with the dropped nodes, so re-resolve
        # every user of any name the changed files define(d).
        dependents: set[str] = set()
        for name in old_names | new_names:
            dependents |= self._name_users.get(name, set())
        dependents |= cut.keys()
        dependents -= set(present)
        dependents &= self._refs.keys()
        reset: set[str] = set()
        for phase in _PHASES:
            self._resolve_files(present, phase=phase, reset=reset)
            if dependents:
                self._resolve_files(sorted(dependents), only_names=old_names | new_names, cut=cut,
                                    phase=phase, reset=reset)
        return touched | dependents

    def _cut_edges(self, paths: set[str]) -> dict[str, dict[int, str | None]]:
        """Forget the reference edges of other files that start or end at a node of ``paths``:
        dropping those nodes takes the edges with them, so nothing is to be subtracted from them
        later (several references share one weighted edge, and subtracting one reference's
        count from an edge another has already re-added lost the difference).  Returns, per
        file, the references cut and the target each had, to be resolved again whatever their
        name: a reference spelled by an alias (`import x as y`) carries no name that changed."""
        if self._edge_files is None:
            self._edge_files = defaultdict(set)
            for path, edges in self._ref_edges.items():
                for edge in edges:
                    if edge is not None:
                        self._edge_files[edge[0]].add(path)
                        self._edge_files[edge[1]].add(path)
        dropped: set[str] = set()
        for path in paths:
            if path in self.g:
                dropped.add(path)
                dropped.update(self._file_symbols.get(path, ()))
        files: set[str] = set()
        for node in dropped:
            files |= self._edge_files.pop(node, set())
        cut: dict[str, dict[int, str | None]] = {}
        for path in files - paths:
            edges = self._ref_edges.get(path)
            for i, edge in enumerate(edges or ()):
                if edge is not None and (edge[0] in dropped or edge[1] in dropped):
                    edges[i] = None
                    cut.setdefault(path, {})[i] = edge[1]
        return cut

    def _rebound_files(self, store, skip: set[str]) -> set[str]:
        """Files whose stored import targets differ from their import edges here
        (another file's appearance or removal re-pointed their imports)."""
        want: dict[str, Counter] = defaultdict(Counter)
        for path, module, name, alias, line, target in ci.load_imports(store):
            if target is not None and target != path:
                want[path][target] += 1
        out = set()
        for path in self._file_symbols:
            if path in skip:
                continue
            have = Counter({v: w for _, v, k, w in self.g.out_edges(path, keys=True, data="weight") if k == "imports"})
            if have != want.get(path, Counter()):
                out.add(path)
        return out

    def _defined_names(self, path: str) -> set[str]:
        """The names ``path`` defines: its symbols', and the Rust modules it declares (`mod x;`),
        which other files' calls spell in their paths (`crate::x::f()`, `super::x::f()`)."""
        names = {self.g.nodes[n]["name"] for n in self._file_symbols.get(path, ()) if n in self.g}
        b = self._bindings.get(path)
        return names | b.submodules.keys() if b is not None else names

    def _drop_file(self, path: str) -> None:
        for edge in filter(None, self._ref_edges.pop(path, [])):
            self._dec_edge(*edge)
        self._saved.pop(path, None)
        for ref in self._refs.pop(path, []):
            # A row that goes takes its unwritten target along (a rewritten file's ids may be reused).
            self._pending_targets.pop(ref[0], None)
            for name in (ref[2], *_path_modules(ref[4])):
                users = self._name_users.get(name)
                if users is not None:
                    users.discard(path)
        for node in self._file_symbols.pop(path, []):
            name = self.g.nodes[node]["name"] if node in self.g else None
            if name is not None:
                self._by_name[name].discard(node)
                if not self._by_name[name]:
                    del self._by_name[name]
            self.test_symbols.discard(node)
            if node in self.g:
                self._by_db_id.pop(self.g.nodes[node].get("db_id"), None)
                self._remove_node(node)
        for module in self._bindings.pop(path, _Bindings()).submodules.values():
            self._mod_parents[module].discard(path)
        self._declared.pop(path, None)
        self.test_files.discard(path)
        if path in self.g:
            self._remove_node(path)
        self._dir_files[posixpath.dirname(path)].discard(path)

    def _add_files(self, files, symbols, imports, refs, pause: Callable[[], None] | None = None) -> None:
        g = self.g
        members: list[tuple[str, str, str]] = []  # (path, owner qualname, symbol node)
        languages: dict[str, str] = {}
        test_modules: dict[str, list[str]] = defaultdict(list)  # path -> qualnames of its inline test modules
        for path, language, is_test, lines, status in files:
            languages[path] = language
            g.add_node(path, type=FILE, path=path, language=language, is_test=bool(is_test),
                       lines=lines, status=status)
            if is_test:
                self.test_files.add(path)
            self._file_symbols[path] = []
            self._bindings[path] = _Bindings()
            self._refs[path] = []
            self._saved[path] = []
            self._declared[path] = {}
            self._dir_files[posixpath.dirname(path)].add(path)
        for sid, path, name, qualname, kind, parent, start, end, sig, doc in _in_steps(symbols, pause):
            node = symbol_id(path, qualname)
            if node in g:  # same qualname twice in a file (redefinition): keep the first
                continue
            g.add_node(node, type=SYMBOL, path=path, name=name, qualname=qualname, kind=kind,
                       start_line=start, end_line=end, signature=sig, doc=doc, db_id=sid)
            self._file_symbols[path].append(node)
            if is_test_module(languages.get(path), kind, name):
                test_modules[path].append(qualname)
            self._by_name[name].add(node)
            self._by_db_id[sid] = node
            parent_node = symbol_id(path, parent) if parent else None
            container = parent_node if parent_node and parent_node in g else path
            g.add_edge(container, node, key="contains", weight=1.0)
            self._adj_cache.pop(container, None)
            owner = parent or (qualname.rsplit(".", 1)[0] if "." in qualname else None)
            if owner and container == path and symbol_id(path, owner) not in g:
                members.append((path, owner, node))
        for path, modules in test_modules.items():
            for node in self._file_symbols[path]:
                qualname = split_symbol_id(node)[1]
                if any(qualname == m or qualname.startswith(m + ".") for m in modules):
                    self.test_symbols.add(node)
        for path, module, name, alias, line, target in _in_steps(imports, pause):
            b = self._bindings[path]
            declared = _rust_mod_declared(module, name, alias) if languages.get(path) == "rust" else None
            if declared:  # a module declaration binds no name of its own: it links the file
                if target is not None and target != path:
                    self._inc_edge(path, target, "imports")
                    b.submodules[declared] = target
                    self._mod_parents[target].add(path)
                continue
            imported = name if name and name != _WILDCARD else _last_part(module)
            if imported:
                b.imported[alias or imported] = imported
                if alias:  # `import x as y`: the file uses the name x under another spelling
                    self._name_users[imported].add(path)
            if target is None:
                local = _bound_name(languages.get(path), module, name, alias)
                if local:
                    b.external.add(local)
                continue
            if target != path:
                self._inc_edge(path, target, "imports")
            if name == _WILDCARD or (name is None and alias is None and not _dotted(module)):
                b.wildcards.append(target)
            if name is not None and name != _WILDCARD:
                b.names[alias or name] = (target, name)
            elif alias:
                b.names[alias] = (target, None)
            else:
                b.modules[module] = target
                head = _module_head(module)
                if head:
                    b.names.setdefault(head, (target, None))
        for row in _in_steps(refs, pause):
            path, scope = row[1], row[2]
            if row[4] == _BIND:
                var = row[5]
                if scope and scope.rsplit(".", 1)[-1] == var:  # a field that is a definition itself
                    scope = scope.rsplit(".", 1)[0] if "." in scope else None
                self._declared[path].setdefault((scope, var), row[3])
                for type_name in _type_parts(row[3]):  # `Queue::new`: the type and what builds it
                    self._name_users[type_name].add(path)
                continue
            self._refs[path].append((row[0], scope, row[3], row[4], row[5], float(row[7])))
            self._saved[path].append(row[8] if len(row) > 8 else None)
            self._name_users[row[3]].add(path)
            for module in _path_modules(row[5]):
                self._name_users[module].add(path)  # `crate::x::f()` uses module x (_defined_names)
            if scope and symbol_id(path, scope) not in g:
                # A ref from `impl Trait for T` where T lives in another file.
                self._name_users[scope.split(".", 1)[0]].add(path)
        for path, owner, node in members:
            # A method whose type is defined in another file (a Rust impl, a
            # Go or C++ method, `Foo.prototype.m = ...`): linked to the type by name.
            name = owner.rsplit(".", 1)[-1]
            self._refs[path].append((None, split_symbol_id(node)[1], name, _MEMBER, None, 1.0))
            self._saved[path].append(None)
            self._name_users[name].add(path)

    def _resolve_files(self, paths: Iterable[str], only_names: set[str] | None = None,
                       cut: dict[str, dict[int, str | None]] | None = None, phase: str | None = None,
                       reset: set[str] | None = None, pause: Callable[[], None] | None = None) -> None:
        """Resolve the references of ``paths`` (all of them, or with ``only_names`` those a change
        to these names can move, plus those ``cut`` lists).  ``phase``: the links a method is
        found through (base classes, methods defined away from their type) or the rest; None
        both.  ``reset`` collects the files resolved afresh in the first phase, for the second.
        ``pause``: as for :meth:`load`.  A reference whose target differs from the one the index
        holds for it is queued for :meth:`take_resolved_targets`."""
        users = self._edge_files
        reset = set() if reset is None else reset
        for path in paths:
            refs = self._refs.get(path)
            if refs is None:
                continue
            edges = self._ref_edges.get(path)
            saved = self._saved[path]
            was = (cut or {}).get(path, {})  # references whose edges went with their nodes: target before
            if edges is None or len(edges) != len(refs):
                edges = self._ref_edges[path] = [None] * len(refs)
                reset.add(path)
            only = None if path in reset else only_names
            aliased: set[str] = set()
            typed = False
            if only is not None:
                # A call spelled by an alias of a changed name, or made on a variable declared
                # with a changed type, carries no changed name of its own.
                b = self._bindings.get(path)
                aliased = {a for a, n in b.imported.items() if n in only and a != n} if b else set()
                typed = any(not only.isdisjoint(_type_parts(t)) for t in (self._declared.get(path) or {}).values())
            for i, (rid, scope, name, kind, receiver, count) in enumerate(refs):
                if pause is not None:
                    pause()
                if phase is not None and (kind in _LINKS) != (phase == _PHASES[0]):
                    continue
                if (only is not None and i not in was and name not in only and name not in aliased
                        and not (typed and receiver)
                        and not (receiver and _field_chain(receiver))
                        and not (receiver and receiver.replace("::", ".").rsplit(".", 1)[-1] in only)
                        and only.isdisjoint(_path_modules(receiver))
                        and (not scope or scope.split(".", 1)[0] not in only)):
                    continue
                old = edges[i]
                if old is not None:
                    self._dec_edge(*old)
                if kind == _MEMBER:
                    edges[i] = self._link_member(path, scope, name)
                    if edges[i] is not None and users is not None:
                        users[edges[i][0]].add(path)
                        users[edges[i][1]].add(path)
                    continue
                target = self._resolve(path, scope, name, kind, receiver)
                if target is None:
                    edges[i] = None
                else:
                    src = self._scope_source(path, scope)
                    edge_kind = REF_EDGE.get(kind, "references")
                    if src == target:
                        edges[i] = None
                    else:
                        self._inc_edge(src, target, edge_kind, count)
                        edges[i] = (src, target, edge_kind, count)
                        if users is not None:
                            users[src].add(path)
                            users[target].add(path)
                # Compared with the stored target, not with the edge before: a reference to its
                # own scope makes no edge, and a graph built from rows had none to compare with.
                if saved[i] != target:
                    self._pending_targets[rid] = target
                saved[i] = target  # (the node's own string: the row's copy is freed)

    def _scope_source(self, path: str, scope: str | None) -> str:
        """The node a reference from ``scope`` starts at: the scope's symbol, or
        for `impl Trait for T` with T defined elsewhere, T's definition."""
        if not scope:
            return path
        node = symbol_id(path, scope)
        if node in self.g:
            return node
        head = scope.split(".", 1)[0]
        if symbol_id(path, head) not in self.g:
            owner = self._resolve(path, None, head, "type", None)
            if owner is not None and self.g.nodes[owner].get("kind") in _CLASSLIKE:
                return owner
        return path

    def _link_member(self, path: str, qualname: str, owner_name: str) -> tuple | None:
        """A contains edge from the type ``owner_name`` resolves to (in another
        file) to the method ``qualname`` of ``path``."""
        node = symbol_id(path, qualname)
        owner = self._resolve(path, None, owner_name, "type", None)
        if owner is None or owner == node or node not in self.g:
            return None
        kind = self.g.nodes[owner].get("kind")
        js = self.g.nodes[path].get("language") in _JS_LIKE
        if kind not in _CLASSLIKE and not (js and kind == "function"):
            return None
        self._inc_edge(owner, node, "contains", 1.0)
        return (owner, node, "contains", 1.0)

    def _remove_node(self, node: str) -> None:
        self._adj_cache.pop(node, None)
        for nb in (*self.g.successors(node), *self.g.predecessors(node)):
            self._adj_cache.pop(nb, None)
        self.g.remove_node(node)

    def _inc_edge(self, src: str, dst: str, kind: str, count: float = 1.0) -> None:
        self._adj_cache.pop(src, None)
        self._adj_cache.pop(dst, None)
        data = self.g.get_edge_data(src, dst, key=kind)
        if data is None:
            self.g.add_edge(src, dst, key=kind, weight=count)
        else:
            data["weight"] += count

    def _dec_edge(self, src: str, dst: str, kind: str, count: float = 1.0) -> None:
        self._adj_cache.pop(src, None)
        self._adj_cache.pop(dst, None)
        data = self.g.get_edge_data(src, dst, key=kind)
        if data is None:
            return
        data["weight"] -= count
        if data["weight"] <= 0:
            self.g.remove_edge(src, dst, key=kind)

    # -- resolution -----------------------------------------------------------

    def _resolve(self, path: str, scope: str | None, name: str, kind: str, receiver: str | None) -> str | None:
        candidates = self._by_name.get(name, set())
        if kind == "type" and self.g.nodes[path].get("language") == "csharp":
            # In C# a type's name is a type's (not an enum member's or a property's), and an
            # attribute is written without its class's `Attribute` suffix (`[Option]`).
            types = {c for c in candidates if self.g.nodes[c].get("kind") in _CLASSLIKE}
            if not types and not receiver:
                name += "Attribute"
                types = {c for c in self._by_name.get(name, ()) if self.g.nodes[c].get("kind") in _CLASSLIKE}
            candidates = types
        elif kind == "type" and len(candidates) > 1 and self.g.nodes[path].get("language") == "cpp":
            # A C++ class and its constructors share a name; a type names the class.
            candidates = {c for c in candidates if self.g.nodes[c].get("kind") in _CLASSLIKE} or candidates
        if receiver:
            return self._resolve_member(path, scope, name, receiver, candidates) if candidates else None
        bindings = self._bindings.get(path)
        if bindings is not None:
            bound = bindings.names.get(name)
            if bound is not None:
                hit = self._member(bound[0], bound[1] or name)
                if hit is None and bound[1] is None:  # a whole module called: its default export
                    hit = self._default_export(bound[0])
                if hit:
                    return hit
        if not candidates:
            return None
        language = self.g.nodes[path].get("language")
        local = self._local(path, scope, name)
        if local and not self._names_bare(language, local):
            local = None
        if local and (local in candidates or kind != "type" or language != "csharp"):
            return local  # (a C# type's name is a type's: not a property `Color Color`)
        if bindings is not None:
            for target in bindings.wildcards:
                hit = self._member(target, name)
                if hit:
                    return hit
        if bindings is not None and name in bindings.external:
            return None  # imported from a library (`from html import escape`): not the project's namesake
        if language == "python" and name in _PY_BUILTINS:
            return None  # `open()`, `map()`: the builtin, not a project function of that name
        if language in _EXPLICIT_RECEIVER:
            # Elsewhere in the project a bare name can only mean a top-level definition (a
            # parameter or a local called bare -- `fail(cxt)` -- is no method of some class).
            candidates = {c for c in candidates
                          if "." not in self.g.nodes[c]["qualname"] and self._names_bare(language, c)}
        if len(candidates) > 1:
            candidates = self._without_constructors(candidates)
        return self._unique_outside_tests(path, scope, candidates) if candidates else None

    def _names_bare(self, language: str | None, node: str) -> bool:
        """Whether a bare name in ``language`` can mean ``node``: a JavaScript/TypeScript
        identifier names a binding of its scope chain, never a member -- a class's method, or an
        object literal's property, whose qualname names no owner when the object has no name
        (`Object.assign(x, { f: (o) => f(o) })` calls the `f` in scope, not itself)."""
        return not (language in _JS_LIKE and self.g.nodes[node].get("kind") == "method")

    def _without_constructors(self, candidates: set[str]) -> set[str]:
        """``candidates`` less the constructors of a class among them: a class's name names its
        constructors too (Java, C#, C++), and a use of the name (`new Builder()`, a `Builder`
        parameter) is a use of the class."""
        types = {c for c in candidates if self.g.nodes[c].get("kind") in _CLASSLIKE}
        if not types:
            return candidates
        return {c for c in candidates if c in types or _owner(c) not in types}

    def _from_tests(self, path: str, scope: str | None) -> bool:
        """Whether a reference from ``scope`` of ``path`` is made by test code: a test file's, or
        a source file's inline test module's (a Rust `mod tests`)."""
        if path in self.test_files:
            return True
        if not scope or not self.test_symbols:
            return False
        return (symbol_id(path, scope) in self.test_symbols
                or symbol_id(path, scope.split(".", 1)[0]) in self.test_symbols)

    def _in_tests(self, node: str) -> bool:
        return node in self.test_symbols or node.split("::", 1)[0] in self.test_files

    def _outside_tests(self, path: str, scope: str | None, candidates: Iterable[str]) -> list[str]:
        """``candidates`` a reference from ``scope`` of ``path`` can mean when its name alone
        picks the definition: production code does not call into test code (a Rust `mod tests`
        is not even compiled without it), so a test's namesake is no candidate from outside the
        tests."""
        if self._from_tests(path, scope):
            return list(candidates)
        return [c for c in candidates if not self._in_tests(c)]

    def _unique_outside_tests(self, path: str, scope: str | None, candidates: set[str]) -> str | None:
        """:meth:`_unique` of :meth:`_outside_tests`, without walking a common name's thousands of
        definitions: it stops at the second one that counts."""
        if len(candidates) == 1:
            only = next(iter(candidates))
            return only if not self._in_tests(only) or self._from_tests(path, scope) else None
        if self._from_tests(path, scope):
            return self._unique(candidates)
        found = None
        for c in candidates:
            if not self._in_tests(c):
                if found is not None:
                    return None
                found = c
        return found

    def _resolve_member(self, path, scope, name, receiver, candidates) -> str | None:
        if receiver in _SELF or receiver.startswith("super("):
            cls = self._enclosing_class(path, scope)
            if cls is not None:
                if receiver == "super" or receiver.startswith("super("):
                    # `super.m()` / `super().m()` is the base class's method, never the caller's
                    # own override: searched from the bases, and nothing of the project's when
                    # they do not define it (a library's base class, `object`).
                    return self._method_in_bases(cls, name)
                hit = self._method_in_hierarchy(cls, name)
                if hit:
                    return hit
            elif (owner := self._impl_type(path, scope)) is not None:
                # `self.m()` in a Rust impl for a type the project does not define (`impl Trait
                # for Vec<u8>`, `impl<T: Trait> Other for T`): a method of an impl for that same
                # type, or a trait's (a default method), never another type's that shares the name.
                # The impl's own type first: its method implements the trait's declaration.
                own: set[str] = set()
                traits: set[str] = set()
                for c in candidates:
                    qual = self.g.nodes[c]["qualname"]
                    holder = qual.rsplit(".", 1)[0] if "." in qual else None
                    if holder is None:
                        continue
                    parent = self.g.nodes.get(symbol_id(self.g.nodes[c]["path"], holder))
                    if holder.rsplit(".", 1)[-1] == owner:
                        own.add(c)
                    elif parent is not None and parent.get("kind") == "interface":
                        traits.add(c)
                hits = own or traits
                return self._unique_outside_tests(path, scope, hits) if hits else None
        else:
            declared = self._declared_class(path, scope, receiver)
            if declared is not None:
                hit = self._method_in_hierarchy(declared, name)
                if hit:
                    return hit
            bindings = self._bindings.get(path)
            recv = receiver.replace("::", ".").replace("->", ".")
            value = False  # the receiver is a project definition that is no type (`Q = Keys()`)
            if bindings is not None:
                target = bindings.modules.get(recv)
                if target is not None:
                    hit = self._member(target, name)
                    if hit:
                        return hit
                head = recv.split(".", 1)[0]
                bound = bindings.names.get(head)
                if (head in bindings.external and bound is None and recv not in bindings.modules
                        and not self._local(path, scope, head)):
                    # A module or name imported from outside the project (`fmt.Errorf`,
                    # `pytest.fail`, `assert.fail`): the call is the library's, not the one
                    # project definition that happens to share its name.
                    return None
                if bound is not None and "." not in recv:
                    target, member = bound
                    if member is None:  # a module alias: mod.f()
                        hit = self._member(target, name)
                    else:  # an imported class: Cls.method(), or a submodule: `from pkg import mod`
                        cls = self._member(target, member)
                        hit = self._method_in_hierarchy(cls, name) if cls else self._member(target, name)
                        value = cls is not None and self.g.nodes[cls]["kind"] not in _CLASSLIKE
                    if hit:
                        return hit
            if _RUST_PATH.fullmatch(receiver) and self.g.nodes[path].get("language") == "rust":
                module = self._rust_module(path, receiver)
                hit = self._member(module, name) if module is not None else None
                if hit:
                    return hit
            if "." not in recv:
                cls = self._local(path, scope, recv)
                if cls is not None and self.g.nodes[cls]["kind"] in _MEMBER_HOLDERS:
                    hit = self._method_in_hierarchy(cls, name)
                    if hit:
                        return hit
                value = value or (cls is not None and self.g.nodes[cls]["kind"] not in _CLASSLIKE)
            # `res.send()` where exactly one definition is spelled `res.send` (JavaScript
            # objects whose members are assigned: `res.send = ...`; a Go field named like its
            # type: `s.conn.Write()`; a call on a type: `i32::from`).
            spelled = recv.rsplit(".", 1)[-1] + "." + name
            hits = self._outside_tests(path, scope, [c for c in candidates
                                                     if _qual_ends(self.g.nodes[c]["qualname"], spelled)])
            if len(hits) == 1:
                return hits[0]
            if _names_type(recv) and not value:
                # A call on a type (`Hasher.Hash(..)`, `PathBuf::from(..)`, `str.join(..)`): a
                # method of that type when the project defines it, else nothing of the project's.
                last = recv.rsplit(".", 1)[-1]
                type_name = bindings.imported.get(last, last) if bindings is not None else last
                methods = {cls: hit for cls in self._outside_tests(path, scope, self._by_name.get(type_name, ()))
                           if self.g.nodes[cls]["kind"] in _CLASSLIKE
                           and (hit := self._method_in_hierarchy(cls, name)) is not None}
                if len(methods) > 1 and "." in recv:
                    # Only types that have the method are told apart by path: which one a
                    # call means then changes only when a definition of ``name`` does, as the
                    # index's re-resolution by name assumes.
                    methods = {cls: methods[cls] for cls in _at_module_path(list(methods), recv.rsplit(".", 1)[0])}
                return self._unique(set(methods.values()))
            if self._external_path(path, receiver):
                return None  # `std::fs::f()`, `serde_json::f()`: a library's function, not the project's namesake
            hit = self._unique_outside_tests(path, scope, candidates)
            if (hit is not None and self.g.nodes[hit]["kind"] == "function"
                    and self._value_receiver(path, scope, receiver, recv) and not self._go_package_call(path, hit)):
                # A method call on an object (`wrapper.wrap()` with `wrapper = TextWrapper()`,
                # `", ".join()`, `b.len()`) never calls a free function: not the project's one of
                # that name, which is often the caller itself.  (The free function still counts
                # among the candidates: a method the name then leaves alone is no likelier.)
                return None
            return hit
        return self._unique_outside_tests(path, scope, candidates)

    def _value_receiver(self, path: str, scope: str | None, receiver: str, recv: str) -> bool:
        """Whether a call's receiver is an object, not a module: in Python, Go and Rust, one that
        no import binds and the file defines no type or module for (a local, a parameter, a
        field, a call's result, a literal); in JavaScript/TypeScript, where objects of functions
        stand in for modules (`const utils = { f }`), only a variable declared with a type or a
        constructor (`const d = new Date()`)."""
        language = self.g.nodes[path].get("language")
        if language in _JS_LIKE:
            return _TYPE_PATH.fullmatch(recv) is not None and self._declared_type(path, scope, recv.split(".", 1)[0]) is not None
        if language not in _VALUE_RECEIVERS:
            return False
        if language == "rust" and "::" in receiver and _RUST_PATH.fullmatch(receiver):
            return False  # a path: a module's or a type's function
        head = recv.split(".", 1)[0]
        if not _TYPE_PATH.fullmatch(recv):
            return True  # `make().wrap()`, `", ".join()`, `items[0].keys()`
        if head in _SELF and "." not in recv:
            return False  # `self.m()` outside a class the index knows: as before
        b = self._bindings.get(path)
        if b is not None and (head in b.names or head in b.imported or head in b.external
                              or any(m == recv or recv.startswith(m + ".") for m in b.modules)):
            return False  # an imported module (or something bound by an import)
        local = self._local(path, scope, head) if head not in _SELF else None
        return local is None or self.g.nodes[local]["kind"] not in _MEMBER_HOLDERS

    def _go_package_call(self, path: str, function: str) -> bool:
        """Whether a Go call `x.F()` may be of function ``function`` of a package ``path``
        imports: a package is called by its declared name, which need not be its directory's
        (`package yaml` in `v3/`), so a receiver no import binds may still be a package."""
        if self.g.nodes[path].get("language") != "go":
            return False
        home = posixpath.dirname(split_symbol_id(function)[0])
        return home != posixpath.dirname(path) and any(
            k == "imports" and posixpath.dirname(v) == home for _, v, k in self.g.out_edges(path, keys=True))

    def _external_path(self, path: str, receiver: str) -> bool:
        """Whether a Rust call's path (`std::fs`, `serde_json`) names a module outside the project:
        the standard library, or a first segment that is no module, crate, `use` binding or
        definition the project has (an external crate, spelled without a `use`)."""
        if "::" not in receiver or not _RUST_PATH.fullmatch(receiver) or self.g.nodes[path].get("language") != "rust":
            return False
        head = receiver.split("::", 1)[0]
        if head in _RUST_STD:
            return True
        if head in _RELATIVE_HEADS or head in _SELF or head in self._by_name:
            return False
        b = self._bindings.get(path)
        if b is not None and (head in b.names or head in b.submodules or head in b.imported):
            return False
        return head not in self._rust_module_names()

    def _rust_module_names(self) -> set[str]:
        """Every name a Rust module of the project goes by: the workspace's crates, the modules
        files declare (`mod x;`, `#[path] mod x;`), and the stems and directories of its files
        (a module declared inside a macro, `cfg_rt! { mod runtime; }`, is read by no query)."""
        version, names = self._module_names
        if version != self.version:
            names = set(self._rust_crates())
            for directory, paths in self._dir_files.items():
                rust = [p for p in paths if p.endswith(".rs")]
                if rust:
                    names.add(posixpath.basename(directory).replace("-", "_"))
                    names.update(posixpath.splitext(posixpath.basename(p))[0] for p in rust)
                    for p in rust:
                        b = self._bindings.get(p)
                        if b is not None:
                            names.update(b.submodules)
            self._module_names = (self.version, names)
        return names

    def _declared_class(self, path: str, scope: str | None, receiver: str) -> str | None:
        """The project class a receiver is declared as: a parameter, variable or field of an
        enclosing scope (`writer` with `JsonWriter writer`), one of the class's own fields
        (`this.db`, `self.client`: declared on the class, or as the constructor's parameter of
        the same name, `self.client = client`), or a field of such a field (`self.conn.io`,
        `writer.sink`), each field looked up where its class is defined."""
        head, _, rest = receiver.partition(".")
        fields = rest.split(".") if rest else []
        if head in _SELF:
            if not fields:
                return None
            cls = self._enclosing_class(path, scope)
            if cls is None:
                return None
            # A field is declared beside its class; the caller's own file first (a Python class
            # and its methods are one file, and so is a field set in the constructor).
            cls = self._field_class(cls, fields[0], path) or self._field_class(cls, fields[0])
        else:
            type_name = self._declared_type(path, scope, head)
            # A variable declared through its own name or a cycle of names (`ts: ts.Node`, a
            # parameter named like the namespace it is typed by) names no class through itself.
            key = (path, scope, head)
            if type_name and key not in self._declaring:
                self._declaring.add(key)
                try:
                    cls = self._bound_class(path, scope, type_name)
                finally:
                    self._declaring.discard(key)
            else:
                cls = None
        # Composition: a field's own fields (`self.conn.io.flush()`), a hop at a time.
        for field in fields[1:]:
            if cls is None:
                return None
            cls = self._field_class(cls, field)
        return cls

    def _declared_type(self, path: str, scope: str | None, variable: str) -> str | None:
        """The type a bind row of ``scope`` or an enclosing scope declares ``variable`` with."""
        declared = self._declared.get(path)
        if not declared:
            return None
        parts = scope.split(".") if scope else []
        for i in range(len(parts), -1, -1):
            type_name = declared.get((".".join(parts[:i]) or None, variable))
            if type_name:
                return type_name
        return None

    def _field_class(self, cls: str, field: str, where: str | None = None) -> str | None:
        """The project class field ``field`` of class ``cls`` is declared as, as the bind rows of
        file ``where`` (by default ``cls``'s own file) say."""
        owner_path, owner = split_symbol_id(cls)
        path = where or owner_path
        declared = self._declared.get(path)
        if not declared or not _TYPE_PATH.fullmatch(field):
            return None
        for scope in (owner, *(f"{owner}.{init}" for init in _INITIALISERS)):
            type_name = declared.get((scope, field))
            if type_name:
                return self._bound_class(path, scope, type_name)
        return None

    def _bound_class(self, path: str, scope: str | None, type_name: str) -> str | None:
        """The project class a bind row's type (as file ``path`` spells it) names."""
        type_name, _, function = type_name.partition("::")
        # A JavaScript/TypeScript class reached through a name (`new ns.Store()`): the member
        # `Store` of what `ns` is, found as a call on `ns` would find it.
        receiver, _, type_name = type_name.rpartition(".")
        cls = self._resolve(path, scope, type_name, "type", receiver or None)
        if cls is None or self.g.nodes[cls].get("kind") not in _CLASSLIKE:
            return None
        if function:
            # A local an associated function built (`let q = Queue::new();`, a Rust `bind` row
            # spelled `Queue::new`) is of the type only when the function says it returns it;
            # unwrapped (`Queue::open()?`, spelled `Queue::open?`), when it returns a Result or
            # an Option of it.
            unwrapped = function.endswith("?")
            built = self._method_in_hierarchy(cls, function.rstrip("?"))
            returns = _RETURNS_WRAPPED if unwrapped else _RETURNS
            returned = returns.search(self.g.nodes[built]["signature"] or "") if built else None
            if returned is None or returned.group(1).rsplit("::", 1)[-1] not in ("Self", type_name):
                return None
        return cls

    def _rust_module(self, path: str, spelled: str) -> str | None:
        """The file of the Rust module a call's path names from file ``path``: `sys::f()` after
        `mod sys;`, `self::sys`, `super::x`, `crate::a::b`, a module or crate bound by `use`
        (`use crate::util as u`), another crate of the workspace (`facade::inner`), followed
        segment by segment through each file's `mod` declarations and `use` bindings, so a
        `#[path]` module and a crate re-exported under another name (`pub use inner as x;`)
        are followed as rustc does.  None when a segment names no module file (a type, an
        inline `mod m { }`, a library's)."""
        segments = spelled.split("::")
        current: str | None = self._rust_crate_root(path) if segments[0] == "crate" else path
        for i, segment in enumerate(segments):
            if current is None:
                return None
            if segment == "super":
                current = self._rust_parent(current)
            elif segment not in ("crate", "self"):
                # Another crate only where the path says it is one: a receiver without `::`
                # may be a value (`channel.send()`) named like a crate.
                crate = self._rust_crates().get(segment) if i == 0 and len(segments) > 1 else None
                current = self._rust_child(current, segment) or crate
        return current

    def _rust_child(self, path: str, name: str) -> str | None:
        """The file of module ``name`` as file ``path`` sees it: its own `mod name;`, or a
        `use` that binds a module or crate under that name."""
        b = self._bindings.get(path)
        if b is None:
            return None
        if name in b.submodules:
            return b.submodules[name]
        bound = b.names.get(name)
        if bound is None or bound[0] == path:
            return None
        target, member = bound
        if member is None:  # `use inner_crate as name;`, `use crate::util as name;`
            return target
        # `use crate::util;` binds the module file itself (no item of it is named `util`); a
        # capitalised name is a type's (a variant, an item the index does not hold).
        return target if not name[:1].isupper() and self._member(target, member) is None else None

    def _rust_parent(self, path: str) -> str | None:
        """The file whose `mod` declares ``path`` (the first, if a library and a binary both do)."""
        parents = self._mod_parents.get(path)
        return min(parents) if parents else None

    def _rust_crate_root(self, path: str) -> str:
        """The root file of the crate ``path`` belongs to: the first file up its chain of
        declaring modules that no `mod` declares."""
        seen = {path}
        while (parent := self._rust_parent(path)) is not None and parent not in seen:
            seen.add(parent)
            path = parent
        return path

    def _rust_crates(self) -> dict[str, str]:
        """The workspace's library crates by the name code spells them with, read from their
        directories as Cargo names a package by default (`inner-crate/src/lib.rs` ->
        `inner_crate`; a `[lib] name` or a package named unlike its directory is not seen)."""
        version, crates = self._crates
        if version != self.version:
            crates = {}
            for directory, paths in self._dir_files.items():
                root = directory + "/lib.rs"
                if directory.endswith("/src") and root in paths and not self._mod_parents.get(root):
                    crates.setdefault(posixpath.basename(directory[:-4]).replace("-", "_"), root)
            self._crates = (self.version, crates)
        return crates

    def _unique(self, candidates: set[str]) -> str | None:
        if len(candidates) == 1:
            return next(iter(candidates))
        return None

    def _member(self, target: str, member: str, _hops: int = 0, _seen: set | None = None) -> str | None:
        """``member`` as defined in (or re-exported by) file ``target``."""
        if member == "default":
            return self._default_export(target, _hops, _seen)
        files = self._package_files(target)
        for f in files:
            node = symbol_id(f, member)
            if node in self.g:
                return node
        if self.g.nodes[target].get("language") in _JS_LIKE if target in self.g else False:
            # A CommonJS module exporting an object whose members are
            # assigned (`res.send = ...; module.exports = res`).
            hits = [n for n in self._file_symbols.get(target, ())
                    if n in self.g and self.g.nodes[n]["name"] == member
                    and self.g.nodes[n]["qualname"].count(".") == 1]
            if len(hits) == 1:
                return hits[0]
        if _hops < _REEXPORT_HOPS:
            # Re-exports: a module (a package's __init__.py, a barrel index.ts,
            # a crate's lib.rs) hands on names it imported, one by one
            # (`from .x import y`, `export { y } from`, `pub use x::y`) or all
            # at once (`export * from`, `pub use x::*`, `from .x import *`).
            # Monorepos chain them package to package (the framework's entry ->
            # its DOM runtime -> core runtime -> a leaf module), so the walk goes deep;
            # a barrel seen once in a walk is not searched again (`export *`
            # webs fan in and may cycle).
            seen = _seen if _seen is not None else set()
            for f in files:
                if (f, member) in seen:
                    continue
                seen.add((f, member))
                b = self._bindings.get(f)
                if b is None:
                    continue
                bound = b.names.get(member)
                if bound is not None and bound[0] != f:
                    hit = self._member(bound[0], bound[1] or member, _hops + 1, seen)
                    if hit:
                        return hit
                for wildcard in b.wildcards:
                    if wildcard != f:
                        hit = self._member(wildcard, member, _hops + 1, seen)
                        if hit:
                            return hit
        return None

    def _default_export(self, target: str, _hops: int = 0, _seen: set | None = None) -> str | None:
        """The symbol a JavaScript/TypeScript module exports as a whole
        (``module.exports = ...``, ``export default ...``); for a name
        (``export default toRem``), that name's definition in the module or,
        like a re-export, in the module it was imported from."""
        for n in self._file_symbols.get(target, ()):
            sig = self.g.nodes[n]["signature"] if n in self.g else ""
            if sig.startswith(("module.exports", "export default")):
                return n
        name = (self._declared.get(target) or {}).get((None, _DEFAULT))
        return self._member(target, name, _hops + 1, _seen) if name else None

    def _package_files(self, path: str) -> list[str]:
        """The files whose top-level names ``path`` sees unimported: a Go package's or a Java
        package's other files (both are one directory), else ``path`` alone."""
        node = self.g.nodes.get(path)
        suffix = _PACKAGE_IS_DIRECTORY.get(node.get("language")) if node is not None else None
        if suffix is not None:
            d = posixpath.dirname(path)
            return [path] + sorted(p for p in self._dir_files.get(d, ()) if p != path and p.endswith(suffix))
        return [path]

    def _local(self, path: str, scope: str | None, name: str) -> str | None:
        # Innermost enclosing scope first: a nested def, then class members, then module level.
        if scope:
            parts = scope.split(".")
            for i in range(len(parts), 0, -1):
                if parts[i - 1] == name:
                    # A class's own name inside it is the class, not its constructor
                    # (`new Builder(this)`, a `Builder` parameter in Java, C#, C++).
                    own = symbol_id(path, ".".join(parts[:i]))
                    if self.g.nodes.get(own, {}).get("kind") in _CLASSLIKE:
                        return own
                node = symbol_id(path, ".".join(parts[:i]) + "." + name)
                if node in self.g:
                    return node
        for f in self._package_files(path):
            node = symbol_id(f, name)
            if node in self.g:
                return node
        return None

    def _enclosing_class(self, path: str, scope: str | None) -> str | None:
        if not scope:
            return None
        parts = scope.split(".")
        for i in range(len(parts), 0, -1):
            node = symbol_id(path, ".".join(parts[:i]))
            data = self.g.nodes.get(node)
            if data is not None and data.get("kind") in _CLASSLIKE:
                return node
        # Rust impl blocks / Go receivers: the qualname prefix names the type,
        # which may be defined in another file of the package, or (a Rust `impl T` in a file
        # of its own) in a module the file imports it from.
        if len(parts) > 1:
            local = self._local(path, None, parts[-2])
            if local is not None or self.g.nodes[path].get("language") != "rust":
                return local
            owner = self._resolve(path, None, parts[-2], "type", None)
            if owner is not None and self.g.nodes[owner].get("kind") in _CLASSLIKE:
                return owner
        return None

    def _impl_type(self, path: str, scope: str | None) -> str | None:
        """The type named by a Rust method's impl block (``scope`` ``Type.method``).  Asked only
        when no project type of that name is found from the file (a standard or external type, a
        generic parameter): what a call then means depends on definitions of the called name alone,
        as the index's re-resolution by name assumes."""
        if not scope or self.g.nodes[path].get("language") != "rust":
            return None
        parts = scope.split(".")
        return parts[0] if len(parts) == 2 else None

    def _method_in_bases(self, cls: str, name: str) -> str | None:
        """``name`` as ``cls``'s base classes define or inherit it."""
        for _, base, kind in self.g.out_edges(cls, keys=True):
            if kind == "inherits" and base != cls:
                hit = self._method_in_hierarchy(base, name, depth=3)
                if hit:
                    return hit
        return None

    def _method_in_hierarchy(self, cls: str, name: str, depth: int = 4) -> str | None:
        seen = set()
        frontier = [cls]
        for _ in range(depth):
            nxt = []
            for c in frontier:
                if c in seen:
                    continue
                seen.add(c)
                data = self.g.nodes.get(c)
                if data is None:
                    continue
                node = symbol_id(data["path"], f"{data['qualname']}.{name}")
                if node in self.g:
                    return node
                for v in self.g.successors(c):  # members defined in other files (impl blocks)
                    if self.g.has_edge(c, v, "contains") and self.g.nodes[v].get("name") == name:
                        return v
                nxt.extend(v for _, v, k in self.g.out_edges(c, keys=True) if k == "inherits")
            frontier = nxt
        return None

    # -- persistence of resolved targets --------------------------------------

    def take_resolved_targets(self) -> list[tuple[str | None, int]]:
        """(target, ref id) pairs of the references whose resolution differs from the target the
        index holds for them (None: resolved to nothing), since the last call: written back, they
        leave every row's target as a graph built afresh from the rows resolves it."""
        out = [(t, rid) for rid, t in self._pending_targets.items()]
        self._pending_targets.clear()
        return out

    def untake_resolved_targets(self, rows: Iterable[tuple[str | None, int]]) -> None:
        """Queue again the pairs :meth:`take_resolved_targets` gave that could not be written
        (a full disk, a locked file), unless a later resolution of the row queued its own; a row
        dropped since takes its pair along (see _drop_file)."""
        for target, rid in rows:
            self._pending_targets.setdefault(rid, target)

    # -- queries (GraphView; those derived from neighbors are GraphQueries') --

    def __contains__(self, node: str) -> bool:
        return node in self.g

    def node(self, node: str) -> dict:
        return self.g.nodes[node]

    def nodes(self) -> list[str]:
        """Every node id, files and symbols."""
        return list(self.g.nodes)

    def definitions(self, name: str) -> list[str]:
        """Symbol nodes whose short name is ``name``."""
        return sorted(self._by_name.get(name, ()))

    def names(self) -> Iterable[str]:
        return self._by_name.keys()

    def node_for_db_id(self, symbol_db_id: int) -> str | None:
        """The node of a ``symbols.id`` row (e.g. a full-text search hit)."""
        return self._by_db_id.get(symbol_db_id)

    def file_of(self, node: str) -> str:
        return self.g.nodes[node]["path"]

    def neighbors(self, node: str, kinds: Iterable[str] | None = None, direction: str = "both") -> Iterator[Neighbor]:
        """Edges at ``node`` filtered by kind; direction is 'out', 'in' or 'both'."""
        wanted = set(kinds) if kinds is not None else None
        if direction in ("out", "both"):
            for _, v, k, w in self.g.out_edges(node, keys=True, data="weight"):
                if wanted is None or k in wanted:
                    yield Neighbor(v, k, w, True)
        if direction in ("in", "both"):
            for u, _, k, w in self.g.in_edges(node, keys=True, data="weight"):
                if wanted is None or k in wanted:
                    yield Neighbor(u, k, w, False)

    def adjacency(self, node: str) -> list[Adjacent]:
        """Every edge at ``node`` as (neighbour, kind, weight, outgoing,
        neighbour_is_test), cached until an edge at ``node`` changes.

        The ranking walks these lists thousands of times per query; plain
        tuples are an order of magnitude cheaper than networkx's views.
        """
        adj = self._adj_cache.get(node)
        if adj is None:
            g, tests, tsyms = self.g, self.test_files, self.test_symbols
            # get_edge_data(u, v) hands back the multigraph's own {key: edge data}
            # dict of the u->v edges: walked so, the edges cost about what reading
            # networkx's internals would, while succ[node].items() wraps every
            # entry in a view and costs four times as much.
            adj = [(v, k, d["weight"], True, v in tsyms or v.split("::", 1)[0] in tests)
                   for v in g.successors(node) for k, d in g.get_edge_data(node, v).items()]
            adj += [(u, k, d["weight"], False, u in tsyms or u.split("::", 1)[0] in tests)
                    for u in g.predecessors(node) for k, d in g.get_edge_data(u, node).items()]
            self._adj_cache[node] = adj
        return adj

    def stats(self) -> dict[str, int]:
        kinds: dict[str, int] = defaultdict(int)
        for _, _, k in self.g.edges(keys=True):
            kinds[k] += 1
        return {"files": len(self._file_symbols), "symbols": self.g.number_of_nodes() - len(self._file_symbols),
                **{f"edges_{k}": kinds.get(k, 0) for k in EDGE_KINDS}}


if TYPE_CHECKING:  # a type checker confirms CodeGraph implements the read API
    _view: type[GraphView] = CodeGraph


def _owner(node: str) -> str | None:
    """The definition ``node`` is a member of (by its qualified name), or None at top level."""
    path, qual = split_symbol_id(node)
    return symbol_id(path, qual.rsplit(".", 1)[0]) if "." in qual else None


def _bound_name(language: str | None, module: str, name: str | None, alias: str | None) -> str | None:
    """The local name an import of a library binds, where that is plain: its alias, the name it
    imports, a one-word module (`import pytest`), a Go package's last path element.  None for an
    import of the project's own (relative, aliased) and for spellings whose binding the row does
    not say (`import os.path` binds `os`)."""
    if module.startswith(_PROJECT_SPELLINGS) or module.split("::", 1)[0] in _RELATIVE_HEADS:
        return None  # the project's own, whatever the resolver made of it
    if alias:
        return alias
    if name and name != _WILDCARD:
        return name
    if module.isidentifier():
        return module
    if language == "go" and "/" in module:
        return _last_part(module)
    return None


def _path_modules(receiver: str | None) -> list[str]:
    """The modules a Rust path receiver spells (`crate::net::tcp` -> crate, net, tcp); none for
    a receiver without `::`."""
    return receiver.split("::") if receiver and "::" in receiver else []


def _rust_mod_declared(module: str, name: str | None, alias: str | None) -> str | None:
    """The module a Rust import row declares: `mod x;` (``self::x``) or `#[path = ".."] mod x;`
    (the file as written, bound to ``alias``; see indexer/imports.py), else None."""
    if name is not None:
        return None
    if module.startswith("self::") and alias is None and "::" not in module[6:]:
        return module[6:]
    return alias if module.startswith((".", "/")) else None


def _field_chain(receiver: str) -> bool:
    """Whether a receiver reaches its object through another type's field (`self.conn.io`,
    `writer.sink`): which class that is depends on bind rows of files the reference's own names
    need not point at, so an update resolves it again whenever its file is resolved again."""
    if not _TYPE_PATH.fullmatch(receiver):
        return False
    return receiver.count(".") >= (2 if receiver.split(".", 1)[0] in _SELF else 1)


def _dotted(module: str) -> bool:
    return any(ch.isalnum() or ch == "_" for ch in module) and not module.startswith((".", "/", "<"))


def _module_head(module: str) -> str | None:
    """The name an unaliased whole-module import binds: ``os.path`` -> ``os``."""
    if module.startswith((".", "/", "<")) or "/" in module:
        return None
    head = module.replace("::", ".").split(".", 1)[0]
    return head or None
