"""The graph saved beside the index, so a process that only reads starts fast.

Building :class:`CodeGraph` from rows means resolving every reference again:
seconds on a repository of 500k+ lines, paid by every one-shot ``memstrata
query``.  What the compressor reads of a graph (nodes and their attributes,
the adjacency lists the ranking walks, names, files, tests) is small and
final once resolved, so it is written to ``.memstrata/graph.snapshot`` and
read back as a :class:`SnapshotGraph`: another implementation of the same
read API (:class:`~.graph_view.GraphView`), over arrays instead of networkx.

A snapshot names the store's code generation it was taken at (a token the
schema's triggers renew on every change the graph is built from); one that
does not match the store is never used.  The file is written and checked by
:mod:`memstrata.storage.checked_file` (marshal data behind a digest, renamed
into place: a killed writer leaves the old snapshot or none).

A snapshot graph cannot be refreshed; the workspace replaces it with a full
graph, built in the background by a process that watches the project, else
at the first change it has to follow.  Its arrays are in this machine's byte
order, which the file records: an index folder copied to another kind of
machine just builds its graph again.
"""

from __future__ import annotations

import logging
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .graph import _VERSIONS, EDGE_KINDS, CodeGraph
from .graph_view import Adjacent, GraphQueries, GraphView, Neighbor

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "graph.snapshot"
_MAGIC = b"MSGRAPH13"  # 2: inline test modules' symbols; 3: no name-only link into tests, type paths;
# 4: no bare-name link to a method, no link from a call on a library module; 5: a class's name is the
# class, not its constructors; a Java package's files see each other's names; 6: a C# type name
# is a type's, an attribute names its `...Attribute` class; 7: base classes resolved before calls;
# 8: `super.m()` is the base class's method, not the caller's own; 9: a call on a module defined in a file
# (`Geometry.area()`, a TypeScript namespace) is its member; 10: a call on `self.field` reaches the field
# type's method, a method call on an object is no call of a free function, an external crate's path no
# call of the project's namesake; 11: a JavaScript/TypeScript local made by `new ns.Klass()` has the type
# `ns` names, a Rust local made by `T::open()?` (`.unwrap()`, `.expect(..)`) the type T; 12: a JavaScript/
# TypeScript module's `export default name` and `export { name }` are uses of the name; 13: `self.m()` in a
# Rust impl for a type the project does not define is that type's or a trait's method, never another type's
_KIND_CODE = {k: i for i, k in enumerate(EDGE_KINDS)}
_LAYOUT = [sys.byteorder, array("I").itemsize, array("d").itemsize]


class SnapshotGraph(GraphQueries):
    """A read-only graph loaded from a snapshot (see the module docstring).

    It is a :class:`GraphView`, not a :class:`CodeGraph`: it has no networkx
    graph and no resolution tables (what a snapshot spares), so nothing can
    refresh it.
    """

    def __init__(self, state: dict):
        self.version = next(_VERSIONS)
        self._adj_cache: dict[str, list[Adjacent]] = {}  # node -> adjacency(node), decoded once
        self.generation = state["generation"]
        self._ids: list[str] = state["nodes"]
        self._index = {n: i for i, n in enumerate(self._ids)}
        self._schemas: list[tuple[str, ...]] = state["schemas"]
        self._node_schema = state["node_schema"]
        self._values: list[tuple] = state["values"]
        self._attrs: dict[int, dict] = {}
        self._off = _array("I", state["adj_off"])
        self._nbr = _array("I", state["adj_nbr"])
        self._code = state["adj_code"]  # kind index * 2 + outgoing
        self._weight = _array("d", state["adj_weight"])
        ids = self._ids
        self._file_symbols = {path: [ids[i] for i in members] for path, members in state["file_symbols"].items()}
        self._by_name_idx: dict[str, list[int]] = state["by_name"]
        self._by_db_id_idx = dict(zip(state["db_ids"], state["db_nodes"]))
        self.test_files = set(state["test_files"])
        self.test_symbols = {ids[i] for i in state["test_symbols"]}

    # -- the query API, over the arrays ---------------------------------------

    def __contains__(self, node: str) -> bool:
        return node in self._index

    def node(self, node: str) -> dict:
        i = self._index[node]
        attrs = self._attrs.get(i)
        if attrs is None:
            attrs = self._attrs[i] = dict(zip(self._schemas[self._node_schema[i]], self._values[i]))
        return attrs

    def nodes(self) -> list[str]:
        return list(self._ids)

    def file_of(self, node: str) -> str:
        return self.node(node)["path"]

    def definitions(self, name: str) -> list[str]:
        ids = self._ids
        return sorted(ids[i] for i in self._by_name_idx.get(name, ()))

    def names(self) -> Iterable[str]:
        return self._by_name_idx.keys()

    def node_for_db_id(self, symbol_db_id: int) -> str | None:
        i = self._by_db_id_idx.get(symbol_db_id)
        return None if i is None else self._ids[i]

    def adjacency(self, node: str) -> list[Adjacent]:
        adj = self._adj_cache.get(node)
        if adj is None:
            i = self._index[node]
            ids, tests, tsyms = self._ids, self.test_files, self.test_symbols
            code, weight, nbr = self._code, self._weight, self._nbr
            adj = []
            for j in range(self._off[i], self._off[i + 1]):
                v = ids[nbr[j]]
                c = code[j]
                adj.append((v, EDGE_KINDS[c >> 1], weight[j], bool(c & 1), v in tsyms or v.split("::", 1)[0] in tests))
            self._adj_cache[node] = adj
        return adj

    def neighbors(self, node: str, kinds: Iterable[str] | None = None, direction: str = "both") -> Iterator[Neighbor]:
        wanted = set(kinds) if kinds is not None else None
        adj = self.adjacency(node)
        for out in (True, False):
            if direction == "both" or (direction == "out") == out:
                for v, kind, weight, outgoing, _ in adj:
                    if outgoing == out and (wanted is None or kind in wanted):
                        yield Neighbor(v, kind, weight, outgoing)

    def stats(self) -> dict[str, int]:
        counts = [0] * len(EDGE_KINDS)
        for c in self._code:
            if c & 1:  # each edge is listed at both ends; count it at its source
                counts[c >> 1] += 1
        return {"files": len(self._file_symbols), "symbols": len(self._ids) - len(self._file_symbols),
                **{f"edges_{k}": counts[i] for i, k in enumerate(EDGE_KINDS)}}


