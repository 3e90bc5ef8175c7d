"""Relevance spread from the seeds over the dependency graph.

A personalized PageRank computed by local *push*: mass starts at the seeds,
each push keeps a share ``alpha`` at the node and passes the rest to its
neighbours in proportion to how much the question cares about each edge kind
and direction (see :mod:`compressor.analyze`).  Work is bounded by the
number of pushes, not by the size of the repository, so a query whose seeds
sit in one corner of a huge project only ever touches that corner.
"""

from __future__ import annotations

import heapq
import math
import threading
import weakref
from collections import deque

from memstrata.indexer.graph_view import GraphView

ALPHA = 0.35
EPSILON = 4e-4
MAX_PUSHES = 3000
MAX_FANOUT = 300  # strongest edges considered per node


def personalized_rank(
    graph: GraphView,
    seeds: dict[str, float],
    weights: dict[tuple[str, bool], float],
    include_tests: bool = False,
) -> dict[str, float]:
    total = sum(seeds.values())
    if total <= 0:
        return {}
    residual: dict[str, float] = {n: s / total for n, s in seeds.items()}
    rank: dict[str, float] = {}
    queue = deque(residual)
    queued = set(queue)
    transitions = _transition_cache(graph, weights, include_tests)
    pushes = 0
    # Locals: this loop runs thousands of times per query.
    popleft, append, mark, unmark = queue.popleft, queue.append, queued.add, queued.discard
    get_residual, pop_residual, get_rank = residual.get, residual.pop, rank.get
    get_out = transitions.get
    keep, eps = 1 - ALPHA, EPSILON
    while queue and pushes < MAX_PUSHES:
        u = popleft()
        unmark(u)
        r = pop_residual(u, 0.0)
        if r <= 0:
            continue
        pushes += 1
        out = get_out(u)
        if out is None:
            out = transitions[u] = _transitions(graph, u, weights, include_tests)
        if not out:
            rank[u] = get_rank(u, 0.0) + r  # a dead end keeps its mass
            continue
        rank[u] = get_rank(u, 0.0) + ALPHA * r
        mass = keep * r
        for v, share in out:
            rv = get_residual(v, 0.0) + mass * share
            residual[v] = rv
            if rv > eps and v not in queued:
                append(v)
                mark(v)
    # What was never pushed still says something about relevance.
    for n, r in residual.items():
        rank[n] = rank.get(n, 0.0) + ALPHA * r
    return rank


_CACHE_NODES = 200_000  # transition lists kept across queries, per weighting
_caches: "weakref.WeakKeyDictionary[GraphView, dict[tuple, dict]]" = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _transition_cache(graph: GraphView, weights, include_tests: bool) -> dict[str, list[tuple[str, float]]]:
    """Transition lists depend only on the graph and the question's edge
    weights, of which there are a handful: questions share them (hubs are
    pushed by nearly every query), until the graph changes."""
    key = (graph.version, tuple(sorted(weights.items())), include_tests)
    with _caches_lock:
        per_graph = _caches.setdefault(graph, {})
        cache = per_graph.get(key)
        if cache is None or len(cache) > _CACHE_NODES:
            for k in [k for k in per_graph if k[0] != key[0] or len(per_graph) > 16]:
                del per_graph[k]
            cache = per_graph[key] = {}
        return cache


def _transitions(graph: GraphView, u: str, weights, include_tests: bool) -> list[tuple[str, float]]:
    acc: dict[str, float] = {}
    for v, kind, weight, outgoing, is_test in graph.adjacency(u):
        if is_test and not include_tests:
            continue
        w = weights.get((kind, outgoing), 0.0)
        if w <= 0:
            continue
        acc[v] = acc.get(v, 0.0) + (w * (1.0 + math.log(weight)) if weight > 1.0 else w)
    if not acc:
        return []
    items = heapq.nlargest(MAX_FANOUT, acc.items(), key=lambda kv: kv[1]) if len(acc) > MAX_FANOUT else acc.items()
    s = sum(w for _, w in items)
    return [(v, w / s) for v, w in items]
