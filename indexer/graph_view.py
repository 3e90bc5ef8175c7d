"""The read API of a code graph, as its users see it.

Two classes hold a project's graph: :class:`~.graph.CodeGraph`, built from
the index and refreshed as files change, and
:class:`~.graph_snapshot.SnapshotGraph`, read back from the saved snapshot
and never changed.  The compressor, the proxy and the workspace's readers
take either, through :class:`GraphView`; only the workspace refreshes a
graph, and it does that on a ``CodeGraph`` alone.

:class:`GraphQueries` holds the queries both classes answer the same way
from their primitives, so neither copies them from the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

# One edge at a node, as :meth:`GraphView.adjacency` lists it:
# (neighbour, kind, weight, outgoing, neighbour_is_test).
Adjacent = tuple[str, str, float, bool, bool]


@dataclass(slots=True, frozen=True)
class Neighbor:
    node: str
    kind: str
    weight: float
    outgoing: bool  # True: edge node->neighbour, False: neighbour->node


class GraphView(Protocol):
    """What callers read of a code graph (nodes are file paths and
    ``"path::qualname"`` symbol ids; edge kinds are ``graph.EDGE_KINDS``)."""

    version: int  # renewed whenever the graph changes: caches built over it key on this
    generation: str | None  # the store's code generation the graph reflects
    test_files: set[str]
    test_symbols: set[str]  # test code inside source files (a Rust `mod tests`), see scan.is_test_module

    def __contains__(self, node: str) -> bool: ...

    def node(self, node: str) -> dict:
        """The node's attributes (``type``, ``path``; a symbol's ``name``,
        ``qualname``, ``kind``, lines, ``signature``, ``doc``, ``db_id``)."""
        ...

    def nodes(self) -> list[str]:
        """Every node id, files and symbols."""
        ...

    def files(self) -> list[str]: ...

    def symbols_in_file(self, path: str) -> list[str]: ...

    def definitions(self, name: str) -> list[str]:
        """Symbol nodes whose short name is ``name``, sorted."""
        ...

    def names(self) -> Iterable[str]: ...

    def node_for_db_id(self, symbol_db_id: int) -> str | None:
        """The node of a ``symbols.id`` row (e.g. a full-text search hit)."""
        ...

    def file_of(self, node: str) -> str: ...

    def neighbors(self, node: str, kinds: Iterable[str] | None = None, direction: str = "both") -> Iterator[Neighbor]:
        """Edges at ``node`` filtered by kind; direction is 'out', 'in' or 'both'."""
        ...

    def adjacency(self, node: str) -> list[Adjacent]:
        """Every edge at ``node`` as (neighbour, kind, weight, outgoing,
        neighbour_is_test): outgoing edges first, then incoming."""
        ...

    def is_test_node(self, node: str) -> bool: ...

    def callers(self, node: str) -> list[str]: ...

    def callees(self, node: str) -> list[str]: ...

    def subclasses(self, node: str) -> list[str]: ...

    def bases(self, node: str) -> list[str]: ...

    def importers(self, path: str) -> list[str]: ...

    def imported_files(self, path: str) -> list[str]: ...

    def stats(self) -> dict[str, int]:
        """``files``, ``symbols`` and ``edges_<kind>`` counts."""
        ...


class GraphQueries:
    """The part of :class:`GraphView` that follows from ``neighbors``, the
    per-file symbol lists and the test files, shared by both graph classes."""

    _file_symbols: dict[str, list[str]]  # path -> its symbol nodes, in definition order
    test_files: set[str]
    test_symbols: set[str]

    def neighbors(self, node: str, kinds: Iterable[str] | None = None, direction: str = "both") -> Iterator[Neighbor]:
        raise NotImplementedError

    def files(self) -> list[str]:
        return list(self._file_symbols)

    def symbols_in_file(self, path: str) -> list[str]:
        return list(self._file_symbols.get(path, ()))

    def is_test_node(self, node: str) -> bool:
        """Whether ``node`` (a file or symbol) is test code: in a test file, or an inline test module's."""
        return node in self.test_symbols or node.split("::", 1)[0] in self.test_files

    def callers(self, node: str) -> list[str]:
        return sorted({n.node for n in self.neighbors(node, ("calls",), "in")})

    def callees(self, node: str) -> list[str]:
        return sorted({n.node for n in self.neighbors(node, ("calls",), "out")})

    def subclasses(self, node: str) -> list[str]:
        return sorted({n.node for n in self.neighbors(node, ("inherits",), "in")})

    def bases(self, node: str) -> list[str]:
        return sorted({n.node for n in self.neighbors(node, ("inherits",), "out")})

    def importers(self, path: str) -> list[str]:
        return sorted({n.node for n in self.neighbors(path, ("imports",), "in")})

    def imported_files(self, path: str) -> list[str]:
        return sorted({n.node for n in self.neighbors(path, ("imports",), "out")})