if TYPE_CHECKING:  # a type checker confirms SnapshotGraph implements the read API
    _view: type[GraphView] = SnapshotGraph


def save(graph: GraphView, store) -> bool:
    """Keep ``graph`` beside ``store`` (a file by a SQLite index, a row in a
    shared one); False when it cannot be (see storage/checked_file), or when
    it is no :class:`CodeGraph` (a snapshot graph is already saved)."""
    if not isinstance(graph, CodeGraph) or graph.generation is None:
        return False
    try:
        state = _state(graph)
    except (ValueError, OverflowError, KeyError) as exc:  # a shape the format cannot hold
        log.info("graph snapshot not written: %s", exc)
        return False
    return store.save_derived(SNAPSHOT_FILE, _MAGIC, state)


def load(store, generation: str | None) -> SnapshotGraph | None:
    """The snapshot kept beside ``store`` if it was taken at ``generation``; None
    when it is missing, stale, unreadable or damaged (the caller builds the graph)."""
    if generation is None:
        return None
    state = store.load_derived(SNAPSHOT_FILE, _MAGIC)
    if not isinstance(state, dict) or state.get("generation") != generation or state.get("layout") != _LAYOUT:
        return None
    try:
        return SnapshotGraph(state)
    except (ValueError, TypeError, KeyError, IndexError):
        log.info("graph snapshot unreadable; rebuilding the graph")
        return None


def _state(graph: CodeGraph) -> dict:
    ids = list(graph.g.nodes)
    index = {n: i for i, n in enumerate(ids)}
    schemas: dict[tuple[str, ...], int] = {}
    node_schema = bytearray()
    values = []
    for n, attrs in graph.g.nodes(data=True):
        keys = tuple(attrs)
        node_schema.append(schemas.setdefault(keys, len(schemas)))
        values.append(tuple(attrs.values()))
    off, nbr, weight = array("I", [0]), array("I"), array("d")
    code = bytearray()
    for n in ids:
        for v, kind, w, outgoing, _ in graph.adjacency(n):
            nbr.append(index[v])
            code.append(_KIND_CODE[kind] * 2 + int(outgoing))
            weight.append(w)
        off.append(len(nbr))
    by_db = [(db_id, index[n]) for db_id, n in graph._by_db_id.items() if n in index]
    return {
        "generation": graph.generation,
        "layout": _LAYOUT,
        "nodes": ids,
        "schemas": list(schemas),
        "node_schema": bytes(node_schema),
        "values": values,
        "adj_off": off.tobytes(),
        "adj_nbr": nbr.tobytes(),
        "adj_code": bytes(code),
        "adj_weight": weight.tobytes(),
        "file_symbols": {p: [index[n] for n in members] for p, members in graph._file_symbols.items()},
        "by_name": {name: [index[n] for n in nodes] for name, nodes in graph._by_name.items()},
        "db_ids": [d for d, _ in by_db],
        "db_nodes": [i for _, i in by_db],
        "test_files": sorted(graph.test_files),
        "test_symbols": sorted(index[n] for n in graph.test_symbols),
    }


def _array(typecode: str, raw: bytes) -> array:
    a = array(typecode)
    a.frombytes(raw)
    return a
