"""The project ranking's chances for a question, by symbol: what blocks borrow.

A block of code (a pasted file, a tool result) is cut by what the question
points at inside it (:mod:`.block_rank`: names, words).  That sees only the
block.  The project's ranking sees more: the dependency graph around what
the question names, full-text evidence across the project, the files the
question's words concentrate in, and recent history.  :func:`symbol_chances`
gives, for each definition the ranking reaches, its chance of being the code
the question needs (:func:`.slice.target_probability`, the model the context
slice spends its budget by), so a block can keep its likeliest definitions
whole even when their own words do not match the question's.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

from .analyze import scope_packages, validate
from .errors import QueryError
from .slice import name_index, rank_candidates, scored_candidates, target_probability

MIN_CHANCE = 0.01  # below this a definition's chance says nothing a block's own ranking does not
_CACHE_SIZE = 64

_lock = threading.Lock()
_cache: OrderedDict[tuple, dict[str, float]] = OrderedDict()


def symbol_chances(ws, question: str) -> dict[str, float]:
    """``path::qualname`` -> chance of being what ``question`` needs, for the
    definitions the project ranking reaches (tests left out); empty when the
    question is unusable or matches nothing.  Remembered per question until
    the graph changes: an agent's question stays the same for many turns."""
    try:
        query, _budget, include_tests = validate(question, 1, False)
    except QueryError:
        return {}
    with ws.lock:
        graph = ws.graph
        key = (id(graph), getattr(graph, "version", 0), query)
        with _lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return hit
        chances: dict[str, float] = {}
        ranking = rank_candidates(ws, graph, query, include_tests)
        if ranking is not None:
            # Without the share of a name the question spells: it picks one method of a class
            # among its siblings for a slice, but a pasted file of near-namesakes (one routine
            # per family, `settle_invoice_0` .. `_139`) would have every one of them spelled
            # alike, and the whole file would count as likely and never be cut.
            evidence = dataclasses.replace(ranking.evidence, question_terms=frozenset())
            for _i, unit, features in scored_candidates(graph, ranking.ranked, ranking.fill, evidence,
                                                        ranking.named, ranking.sig_only):
                if features is None:
                    continue
                p = 1.0 if unit.node in ranking.named else target_probability(features)
                if p >= MIN_CHANCE:
                    chances[unit.node] = p
    with _lock:
        _cache[key] = chances
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return chances


def named_packages(ws, question: str) -> list[str]:
    """The package directories (``crates/x/``, ``packages/y/``) the question's commit scope names."""
    with ws.lock:
        return scope_packages(question, name_index(ws.graph))
