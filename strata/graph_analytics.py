"""Graph analytics over one snapshot: BFS, SSSP, WCC, LCC, PageRank, CDLP.

Each command loads the visible graph once (nodes in id order, edges in
storage order: source, edge type, destination) and answers what the real
engine answers, whose exact rules were read off its results:

- node ids order by their bytes, and every per-node map is keyed in that order;
- BFS visits a node's outgoing edges before its incoming ones, each by edge
  type then neighbour, and reports tree edges oriented parent -> child;
  ``truncated`` says a neighbour was left unvisited because of a bound;
- SSSP is Dijkstra whose queue breaks distance ties by node id, so the
  first-settled predecessor wins; a negative weight among the selected edge
  types refuses, reachable or not;
- WCC names a component by its smallest node id; LCC is the clustering
  coefficient of the undirected simple graph (self-loops dropped);
- PageRank is unweighted power iteration from the uniform (or personalized)
  vector, parallel edges counted each, dangling mass spread like the
  teleport, stopping once the L1 change is below the tolerance;
- CDLP is synchronous label propagation: every node takes the most frequent
  label among its neighbours (parallel edges counted each; ties to the
  smallest label; no neighbours keeps its own), stopping when nothing changes.

The algorithms are networkx's where its semantics are the engine's (connected
components, clustering), and plain numpy power iteration for PageRank, whose
iteration count is part of the answer and so must follow the engine's own
stopping rule rather than networkx's.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from .store import GRAPH_NODE, GRAPH_OUT, prefix_end, split_tuple_key, tuple_key

from .commands import handler
from .errors import StrataError
from .graph import check_edge_type, check_graph_name, check_node_id, require_graph

if TYPE_CHECKING:
    from .engine import Engine

BFS_MAX_DEPTH = 100
BFS_MAX_NODES = 10_000
PAGERANK_DAMPING = 0.85
PAGERANK_ITERATIONS = 20
PAGERANK_TOLERANCE = 1e-6
CDLP_ITERATIONS = 10


@dataclass(slots=True)
class Snapshot:
    nodes: list[str]  # in id order
    index: dict[str, int]
    edges: list[tuple[int, str, int, float]]  # (src, edge_type, dst, weight) in storage order


def _load(e: Engine, a: dict) -> Snapshot:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    g = require_graph(e, view, space, a["graph"])
    budget = a.get("budget") or {}
    if budget.get("max_nodes") is not None and g.nodes > budget["max_nodes"]:
        raise _budget(budget["max_nodes"], "nodes")
    if budget.get("max_edges") is not None and g.edges > budget["max_edges"]:
        raise _budget(budget["max_edges"], "edges")
    prefix = tuple_key(g.name)
    end = prefix_end(prefix)
    nodes = [split_tuple_key(x.key)[1] for x in e.store.scan(view, space, GRAPH_NODE, prefix, end, batch=4096)]
    index = {n: i for i, n in enumerate(nodes)}
    edges = []
    for x in e.store.scan(view, space, GRAPH_OUT, prefix, end, batch=4096):
        _, src, etype, dst = split_tuple_key(x.key)
        edges.append((index[src], etype, index[dst], json.loads(x.aux)["w"]))
    return Snapshot(nodes, index, edges)


def _budget(limit: int, what: str) -> StrataError:
    return StrataError("resource_exhausted.engine.graph_analytics_budget",
                       f"graph exceeds the analytics budget of {limit} {what}; "
                       "retry with a larger GraphAnalyticsBudget")


def _node_missing() -> StrataError:
    return StrataError("not_found.engine.graph_node", "graph node was not found in this snapshot")


def _check_edge_types(types: list[str] | None) -> None:
    for t in types or ():
        check_edge_type(t)


def _adjacency(s: Snapshot, direction: str, types: list[str] | None) -> list[list[tuple[int, str, float]]]:
    """Per node, (neighbour, edge type, weight): outgoing edges first, then incoming, each in key order."""
    allowed = None if types is None else set(types)
    out: list[list] = [[] for _ in s.nodes]
    incoming: list[list] = [[] for _ in s.nodes]
    for src, etype, dst, w in s.edges:
        if allowed is not None and etype not in allowed:
            continue
        if direction != "incoming":
            out[src].append((dst, etype, w))
        if direction != "outgoing":
            incoming[dst].append((src, etype, w))
    if direction == "outgoing":
        return out
    # Incoming lists are built in (src, type) order; the engine reads them by (type, neighbour).
    for lst in incoming:
        lst.sort(key=lambda x: (x[1], s.nodes[x[0]]))
    if direction == "incoming":
        return incoming
    return [o + i for o, i in zip(out, incoming)]


def _keyed(s: Snapshot, values, ids=None) -> dict:
    if ids is None:
        return {n: values[i] for i, n in enumerate(s.nodes)}
    return {s.nodes[i]: values[i] for i in sorted(ids)}


# -- traversals ----------------------------------------------------------------------


@handler("graph_bfs")
def graph_bfs(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    check_node_id(a["start"])
    _check_edge_types(a.get("edge_types"))
    s = _load(e, a)
    start = s.index.get(a["start"])
    if start is None:
        raise _node_missing()
    max_depth = BFS_MAX_DEPTH if a.get("max_depth") is None else a["max_depth"]
    max_nodes = BFS_MAX_NODES if a.get("max_nodes") is None else a["max_nodes"]
    adjacency = _adjacency(s, a.get("direction") or "outgoing", a.get("edge_types"))
    data = {"graph": a["graph"], "start": a["start"]}
    if max_nodes == 0:
        return {"type": "graph_bfs_result",
                "data": {**data, "visited": [], "depths": {}, "edges": [], "truncated": True}}
    depth = {start: 0}
    order, tree, truncated = [start], [], False
    head = 0
    while head < len(order):
        u = order[head]
        head += 1
        for v, etype, w in adjacency[u]:
            if v in depth:
                continue
            if depth[u] >= max_depth or len(order) >= max_nodes:
                truncated = True
                continue
            depth[v] = depth[u] + 1
            order.append(v)
            tree.append({"src": s.nodes[u], "dst": s.nodes[v], "edge_type": etype, "weight": w})
    return {"type": "graph_bfs_result", "data": {
        **data, "visited": [s.nodes[i] for i in order],
        "depths": {s.nodes[i]: depth[i] for i in sorted(depth)}, "edges": tree, "truncated": truncated}}


@handler("graph_sssp")
def graph_sssp(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    check_node_id(a["source"])
    _check_edge_types(a.get("edge_types"))
    s = _load(e, a)
    source = s.index.get(a["source"])
    if source is None:
        raise _node_missing()
    types = a.get("edge_types")
    allowed = None if types is None else set(types)
    if any(w < 0 for _, t, _, w in s.edges if allowed is None or t in allowed):
        raise StrataError("failed_precondition.engine.graph_negative_weight",
                          "shortest-path distances require non-negative edge weights")
    direction = a.get("direction") or "outgoing"
    adjacency = _adjacency(s, direction, types)
    dist = {source: 0.0}
    pred: dict[int, int] = {}
    done: set[int] = set()
    # Node indices follow id order, so (distance, index) settles ties by id.
    queue = [(0.0, source)]
    while queue:
        d, u = heapq.heappop(queue)
        if u in done:
            continue
        done.add(u)
        for v, _, w in adjacency[u]:
            nd = d + w
            if v not in done and (v not in dist or nd < dist[v]):
                dist[v] = nd
                pred[v] = u
                heapq.heappush(queue, (nd, v))
    return {"type": "graph_sssp_result", "data": {
        "graph": a["graph"], "source": a["source"], "direction": direction,
        "distances": {s.nodes[i]: dist[i] for i in sorted(dist)},
        "predecessors": {s.nodes[i]: s.nodes[pred[i]] for i in sorted(pred)}}}


# -- whole-graph measures ----------------------------------------------------------------


def _undirected(s: Snapshot) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(len(s.nodes)))
    g.add_edges_from((src, dst) for src, _, dst, _ in s.edges if src != dst)
    return g


@handler("graph_wcc")
def graph_wcc(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    s = _load(e, a)
    label = [0] * len(s.nodes)
    count = 0
    for component in nx.connected_components(_undirected(s)):
        smallest = min(component)  # indices follow id order
        count += 1
        for i in component:
            label[i] = smallest
    return {"type": "graph_wcc_result", "data": {
        "graph": a["graph"], "components": {n: s.nodes[label[i]] for i, n in enumerate(s.nodes)},
        "component_count": count}}


@handler("graph_lcc")
def graph_lcc(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    s = _load(e, a)
    coefficients = nx.clustering(_undirected(s))
    return {"type": "graph_lcc_result", "data": {
        "graph": a["graph"], "coefficients": {n: float(coefficients[i]) for i, n in enumerate(s.nodes)}}}


@handler("graph_pagerank")
def graph_pagerank(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    damping = PAGERANK_DAMPING if a.get("damping") is None else a["damping"]
    tolerance = PAGERANK_TOLERANCE if a.get("tolerance") is None else a["tolerance"]
    iterations = PAGERANK_ITERATIONS if a.get("max_iterations") is None else a["max_iterations"]
    if not 0.0 <= damping <= 1.0:
        raise _pagerank_options("pagerank damping must be within [0, 1]")
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise _pagerank_options("pagerank tolerance must be non-negative and finite")
    # The personalization is judged once the graph is found at its read (the scope, an
    # as_of, the graph's existence come first), an empty graph included, as the engine does.
    s = _load(e, a)
    personalization = a.get("personalization")
    if personalization is not None:
        if not personalization:
            raise _personalization("personalization is empty")
        if any(not (w >= 0 and math.isfinite(w)) for w in personalization.values()):
            raise _personalization("personalization contains a negative, NaN, or infinite weight")
    # An empty graph answers before the seeds are matched against its nodes.
    teleport = None if personalization is None or not s.nodes else _teleport(s, personalization)
    ranks, ran = pagerank(len(s.nodes), [x[0] for x in s.edges], [x[2] for x in s.edges],
                          damping, iterations, tolerance, teleport)
    return {"type": "graph_pagerank_result", "data": {
        "graph": a["graph"], "ranks": _keyed(s, ranks.tolist()), "iterations": ran,
        "personalized": personalization is not None}}


def _teleport(s: Snapshot, weights: dict[str, float]) -> np.ndarray:
    vector = np.zeros(len(s.nodes))
    for node, w in weights.items():
        i = s.index.get(node)
        if i is not None:
            vector[i] = w
    with np.errstate(over="ignore"):  # an overflow is judged below, not warned about on stderr
        total = vector.sum()
    # Weights that are each finite may overflow together (1.7e308 twice): the engine then
    # finds no weight to normalise by and refuses, as for weights that sum to nothing.
    if not (total > 0 and math.isfinite(total)):
        raise _personalization("personalization has no positive weight on any node in this graph")
    return vector / total


def pagerank(n: int, src: list[int], dst: list[int], damping: float, max_iterations: int,
             tolerance: float, teleport: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Power iteration as the engine runs it: (ranks, iterations run)."""
    if n == 0:
        return np.zeros(0), 0
    src_a = np.asarray(src, dtype=np.int64)
    dst_a = np.asarray(dst, dtype=np.int64)
    out_degree = np.bincount(src_a, minlength=n).astype(float)
    dangling = out_degree == 0
    share = np.divide(1.0, out_degree, out=np.zeros(n), where=~dangling)
    jump = np.full(n, 1.0 / n) if teleport is None else teleport
    rank = jump.copy()
    ran = 0
    while ran < max_iterations:
        ran += 1
        flow = np.bincount(dst_a, weights=(rank * share)[src_a], minlength=n)
        new = damping * flow + (damping * rank[dangling].sum() + (1.0 - damping)) * jump
        change = np.abs(new - rank).sum()
        rank = new
        if change < tolerance:
            break
    return rank, ran


