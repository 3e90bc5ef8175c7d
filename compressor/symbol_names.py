"""A symbol as an agent writes it -> the graph's symbol nodes.

Accepted spellings: a plain name (``login``); a project id
(``app/auth/service.py::AuthService.login``, or with only the end of the
path: ``service.py::AuthService.login``); a qualified name in any form
``context_query`` reads (``AuthService.login``, ``pkg.mod.func``,
``a::b::C``, ``A#m``, ``a->b``), read by the same code
(:func:`.analyze._seed_qualified`); a substring when it ends with ``*``;
any of these followed by ``()``; a project id whose path is absolute or
starts above the project.

When nothing matches, :func:`near_names` offers what the agent probably
meant: the same name in another case or with other separators, then names
that are spelled almost alike.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from memstrata.indexer.graph_view import GraphView

from .analyze import _QUAL_SPLIT, Seeds, _key, _qual_matches, _seed_qualified, _Token

# Substring searches stop collecting after this many names: a one-letter
# pattern on a large project matches most of it, and the answer is capped anyway.
MAX_SUBSTRING_NAMES = 5000


@dataclass(slots=True)
class Match:
    node: str
    exact: int  # 0: exactly as written, 1: a looser match (suffix, prefix), 2: a substring


def split_project_id(graph: GraphView, name: str) -> tuple[list[str], str] | None:
    """(files, qualname) when ``name`` is ``path::qualname`` with ``path`` an
    indexed file or the end of one; None when ``::`` is a language's own
    qualifier (``a::b::C``)."""
    if "::" not in name:
        return None
    head, _, qual = name.partition("::")
    head = head.strip().lstrip("./")
    if not head or not qual:
        return None
    files = [head] if head in graph and graph.node(head).get("type") == "file" else []
    if not files and ("/" in head or "." in head):
        suffix = "/" + head
        files = [f for f in graph.files() if f.endswith(suffix)]
    if not files and "/" in head:
        # An absolute path, or one written from a folder above the project (an editor's "copy
        # path", a stack trace's frame): the indexed file its end spells, the longest such.
        written = "/" + head
        within = [f for f in graph.files() if written.endswith("/" + f)]
        files = [max(within, key=len)] if within else []
    return (files, qual) if files else None


def resolve(graph: GraphView, name: str) -> list[Match]:
    """Every symbol ``name`` designates, most exact first (unordered within a tier)."""
    if name.endswith("()") and len(name) > 2:
        name = name[:-2]  # a function as prose writes it, ``createStore()``: its name
    if name.endswith("*"):
        return _substring(graph, name[:-1])
    pid = split_project_id(graph, name)
    if pid is not None:
        files, qual = pid
        qual = ".".join(_QUAL_SPLIT.split(qual))
        return [Match(f"{f}::{qual}", 0) for f in files if f"{f}::{qual}" in graph]
    namespaced = _namespaced_languages(name)
    # A PHP name as a stack trace or a `use` line spells it: `\Vendor\Pkg\Class::method`.
    parts = [p for p in _QUAL_SPLIT.split(name.replace("\\", ".")) if p]
    if not parts:
        return []
    name = ".".join(parts) if "\\" in name else name
    if not parts[-1].startswith("#") and not graph.definitions(parts[-1]) and graph.definitions("#" + parts[-1]):
        # A private member written without its "#" (``Ky.retry`` for ``Ky.#retry``).
        parts[-1] = "#" + parts[-1]
        name = ".".join(parts)
    if len(parts) == 1:
        base, colon, _ = parts[0].partition(":")
        if colon:  # a later definition in its scope, ``size:set`` (see indexer/parse.py, _disambiguate)
            return [Match(d, 0) for d in graph.definitions(base)
                    if _qual_matches(graph.node(d)["qualname"], parts[0])]
        # Exact: the whole qualname is what was written (a module-level ``echo``); looser: a
        # member or nested definition of that name (``tests...::test_eof.echo``).
        return [Match(d, 0 if graph.node(d)["qualname"] == parts[0] else 1) for d in graph.definitions(parts[0])]
    seeds = Seeds()
    if not _seed_qualified(_Token(name, parts, True, False), graph, None, seeds, lambda _node: True):
        return _module_level(graph, parts) or _under_namespace(graph, parts, namespaced)
    written = ".".join(parts)
    out = []
    for n in seeds.symbols:
        qual = graph.node(n)["qualname"]
        # Exact: the whole spelling is the qualname, or a module path the file's path spells
        # and the qualname; looser: the qualname is longer than what was written, or the
        # module path is not the file's.
        if qual == written:
            tier = 0
        elif written.endswith("." + qual):
            module = [p.lower() for p in written[: -len(qual) - 1].split(".")]
            tier = 0 if _module_is_file(graph.file_of(n), module) else 1
        else:
            tier = 1
        out.append(Match(n, tier))
    return out


def _module_level(graph: GraphView, parts: list[str]) -> list[Match]:
    """``pkg.mod.func``: a module-level definition ``func`` of the file the dotted module path names."""
    module = [p.lower() for p in parts[:-1]]
    defs = [d for d in graph.definitions(parts[-1].split(":", 1)[0]) if graph.node(d)["qualname"] == parts[-1]]
    found = [Match(d, 0) for d in defs if _module_is_file(graph.file_of(d), module)]
    # A package's public path (`pkg.sub.func`, `pkg.Class`): the package's own module
    # (__init__.py, index.ts, mod.rs, lib.rs) imports the name from the file that defines it.
    return found or [Match(d, 0) for d in defs if _reexported_by(graph, graph.file_of(d), module)]


def _namespaced_languages(name: str) -> frozenset[str]:
    r"""The languages whose namespaces (not symbols of the index) a name is
    spelled in: `ui::Widget` (C++, PHP), `Slim\Routing\Route` (PHP),
    `MyApp.Services.Mailer` (C#).  A dotted name is no C++ or PHP name, so a
    Python module path never lands on a C++ definition of the same last name."""
    if "\\" in name:
        return frozenset({"php"})
    if "::" in name:
        return frozenset({"cpp", "php"})
    return frozenset({"csharp"})


def _under_namespace(graph: GraphView, parts: list[str], languages: frozenset[str]) -> list[Match]:
    """A namespace-qualified name: the definitions, in ``languages``, that the
    longest tail of ``parts`` names exactly.  Looser matches: the namespace
    itself is not checked."""
    for keep in range(len(parts) - 1, 0, -1):
        qual = ".".join(parts[-keep:])
        found = [Match(d, 1) for d in graph.definitions(parts[-1].split(":", 1)[0])
                 if graph.node(d)["qualname"] == qual
                 and graph.node(graph.file_of(d)).get("language") in languages]
        if found:
            return found
    return []


def _reexported_by(graph: GraphView, path: str, module: list[str]) -> bool:
    """Whether a package's own module that ``module`` names imports the file ``path``."""
    for importer in graph.importers(path):
        own = importer.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower() in ("__init__", "index", "mod", "lib")
        if own and _module_is_file(importer, module):
            return True
    return False


def _module_is_file(path: str, module: list[str]) -> bool:
    """Whether the dotted ``module`` ends the file's path: ``pkg.mod`` is ``.../pkg/mod.py`` or the
    package ``.../pkg/mod/__init__.py`` (a source root before it is allowed, a folder after it not)."""
    pieces = [p.lower() for p in path.rsplit(".", 1)[0].split("/")]
    if pieces and pieces[-1] in ("__init__", "index", "mod", "lib"):
        # A package's own module: Python's __init__, JavaScript's index, Rust's mod.rs / lib.rs.
        if pieces[-len(module) - 1:-1] == module:
            return True
    return pieces[-len(module):] == module


def _substring(graph: GraphView, stem: str) -> list[Match]:
    parts = [p for p in _QUAL_SPLIT.split(stem)]
    last = parts[-1].lower()
    qualified = ".".join(parts).lower() if len(parts) > 1 else None
    out: list[Match] = []
    names = 0
    for n in graph.names():
        low = n.lower()
        if last not in low:
            continue
        names += 1
        if names > MAX_SUBSTRING_NAMES:
            break
        for d in graph.definitions(n):
            if qualified is not None:
                qual = graph.node(d)["qualname"].lower()
                if qualified not in qual:
                    continue
                tier = 0 if qual == qualified else 1 if qual.endswith("." + qualified) else 2
            else:
                tier = 0 if n == stem else 1 if low.startswith(last) else 2
            out.append(Match(d, tier))
    return out


def near_names(graph: GraphView, name: str, limit: int = 5) -> list[str]:
    """Names of the project spelled like ``name``'s last part, best first."""
    parts = [p for p in _QUAL_SPLIT.split(name.rstrip("*")) if p]
    if not parts:
        return []
    last = parts[-1]
    key = _key(last)
    same_key: list[str] = []
    close_pool: list[str] = []
    for n in graph.names():
        k = _key(n)
        if k == key:
            same_key.append(n)
        elif abs(len(k) - len(key)) <= 3 and k[:1] == key[:1]:
            close_pool.append(n)
    close = difflib.get_close_matches(last, close_pool, n=limit, cutoff=0.75)
    return (sorted(same_key) + close)[:limit]