def _pagerank_options(message: str) -> StrataError:
    return StrataError("invalid_argument.engine.graph_pagerank_options", message)


def _personalization(message: str) -> StrataError:
    return StrataError("invalid_argument.engine.graph_personalization", message)


@handler("graph_cdlp")
def graph_cdlp(e: Engine, a: dict) -> dict:
    check_graph_name(a["graph"])
    s = _load(e, a)
    direction = a.get("direction") or "both"
    limit = CDLP_ITERATIONS if a.get("max_iterations") is None else a["max_iterations"]
    neighbours = [[v for v, _, _ in row] for row in _adjacency(s, direction, None)]
    labels = list(range(len(s.nodes)))  # a label is a node index: id order is label order
    previous: list[int] | None = None
    done = 0
    while done < limit:
        new = [_most_common(labels, row, own) for own, row in enumerate(neighbours)]
        done += 1
        if new == labels:
            break
        if new == previous:
            # A two-step oscillation repeats forever: the bound's parity picks the state.
            if (limit - done) % 2:
                new = labels
            labels = new
            break
        previous, labels = labels, new
    return {"type": "graph_cdlp_result", "data": {
        "graph": a["graph"], "labels": {n: s.nodes[labels[i]] for i, n in enumerate(s.nodes)}}}


def _most_common(labels: list[int], row: list[int], own: int) -> int:
    if not row:
        return labels[own]
    counts = Counter(labels[v] for v in row)
    top = max(counts.values())
    return min(label for label, c in counts.items() if c == top)
