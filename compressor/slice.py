"""``context_query``: question + budget -> the smallest slice that holds the answer."""

from __future__ import annotations

import itertools
import logging
import math
import operator
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache

from memstrata.indexer.graph_view import GraphView
from memstrata.indexer.history import RecentChanges
from memstrata.indexer.scan import shared_dirs
from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreError
from memstrata.storage import code_index as ci
from memstrata.storage.text import split_identifier

from .analyze import (
    BASE_WEIGHTS, NameIndex, find_seeds, has_other_words, intent_of, is_peripheral, names_in_tests_only,
    names_not_defined, validate,
)
from .rank import personalized_rank
from .render import (
    CONTAINERS,
    FULL,
    MAX_FULL_CONTAINER_LINES,
    SIG,
    FileDoc,
    Unit,
    cost_of,
    join_sections,
    joined_tokens,
    render_sections,
    unit_for,
)
from .terms import terms_of
from .text_cache import CachedText
from .text_cache import for_store as texts_for_store
from .tokens import count_tokens, count_tokens_memo

log = logging.getLogger(__name__)

MAX_CANDIDATES = 160
# Selection spends the budget by expected value per token.  Each candidate
# gets ``p``, the chance that it is the code the question needs, read from the
# ranking's own confidence (see target_probability).  Shown whole it is worth
# ``p``; as a signature SIG_VALUE * p (it names the target, but an agent about
# to edit still has to read the body) plus ORIENTATION (a signature tells
# where things are, whichever symbol the target is).  Offers (a body, a
# signature) are taken best value per token first while they fit, so a larger
# budget buys the bodies of the next most likely targets, not more signatures.
# SIG_VALUE trades symbol recall (a header shown) against body recall (a
# body shown whole); it was set where the development half's two figures sit
# equally far above their targets (bench/selection_fit.py score).
SIG_VALUE = 0.12
ORIENTATION = 0.001
# A file nothing else in the slice shows: its likeliest candidate's signature
# also carries FILE_VALUE times the chance that the file holds a target, so
# the slice names every file that probably matters before it spends tokens
# on a second body from one it already shows.
FILE_VALUE = 0.3
FOCUS_PROBABILITY = 0.5  # what the question asks about a named symbol ("its callers")
HINT_PROBABILITY = 0.05  # below this a signature goes without its docstring line
FILE_FRAMING = 12  # estimated tokens of a file header line
UNIT_FRAMING = 10  # estimated tokens of the gap marker before a unit
IMPORT_FRAMING = 12  # estimated tokens of an import line shown between two files of the slice
REFILL_BELOW = 0.8  # a slice under this share of the budget is selected again


@dataclass
class ContextSlice:
    context: str
    tokens: int
    baseline_tokens: int
    sources: list[str]
    symbols: list[str] = field(default_factory=list)  # "path::qualname" of every symbol shown
    full_symbols: list[str] = field(default_factory=list)  # the subset shown in full
    notes: list[str] = field(default_factory=list)
    max_tokens: int = 0

    def api_fields(self) -> dict:
        """Exactly the fields of the API reference's ``context_query`` output."""
        return {
            "context": self.context,
            "tokens": self.tokens,
            "baseline_tokens": self.baseline_tokens,
            "sources": list(self.sources),
        }


_caches_lock = threading.Lock()
_name_indexes: dict[int, tuple[int, NameIndex]] = {}
_file_tokens: dict[tuple[str, int], int] = {}


def _once_per_version(cache: dict, key, graph: GraphView, build):
    """``cache[key]``'s value if it was built on this version of ``graph``, else ``build()``'s,
    kept for later calls (built outside the lock; the cache forgets everything past 8 entries:
    graphs of other projects or versions, gone or rarely asked)."""
    with _caches_lock:
        hit = cache.get(key)
    if hit is not None and hit[0] == graph.version:
        return hit[1]
    value = build()
    with _caches_lock:
        if len(cache) >= 8:
            cache.clear()
        cache[key] = (graph.version, value)
    return value


def name_index(graph: GraphView) -> NameIndex:
    """The graph's :class:`NameIndex`, built once per graph version."""
    return _once_per_version(_name_indexes, id(graph), graph, lambda: NameIndex(graph))


def remember_file_tokens(path: str, text: str, n: int) -> None:
    with _caches_lock:
        if len(_file_tokens) > 20_000:
            _file_tokens.clear()
        _file_tokens[(path, hash(text))] = n


def remembered_file_tokens(path: str, text: str) -> int | None:
    """The whole-text count of ``text`` this process has made or read, if any."""
    return _file_tokens.get((path, hash(text)))


def file_tokens(path: str, text: str) -> int:
    n = _file_tokens.get((path, hash(text)))
    if n is None:
        n = count_tokens(text)
        remember_file_tokens(path, text, n)
    return n


_counter_pool: ThreadPoolExecutor | None = None
BACKGROUND_COUNT_BYTES = 64_000  # below this, counting inline is cheaper than a hand-off


COUNTING_THREADS = 2  # the encoder releases the GIL: both cores of a small machine count at once


def _count_in_background(files: list[tuple[str, str]]) -> list[Future]:
    """Count the files no count is remembered for on background threads, split into shares of
    about equal size (a new question's files on a fresh index: a tenth of a second on one core)."""
    global _counter_pool
    todo = [(p, t) for p, t in files if (p, hash(t)) not in _file_tokens]
    if sum(len(t) for _, t in todo) < BACKGROUND_COUNT_BYTES:
        return []
    with _caches_lock:
        if _counter_pool is None:
            _counter_pool = ThreadPoolExecutor(COUNTING_THREADS, thread_name_prefix="memstrata-tokens")
    shares: list[list[tuple[str, str]]] = [[] for _ in range(COUNTING_THREADS)]
    sizes = [0] * COUNTING_THREADS
    for p, t in sorted(todo, key=lambda pt: len(pt[1]), reverse=True):
        i = sizes.index(min(sizes))
        shares[i].append((p, t))
        sizes[i] += len(t)
    return [_counter_pool.submit(lambda share=share: [file_tokens(p, t) for p, t in share])
            for share in shares if share]


@dataclass
class Ranking:
    """What the ranking hands to selection: candidates best first, what fills
    an unused budget, and what the question said about them."""

    ranked: list[tuple[str, float]]
    fill: list[tuple[str, float]]
    named: set[str]
    focus: set[str]
    sig_only: set[str]
    evidence: "_Evidence"


def context_query(ws: Workspace, query: str, max_tokens: int = 4096, include_tests: bool = False) -> ContextSlice:
    """Build the context slice for ``query`` within ``max_tokens`` (cl100k tokens).

    ``baseline_tokens`` is the token count of the complete text of every file
    in ``sources``: what a file-level RAG would have sent to give the model
    the same sources.  Raises :class:`QueryError` for unusable input.
    """
    query, budget, include_tests = validate(query, max_tokens, include_tests)
    state = ws.quick_status()
    for attempt in range(GRAPH_BEHIND_TRIES):
        notes: list[str] = []
        missing: list[str] = []
        if state in ("indexing", "stale"):
            notes.append(f"index is {state}: answered from the {ws.files_indexed()} files indexed so far")
        try:
            result = _answer(ws, query, budget, include_tests, notes, missing,
                             last=attempt == GRAPH_BEHIND_TRIES - 1)
            break
        except _GraphBehind:
            continue  # a write landed between reading the graph and the texts: once more, in step
    # Say when what is shown is not what the files hold now: nothing keeps the index in step (a
    # one-shot query, the daemon), or a watcher has not caught up with an edit made just before.
    changed = ws.changed_on_disk(result.sources)
    gone = [p for p in changed if not (ws.root / p).exists()]
    remedy = ("the watcher is re-indexing it: ask again in a moment" if ws.watching
              else "run memstrata index for the current code")
    for paths, what in (([p for p in changed if p not in gone], "changed on disk"), (gone, "deleted")):
        if paths:
            shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
            result.notes.append(f"{shown} {what} since indexed: shown as indexed ({remedy})")
    # A name the index does not define may have been written since it was indexed: "not defined
    # in this project" would be untrue then, so say that the files are ahead of the index.
    if missing and state == "ready" and (behind := ws.behind_disk()) is not None:
        status, why, then = behind
        result.notes.append(f"the index is {status} ({why}): a definition written since is not in it yet ({then})")
    return result


GRAPH_BEHIND_TRIES = 3


class _GraphBehind(Exception):
    """The index's texts are newer than the graph whose line spans would cut them."""


def _answer(ws: Workspace, query: str, budget: int, include_tests: bool, notes: list[str],
            missing_names: list[str], last: bool) -> ContextSlice:
    """The slice from one reading of the graph and the texts (``missing_names`` gets the names the
    question writes that nothing defines); raises :class:`_GraphBehind` (unless ``last``) when the
    texts read are not the ones the graph was built from."""
    with ws.lock:
        graph = ws.graph_in_step()
        ranking = rank_candidates(ws, graph, query, include_tests)
        if not include_tests and (in_tests := names_in_tests_only(query, graph)):
            # Test code is left out unless asked for: say so when the question names some.
            notes.append(_names_note(in_tests, "defined in test code only: ask again with include_tests "
                                               "(--include-tests) to see it"))
        if missing := names_not_defined(query, graph):
            missing_names.extend(missing)
            # A question that is only such a name is answered from the words it is made of (a
            # misspelling or a renamed function shares most of them).
            closest = ("the rest of the question" if has_other_words(query, missing)
                       else "the words of its name" if len(missing) == 1 else "the words of their names")
            notes.append(_names_note(missing, f"not defined in this project: shown is the code closest to {closest}"))
        if ranking is None:
            # A question of everyday words only ("Fix flaky test") names nothing; the plain
            # full-text matches of those words are still a better answer than none.
            ranking = rank_candidates(ws, graph, query, include_tests, relaxed=True)
            if ranking is None:
                # "How does this work?": no word of it is a name, a path or a word of the code.
                # An empty answer helps nobody; the definitions the rest of the project uses most
                # are where a reader starts, and the note says that is what they are.
                overview = overview_ranking(graph, include_tests)
                if not overview:
                    notes.append("nothing in the project matches the query (no code is indexed)")
                    return ContextSlice("", 0, 0, [], notes=notes, max_tokens=budget)
                shown_overview = ("nothing in the project matches the query (no word of it is a name, a path or "
                                  "a word of the code): shown instead is an overview, the definitions the project "
                                  "uses most; ask with the names of functions, classes or files for a focused slice")
                notes.append(shown_overview)
                result = _build(ws, graph, overview, budget, notes, in_step=not last)
                if not result.context:
                    # Not even one definition of the overview fit: the notes say nothing is shown,
                    # rather than an overview and a budget too small for "matching" code.
                    result.notes = [n for n in result.notes if n not in (shown_overview, _nothing_fits(budget))]
                    result.notes.insert(0, f"nothing in the project matches the query (no word of it is a name, a "
                                           f"path or a word of the code), and max_tokens={budget} is too small for "
                                           f"an overview of the project; ask with the names of functions, classes "
                                           f"or files")
                return result
            if not missing_names:  # else its note already said what is shown: the code closest to its words
                notes.append("no name, path or distinctive word of the query matches the project: shown are the "
                             "closest full-text matches of its everyday words")
        return _build(ws, graph, ranking.ranked, budget, notes, ranking.named, ranking.focus, ranking.fill,
                      ranking.sig_only, ranking.evidence, in_step=not last, exports=speaks_of_exports(query))


OVERVIEW_METHOD = 0.5  # a method ranks below a top-level definition used as often: its class shows it


def overview_ranking(graph: GraphView, include_tests: bool) -> list[tuple[str, float]]:
    """The project's definitions ranked by how much the rest of it uses them (the distinct
    definitions and files of other files that call, reference, subclass them), for a question
    that names nothing: the slice's best candidates, best first, ties broken by node id."""
    return _once_per_version(_overviews, (id(graph), include_tests), graph,
                             lambda: _overview(graph, include_tests))


def _overview(graph: GraphView, include_tests: bool) -> list[tuple[str, float]]:
    priors = _priors_of(graph)
    scored = []
    for path in graph.files():
        if not include_tests and graph.is_test_node(path):
            continue
        for node in graph.symbols_in_file(path):
            if not include_tests and graph.is_test_node(node):
                continue
            users = {v for v, kind, _w, outgoing, is_test in graph.adjacency(node)
                     if not outgoing and kind != "contains" and (include_tests or not is_test)
                     and (v.split("::", 1)[0] != path)}
            prior = priors.get(node)
            if prior is None:
                prior = priors[node] = _prior(graph, node)
            score = (1.0 + len(users)) * prior
            if "." in graph.node(node)["qualname"]:
                score *= OVERVIEW_METHOD
            scored.append((node, score))
    scored.sort(key=lambda kv: (-kv[1], kv[0]))
    return scored[:MAX_CANDIDATES]


_overviews: dict[tuple[int, bool], tuple[int, list[tuple[str, float]]]] = {}


def _names_note(names: list[str], what: str) -> str:
    """``a, b are <what>``: a note about up to three names the question wrote."""
    return f"{', '.join(names[:3])} {'is' if len(names) == 1 else 'are'} {what}"


def rank_candidates(ws: Workspace, graph: GraphView, query: str, include_tests: bool,
                    relaxed: bool = False) -> Ranking | None:
    """Seeds, ranking and the evidence behind it for a validated ``query``;
    None when nothing in the project matches it (``relaxed``: see :func:`find_seeds`)."""
    names = name_index(graph)
    intent = intent_of(query)

    def allowed(node: str) -> bool:
        return include_tests or not graph.is_test_node(node)

    seeds = find_seeds(query, graph, names, ws.store, include_tests, relaxed)
    personalization = seeds.personalization()
    if not personalization:
        return None
    # Sorted so that equal questions always rank identically.
    personalization = dict(sorted(personalization.items()))
    scores = personalized_rank(graph, personalization, intent.weights, include_tests)
    # The prior only ever lowers a score, so it need only be applied to
    # the best few hundred symbols.
    pool = _best_symbols(scores, MAX_CANDIDATES * 4, lambda n: "::" in n and allowed(n) and n in graph)
    adjusted = []
    priors = _priors_of(graph)
    for node, score in pool:
        if node in seeds.named:  # what the question names comes first
            adjusted.append((node, score * 2 + 1.0))
        else:
            prior = priors.get(node)
            if prior is None:
                prior = priors[node] = _prior(graph, node)
            adjusted.append((node, score * prior * seeds.path_boost(graph.file_of(node))))
    adjusted, sig_only = _with_named_members(graph, seeds.named, adjusted, allowed)
    adjusted.sort(key=lambda kv: (-kv[1], kv[0]))
    ranked = adjusted[:MAX_CANDIDATES]
    fill = _fill_candidates(graph, seeds, adjusted, allowed)
    if not ranked:
        ranked, fill = fill[:MAX_CANDIDATES], fill[MAX_CANDIDATES:]
    # What the question asks about a named symbol ("its callers", "its
    # subclasses") is shown in full along with it, budget permitting.
    boosted = {k for k, w in intent.weights.items() if w > BASE_WEIGHTS[k]}
    focus = set(seeds.named)
    for node in seeds.named:
        for v, kind, _w, outgoing, is_test in graph.adjacency(node):
            if (kind, outgoing) in boosted and "::" in v and (include_tests or not is_test):
                focus.add(v)
    evidence = _Evidence.of(seeds, personalization, ws.history, query)
    return Ranking(ranked, fill, seeds.named, focus, sig_only, evidence)


def _best_symbols(scores: dict[str, float], n: int, keep) -> list[tuple[str, float]]:
    """The ``n`` best-scored nodes passing ``keep``, best first (ties in the
    push's deterministic order), the filter run only as far as needed."""
    kept = []
    for kv in sorted(scores.items(), key=operator.itemgetter(1), reverse=True):
        if keep(kv[0]):
            kept.append(kv)
            if len(kept) == n:
                break
    return kept


MEMBER_RANK = 40  # a named class's members rank no lower than this place, as signatures
MAX_NAMED_MEMBERS = 60


def _with_named_members(graph: GraphView, named: set[str], adjusted: list[tuple[str, float]],
                        allowed) -> tuple[list[tuple[str, float]], set[str]]:
    """A class (struct, trait, ...) the question names brings its members,
    wherever they are defined (impl blocks in other files too): too large to
    show whole, it is shown as its header and the signatures of what it
    holds.  They enter at MEMBER_RANK, so they neither crowd out what ranks
    on its own nor take full bodies; returns the scores and those members."""
    scores = dict(adjusted)
    ordered = sorted(scores.values(), reverse=True)
    if not ordered:
        return adjusted, set()
    floor = ordered[min(MEMBER_RANK, len(ordered) - 1)]
    promoted: set[str] = set()
    for node in sorted(named):
        if node not in scores or graph.node(node)["kind"] not in CONTAINERS | {"interface"}:
            continue
        members = [v for v, kind, _w, out, _t in graph.adjacency(node) if kind == "contains" and out and allowed(v)]
        members.sort(key=lambda v: (graph.file_of(v), graph.node(v)["start_line"]))
        for i, v in enumerate(members[:MAX_NAMED_MEMBERS]):
            if scores.get(v, 0.0) < floor:
                scores[v] = floor * (1 - i * 1e-4)  # in source order
                promoted.add(v)
    return list(scores.items()), promoted


def _fill_candidates(graph: GraphView, seeds, adjusted: list[tuple[str, float]], allowed) -> list[tuple[str, float]]:
    """What fills the budget once the graph ranking runs out, best first:
    the rest of the ranked pool, then full-text hits the ranking never
    reached, then the definitions of the files the question names."""
    out = list(adjusted[MAX_CANDIDATES:])
    seen = {n for n, _ in adjusted}
    floor = adjusted[-1][1] if adjusted else 1.0
    extra = [n for n in seeds.lexical if n not in seen]
    extra += [n for path in sorted(seeds.files, key=lambda p: -seeds.files[p])
              for n in graph.symbols_in_file(path) if n not in seen]
    for i, node in enumerate(dict.fromkeys(extra)):
        if allowed(node) and node in graph:
            out.append((node, floor * 0.5 / (1 + i * 0.01)))
    return out


_RUST_TEST_MODULES = frozenset({"tests", "test"})


_priors: dict[int, tuple[int, dict[str, float]]] = {}


def _priors_of(graph: GraphView) -> dict[str, float]:
    """The priors worked out so far on this version of ``graph``: a prior depends on the graph
    alone, and a new question's candidates are mostly symbols earlier questions ranked."""
    with _caches_lock:
        hit = _priors.get(id(graph))
        if hit is not None and hit[0] == graph.version:
            return hit[1]
        if len(_priors) >= 8:  # graphs of other projects or versions, gone or rarely asked
            _priors.clear()
        memo: dict[str, float] = {}
        _priors[id(graph)] = (graph.version, memo)
        return memo


def _prior(graph: GraphView, node: str) -> float:
    """A multiplier on ranking scores for symbols that are usually noise."""
    data = graph.node(node)
    path = data["path"]
    factor = 1.0
    if is_peripheral(path):  # examples, docs, scripts (analyze.PERIPHERAL_DIRS)
        factor *= 0.4
    if path.endswith(".pyi") and f"{path[:-1]}::{data['qualname']}" in graph:
        factor *= 0.3  # the stub of a symbol whose implementation is indexed
    if data["kind"] == "constant":
        factor *= 0.5
    if path.endswith(".rs") and data["qualname"].split(".", 1)[0] in _RUST_TEST_MODULES:
        factor *= 0.2  # unit tests inside a source file (`#[cfg(test)] mod tests`)
    return factor


def _nothing_fits(budget: int) -> str:
    return f"max_tokens={budget} is too small for any matching code"


def _build(ws: Workspace, graph: GraphView, ranked: list[tuple[str, float]], budget: int,
           notes: list[str], named: set[str] = frozenset(), focus: set[str] = frozenset(),
           fill: list[tuple[str, float]] = (), sig_only: set[str] = frozenset(),
           evidence: "_Evidence | None" = None, in_step: bool = False, exports: bool = False) -> ContextSlice:
    docs = _Docs(ws, graph)
    docs.load(list(dict.fromkeys(graph.file_of(n) for n, _ in ranked)))
    if in_step and graph.generation is not None and ci.code_generation(ws.store) != graph.generation:
        raise _GraphBehind
    reexports = _reexport_units(ws, graph, docs, ranked, named, int(budget * REEXPORT_MAX_SHARE)) if exports else []
    reserved = sum(u.cost_full for u in reexports)
    budget -= reserved
    units, estimate = _select(graph, docs, ranked, budget, named, focus, fill, sig_only=sig_only, evidence=evidence)
    # Whole-file token counts (baseline_tokens) are the costliest count of a
    # query on a cold cache; tiktoken releases the GIL, so they run on the
    # other core while the slice is fitted.
    counting = _count_in_background([(p, docs.texts[p]) for p in dict.fromkeys(u.path for u in units)])
    if reexports:
        units = reexports + units
        budget += reserved
    shown = docs.shown(units)
    sections: dict = {}
    counted: dict[str, int] = {}
    context, fitted, file_order, tokens = _fit(graph, shown, units, budget, sections, counted)
    if tokens < budget * REFILL_BELOW and estimate >= budget * 0.9 and tokens > 0:
        # The per-unit framing estimates were pessimistic (small units, few
        # gap markers): select again for the budget the text really has left.
        nominal = int(budget * min(3.0, estimate / tokens) * 0.95)
        units, _ = _select(graph, docs, ranked, nominal - reserved, named, focus, fill,
                           full_limit=budget - reserved, sig_only=sig_only, evidence=evidence)
        units = reexports + units
        shown = docs.shown(units)
        context2, fitted2, order2, tokens2 = _fit(graph, shown, units, budget, sections, counted)
        if tokens2 > tokens:
            context, fitted, file_order, tokens = context2, fitted2, order2, tokens2
    units = fitted
    for share in counting:
        share.result()
    baseline = sum(file_tokens(p, docs.texts[p]) for p in file_order)
    docs.save_counts(file_order)
    if not units and ranked:
        notes.append(_nothing_fits(budget))
    full = [u.node for u in units if u.mode == FULL and u.kind != REEXPORT_KIND]
    inside = _shown_inside(graph, [u for u in units if u.mode == FULL and u.kind != REEXPORT_KIND])
    if named and units and named.isdisjoint([u.node for u in units] + inside):
        # What did fit is only code near a name the question wrote: say so, or a reader takes a
        # neighbour's constant for the answer.
        left_out = list(dict.fromkeys(n.split("::", 1)[-1] for n in sorted(named)))
        notes.append(f"max_tokens={budget} is too small for {', '.join(left_out[:3])}"
                     f"{f' and {len(left_out) - 3} more' if len(left_out) > 3 else ''}, which the question "
                     "names: shown is what fits")
    return ContextSlice(
        context=context,
        tokens=tokens,
        baseline_tokens=baseline,
        sources=file_order,
        symbols=list(dict.fromkeys([u.node for u in units if u.kind != REEXPORT_KIND] + inside)),
        full_symbols=list(dict.fromkeys(full + inside)),
        notes=notes,
        max_tokens=budget,
    )


# A question about what a module exports ("export `dehydrateQuery`", "re-export the types", "the
# public options") is answered in two places in JavaScript and TypeScript: the module that defines
# the name, and the package's entry file (an `index.ts` barrel) whose `export ... from './module'`
# lines make up the public surface.  Such a barrel often defines nothing itself, so no ranking of
# definitions ever reaches it.  When the question speaks of exports, the re-export lines naming the
# files of its likeliest targets are shown (a few lines each, at most REEXPORT_FILES barrels).
_EXPORT_WORD = re.compile(r"\b(?:re-?)?export(?:s|ed|ing)?\b|\bexpos(?:e|es|ed|ing)\b"
                          r"|\bpublic\s+(?:api|apis|types?|interfaces?|options?|methods?|functions?|classes|class"
                          r"|surface)\b", re.IGNORECASE)
REEXPORT_KIND = "re-export"
REEXPORT_TARGET_FILES = 3  # the files of the best-ranked candidates whose re-exports are looked for
REEXPORT_FILES = 2
REEXPORT_IMPORTERS = 40
REEXPORT_MAX_SHARE = 0.1  # of the budget, at most, for re-export lines
REEXPORT_MAX_LINES = 12  # a statement longer than this shows its first line only


def speaks_of_exports(query: str) -> bool:
    """Whether ``query`` asks about what a module exports or exposes publicly."""
    return _EXPORT_WORD.search(query) is not None


def _reexport_units(ws: Workspace, graph: GraphView, docs: "_Docs", ranked: list[tuple[str, float]],
                    named: set[str], room: int) -> list[Unit]:
    """Units showing the `export ... from` statements of the barrels that re-export the files of
    the question's likeliest targets (named ones first), nearest barrel first."""
    targets: list[str] = []
    for node in sorted(named) + [n for n, _ in ranked]:
        path = graph.file_of(node)
        if path not in targets:
            targets.append(path)
        if len(targets) >= REEXPORT_TARGET_FILES:
            break
    barrels: dict[str, set[int]] = {}  # barrel -> first lines of its statements re-exporting a target
    distance: dict[str, int] = {}
    for target in targets:
        importers = [v for v, kind, _w, out, is_test in graph.adjacency(target)
                     if kind == "imports" and not out and not is_test and v != target]
        if not importers:
            continue
        # A widely used module has hundreds of importers: its barrel is among the nearest few.
        importers = sorted(importers, key=lambda p: (_distance(p, target), p))[:REEXPORT_IMPORTERS]
        docs.load(importers)
        for path, _module, _name, _alias, line, to in ci.load_imports(ws.store, importers):
            doc = docs.get(path) if to == target else None
            if doc is None or not 0 < line <= len(doc.lines):
                continue
            if not doc.lines[line - 1].lstrip().startswith("export"):
                continue  # an import uses the module; only a re-export publishes it
            barrels.setdefault(path, set()).add(line)
            distance[path] = min(distance.get(path, 1 << 30), _distance(path, target))
    out: list[Unit] = []
    used = 0
    for path in sorted(barrels, key=lambda p: (distance[p], p))[:REEXPORT_FILES]:
        doc = docs.get(path)
        units: list[Unit] = []
        for first in sorted(barrels[path]):
            last = _statement_end(doc.lines, first)
            if last - first + 1 > REEXPORT_MAX_LINES:
                last = first
            unit = Unit(f"{path}::<{REEXPORT_KIND}:{first}>", path, 0.0, FULL, first, last, REEXPORT_KIND, None)
            unit.cost_full = cost_of(doc, unit, graph, FULL) + UNIT_FRAMING + (FILE_FRAMING if not units else 0)
            if used + unit.cost_full > room:
                return out + units  # the targets' own code comes first
            unit.taken = 1  # kept before anything selection took: it was reserved for
            units.append(unit)
            used += unit.cost_full
        out += units
    return out


def _distance(barrel: str, target: str) -> int:
    """Directory steps from ``target`` up to the nearest directory it shares with ``barrel``,
    then down to ``barrel``."""
    return barrel.count("/") + target.count("/") - 2 * shared_dirs(barrel, target)


def _statement_end(lines: list[str], first: int) -> int:
    """The last line of the `export ... from '...'` statement starting at line ``first``."""
    for i in range(first, min(len(lines), first + 60) + 1):
        text = lines[i - 1]
        if re.search(r"\bfrom\s*['\"]", text) or text.rstrip().endswith(";") or (i == first and "{" not in text):
            return i
    return first


def _shown_inside(graph: GraphView, full: list[Unit]) -> list[str]:
    """The definitions written inside a unit shown whole (a class's methods,
    a function's closures): they are shown whole too."""
    out = []
    for u in full:
        prefix = u.node + "."  # what is nested in it is named under it (checked before its lines)
        for n in graph.symbols_in_file(u.path):
            if n.startswith(prefix) and _is_inside(n, u, graph):
                out.append(n)
    return out


class _Docs:
    """File texts for selection: the ranked files up front, fill files on demand."""

    def __init__(self, ws: Workspace, graph: GraphView):
        self.ws, self.graph = ws, graph
        self.cache = texts_for_store(ws.store)
        self.generation = ci.code_generation(ws.store)
        self.texts: dict[str, str] = {}
        self.hashes: dict[str, str] = {}
        self.uncounted: set[str] = set()  # files whose token count the index has not saved
        self.docs: dict[str, FileDoc] = {}
        self.cached: dict[str, CachedText] = {}
        self.missing: set[str] = set()
        self.with_imports: set[str] = set()

    def load(self, paths: list[str]) -> None:
        paths = [p for p in paths if p not in self.docs and p not in self.missing]
        if not paths:
            return
        rows = self.cache.read(self.ws.store, self.generation, paths)
        for path in paths:
            row = rows.get(path)
            if row is None:
                self.missing.add(path)
                continue
            text, self.hashes[path], tokens = row.text, row.hash, row.tokens
            if tokens is not None:
                remember_file_tokens(path, text, tokens)
            else:
                self.uncounted.add(path)
            self.texts[path] = text
            self.cached[path] = row
            self.docs[path] = FileDoc(path, self.graph.node(path).get("language") or "", row.lines,
                                      line_ends=row.line_ends)

    def save_counts(self, paths: list[str]) -> None:
        """Save the whole-file counts this query made, so no later process
        (a one-shot query, a restarted server) counts those files again.
        Best effort, and never waited for: a read-only index, or one another
        process is writing, just counts again next time."""
        todo = [p for p in paths if p in self.uncounted]
        store = self.ws.store
        if not todo or store.readonly:
            return
        rows = [(file_tokens(p, self.texts[p]), p, self.hashes[p]) for p in todo]
        try:
            with store.write(wait=False) as conn:
                ci.set_file_tokens(conn, rows)
            self.uncounted.difference_update(todo)
            for tokens, path, digest in rows:
                self.cache.counted(path, digest, tokens)
        except StoreError as exc:
            log.debug("file token counts not saved: %s", exc)

    def get(self, path: str) -> FileDoc | None:
        if path not in self.docs:
            self.load([path])
        return self.docs.get(path)

    def shown(self, units: list[Unit]) -> dict[str, FileDoc]:
        """The documents of the chosen units, with the imports rendering needs."""
        docs = {u.path: self.docs[u.path] for u in units}
        todo = [p for p in docs if p not in self.with_imports]
        if todo:
            unread = []
            for p in todo:
                known = self.cached[p].imports
                if known is None:
                    unread.append(p)
                else:
                    docs[p].imports.extend(known)
            if unread:
                for path, module, name, alias, line, target in ci.load_imports(self.ws.store, unread):
                    docs[path].imports.append((line, target))
                for p in unread:  # kept with the text, under the same code generation
                    self.cached[p].imports = list(docs[p].imports)
            self.with_imports.update(todo)
        return docs


def _select(graph: GraphView, docs: _Docs, ranked, budget: int, named: set[str] = frozenset(),
            focus: set[str] = frozenset(), fill: list[tuple[str, float]] = (),
            full_limit: int | None = None, sig_only: set[str] = frozenset(),
            evidence: "_Evidence | None" = None) -> tuple[list[Unit], int]:
    """Units chosen by expected value per token until the (estimated) budget
    is spent, and that estimate.  ``full_limit`` caps the full bodies when
    ``budget`` is a nominal figure (a refill after pessimistic estimates)."""
    if not ranked:
        return [], 0
    evidence = evidence or _Evidence()
    full_cap = full_limit or budget
    chosen: dict[str, Unit] = {}
    files: set[str] = set()
    used = 0

    imports: dict[str, set[str]] = {}

    def imported_by(path: str) -> set[str]:
        found = imports.get(path)
        if found is None:
            found = imports[path] = {v for v, kind, _w, out, _t in graph.adjacency(path) if kind == "imports" and out}
        return found

    def framing(path: str) -> int:
        if path in files:
            return UNIT_FRAMING
        # A new file also brings the import lines that tie it to the files
        # already shown (rendered both ways, one line per file depended on).
        links = len(imported_by(path) & files) + sum(1 for f in files if path in imported_by(f))
        return UNIT_FRAMING + FILE_FRAMING + IMPORT_FRAMING * links

    order = itertools.count(1)

    def take(unit: Unit, mode: str, cost: int) -> None:
        nonlocal used
        previous = chosen.get(unit.node)
        if previous is not None:  # an upgrade: the body replaces the signature, its framing stays
            used -= previous.cost_sig
        else:
            used += framing(unit.path)
        if mode == FULL:
            # A container shown in full covers members chosen before it.
            for member in [n for n in chosen if _is_inside(n, unit, graph)]:
                m = chosen.pop(member)
                used -= (m.cost_full if m.mode == FULL else m.cost_sig) + UNIT_FRAMING
        unit.mode = mode
        unit.taken = next(order)  # an upgrade to a body counts from when it was taken
        chosen[unit.node] = unit
        files.add(unit.path)
        used += cost

    # What the question names comes first, whole when it fits.
    units: dict[str, Unit] = {}
    probability: dict[str, float] = {}
    candidates: list[tuple[int, str, Unit, bool]] = []
    fullable: set[str] = set()
    unreached: list[tuple[int, str, float]] = []
    for i, unit, features in scored_candidates(graph, ranked, fill, evidence, named, sig_only,
                                               lambda path: docs.get(path) is not None, unreached=unreached):
        node = unit.node
        units[node] = unit
        is_container = unit.kind in CONTAINERS
        lines = unit.end - unit.start + 1
        if features is None:
            p = 0.0  # fill the ranking never reached nor search found: a signature at most
        else:
            p = target_probability(features)
            if node in focus:
                p = max(p, FOCUS_PROBABILITY)
        # A class, struct or type is shown whole when the question names a
        # small one, or when its chance of being the target (a change to its
        # fields, attributes or class-level code) pays for its lines like any
        # body's; a larger one's header frames the members that rank on their own.
        if is_container:
            can_full = ((node in named and lines <= MAX_FULL_CONTAINER_LINES)
                        or (p > 0 and lines <= MAX_EV_CONTAINER_LINES))
        else:
            can_full = p > 0
        if can_full:
            fullable.add(node)
        probability[node] = p
        unit.hint = node in named or p >= HINT_PROBABILITY
        candidates.append((i, node, unit, can_full))
    # The chance that each file holds a target, and its likeliest candidate.
    file_miss: dict[str, float] = {}
    file_best: dict[str, str] = {}
    for node, p in probability.items():
        path = units[node].path
        file_miss[path] = file_miss.get(path, 1.0) * (1.0 - p)
        if p > probability.get(file_best.get(path, ""), -1.0):
            file_best[path] = node
    offers: list[tuple[float, int, str, str]] = []
    worth_of: dict[tuple[str, str], float] = {}
    body_estimate: dict[str, int] = {}
    nested = nested_worth(probability, units, graph, fullable)
    for i, node, unit, can_full in candidates:
        p = probability[node]
        if can_full:
            body_estimate[node] = _estimate_tokens(docs.get(unit.path), unit)
        if node in named:
            offers.append((-float("inf"), i, node, FULL if can_full else SIG))
            continue
        if can_full and p > 0:
            worth = p + nested.get(node, 0.0)
            offers.append((-(worth / (body_estimate[node] + UNIT_FRAMING)), i, node, FULL))
            worth_of[(node, FULL)] = worth
        value = SIG_VALUE * p + ORIENTATION
        if file_best.get(unit.path) == node:
            value += FILE_VALUE * (1.0 - file_miss[unit.path])
        offers.append((-(value / (SIG_ESTIMATE + UNIT_FRAMING)), i, node, SIG))
        worth_of[(node, SIG)] = value
    # Fill nothing reached has no chance of being the target (p = 0 above): its signature is worth
    # orientation alone (its file's chance, the product of 1 - p, adds nothing either).
    unreached_score: dict[str, float] = {}
    for i, node, score in unreached:
        unreached_score[node] = score
        offers.append((-(ORIENTATION / (SIG_ESTIMATE + UNIT_FRAMING)), i, node, SIG))
        worth_of[(node, SIG)] = ORIENTATION
    offers.sort()
    offers = _large_body_first(offers, worth_of, body_estimate, budget, full_cap)

    def named_reserve(node: str) -> int:
        """Room for the signatures of the other named symbols not shown yet: every symbol the
        question names is shown at least so, and a body that would crowd one out waits."""
        total = 0
        for n in named:
            if n != node and n in units and n not in chosen and docs.get(units[n].path) is not None:
                other = units[n]
                if not other.cost_sig:
                    other.cost_sig = cost_of(docs.get(other.path), other, graph, SIG)
                total += other.cost_sig + framing(other.path)
        return total

    for _density, _i, node, mode in offers:
        if used >= budget * 0.98:
            break
        unit = units.get(node)
        if unit is None:  # unreached fill, made a unit now that selection got this far
            if docs.get(graph.file_of(node)) is None:
                continue
            unit = units[node] = unit_for(node, graph, unreached_score[node])
            unit.hint = False
        current = chosen.get(node)
        if current is not None and (current.mode == FULL or mode == SIG):
            continue
        if _covered(node, chosen, graph):
            continue
        doc = docs.get(unit.path)
        extra = 0 if current is not None else framing(unit.path)
        if mode == FULL:
            refund = current.cost_sig if current is not None else 0
            room = full_cap - used + refund - extra
            if node in named:
                room -= named_reserve(node)
            # Counting a body exactly costs as much as rendering it: a body
            # whose estimate is well past the room left is not counted at all.
            fits = body_estimate[node] <= room * FULL_ESTIMATE_SLACK
            unit.cost_full = cost_of(doc, unit, graph, FULL) if fits else room + 1
            if unit.cost_full <= room:
                take(unit, FULL, unit.cost_full)
                continue
            if node in named and current is None:
                mode = SIG  # a named symbol too large to show whole still gets its signature
            else:
                continue
        unit.cost_sig = cost_of(doc, unit, graph, SIG)
        if used + unit.cost_sig + extra <= budget:
            # A body that costs no more than its elision marker is shown instead of it: the same
            # tokens, and the code itself rather than a note that it is there.
            if unit.kind not in CONTAINERS and unit.end - unit.start < SMALL_BODY_LINES:
                whole = cost_of(doc, unit, graph, FULL)
                if whole <= unit.cost_sig:
                    unit.cost_full = whole
                    take(unit, FULL, whole)
                    continue
            unit.cost_full = 0
            take(unit, SIG, unit.cost_sig)
    return list(chosen.values()), used


LARGE_BODY_SHARE = 0.25  # a body estimated past this share of the budget is "large"
LARGE_BODY_TRIES = 3  # how many of the most valuable large bodies are tried first
LARGE_BODY_GAIN = 1.05  # and how much more the plan that starts with one must be worth
LARGE_BODY_MIN_WORTH = 0.1  # a large body worth less never pays for the room it takes
PLAN_OFFERS = 240  # plans are compared on the offers that come first (the rest add little)


def _large_body_first(offers: list[tuple[float, int, str, str]], worth_of: dict[tuple[str, str], float],
                      body_estimate: dict[str, int], budget: int, full_cap: int) -> list[tuple[float, int, str, str]]:
    """Offers in the order they are taken: best value per token first, or,
    when that plan is worth clearly less, one large body first.

    Taking the best value per token first is the right plan while every
    offer is small next to the budget; a body that fills a large part of
    it breaks that: the many small offers ahead of it leave no room, even
    when it alone (a long function that is very likely the target) is worth
    more than all of them.  This is the classic remedy for a greedy
    knapsack: also plan with each of the few most valuable large bodies
    taken first, the rest by value per token, and keep the plan worth most.
    Plans are compared on estimated costs, so nothing is counted twice."""
    large = sorted(((worth_of[(node, mode)], node) for _d, _i, node, mode in offers
                    if mode == FULL and _d != -float("inf") and worth_of[(node, mode)] >= LARGE_BODY_MIN_WORTH
                    and budget * LARGE_BODY_SHARE < body_estimate[node] + UNIT_FRAMING <= full_cap),
                   reverse=True)[:LARGE_BODY_TRIES]
    if not large:
        return offers
    best_value, best = _plan_value(offers, worth_of, body_estimate, budget, full_cap), None
    for _worth, node in large:
        value = _plan_value(offers, worth_of, body_estimate, budget, full_cap, node)
        if value > best_value * LARGE_BODY_GAIN:
            best_value, best = value, node
    if best is None:
        return offers
    first = [o for o in offers if o[2] == best and o[3] == FULL]
    named = [o for o in offers if o[0] == -float("inf")]
    rest = [o for o in offers if o[0] != -float("inf") and not (o[2] == best and o[3] == FULL)]
    return named + first + rest


def _plan_value(offers, worth_of, body_estimate, budget: int, full_cap: int, first: str | None = None) -> float:
    """What taking ``offers`` in order (``first``'s body before all but the
    named ones) is worth, on estimated costs."""
    order = offers[:PLAN_OFFERS]
    if first is not None:
        order = ([o for o in order if o[0] == -float("inf")] + [(0.0, 0, first, FULL)]
                 + [o for o in order if o[0] != -float("inf")])
    used, value = 0, 0.0
    taken: dict[str, str] = {}
    smallest = SIG_ESTIMATE + UNIT_FRAMING
    for _d, _i, node, mode in order:
        if used >= budget * 0.98 or budget - used < smallest:
            break
        current = taken.get(node)
        if current == FULL or (current is not None and mode == SIG):
            continue
        if mode == FULL:
            cost = body_estimate.get(node, 0) + UNIT_FRAMING
            refund = SIG_ESTIMATE + UNIT_FRAMING if current == SIG else 0
            if used - refund + cost > full_cap:
                continue
            value -= worth_of.get((node, SIG), 0.0) if current == SIG else 0.0
        else:
            cost, refund = SIG_ESTIMATE + UNIT_FRAMING, 0
            if used + cost > budget:
                continue
        used += cost - refund
        value += worth_of.get((node, mode), 0.0)
        taken[node] = mode
    return value


def scored_candidates(graph: GraphView, ranked, fill, evidence: "_Evidence", named: set[str], sig_only: set[str],
                      has_file=lambda path: True, unreached: list | None = None):
    """Each candidate once, best first: (place, unit, the model's features),
    features None for fill that neither the ranking nor search reached.
    A full-text hit past the ranking still has its search evidence: code
    that spells the question's words, in a corner the graph walk did not
    reach (its score places it below every ranked one).

    With ``unreached`` given, such fill (unless the question names it) is
    not yielded but appended there as (place, node, score), its file not
    looked at: it can only ever be a signature for orientation, taken last,
    and most of it never is, so its units are made only when selection
    gets that far (two thirds of the candidates of a typical question)."""
    holds: dict[str, bool] = {}

    def container(node: str) -> bool:
        if node not in holds:
            holds[node] = _holds_definitions(graph, node)
        return holds[node]

    unnamed = [s for n, s in ranked if n not in named and n not in sig_only and not container(n)]
    top = (unnamed[0] if unnamed else (ranked[0][1] if ranked else 1.0)) or 1.0
    seen: set[str] = set()
    n_ranked = len(ranked)
    for i, (node, score) in enumerate(itertools.chain(ranked, fill)):
        if node in seen:
            continue
        if unreached is not None and i >= n_ranked and node not in evidence.lexical and node not in named:
            seen.add(node)  # its file is looked at when (if) selection reaches it
            unreached.append((i, node, score))
            continue
        if not has_file(graph.file_of(node)):
            continue
        seen.add(node)
        unit = unit_for(node, graph, score)
        if i >= n_ranked and node not in evidence.lexical:
            yield i, unit, None
        else:
            yield i, unit, evidence.features(i, score / top, unit, node in named, node in sig_only, container(node))


def _holds_definitions(graph: GraphView, node: str) -> bool:
    """Whether ``node`` is a container with definitions of its own (a class with methods, a type
    with an `impl` or Go methods).  A TypeScript interface of properties or a `type` alias, a Go
    struct without methods, a data class of fields only: of a container's kind, but the unit a
    change edits, like a function."""
    if graph.node(node)["kind"] not in _CONTAINER_KINDS:
        return False
    if any(kind == "contains" and out for _, kind, _, out, _ in graph.adjacency(node)):
        return True
    # Methods written beside their type at a file's top level (Go's `func (t *T) m()`, a C++
    # out-of-line definition) hang off the file, not the type: they are found by their names.
    path, qualname = node.split("::", 1)
    prefix = f"{path}::{qualname}."
    return any(n.startswith(prefix) for n in graph.symbols_in_file(path))


def nested_worth(probability: dict[str, float], units: dict[str, Unit], graph: GraphView,
                 fullable: set[str] | None = None) -> dict[str, float]:
    """For each candidate body, the chances of the candidates written inside
    it.  A body shown whole shows whole every definition nested in it
    (closures, inner helpers, the handlers an object literal holds, a class's
    methods), so its worth is its own chance plus theirs.  A class counts only
    where it may be shown whole (``fullable``; all function-like bodies may)."""
    nested: dict[str, float] = {}
    for node, p in probability.items():
        if p <= 0:
            continue
        path, _, qual = node.partition("::")
        parts = qual.split(".")
        for k in range(len(parts) - 1, 0, -1):
            outer = units.get(f"{path}::{'.'.join(parts[:k])}")
            if outer is None or not _is_inside(node, outer, graph):
                continue
            if outer.kind not in CONTAINERS or (fullable is not None and outer.node in fullable):
                nested[outer.node] = nested.get(outer.node, 0.0) + p
    return nested


SIG_ESTIMATE = 24  # tokens of a typical signature line with its elision note
SMALL_BODY_LINES = 8  # a definition this short may cost no more whole than as its signature
FULL_ESTIMATE_SLACK = 1.4  # how far a body's character-based estimate may overshoot its count
MAX_EV_CONTAINER_LINES = 200  # an unnamed class shown whole must pay for its lines; past this it never does

# Kinds that hold other definitions: rarely the edited unit themselves.
_CONTAINER_KINDS = frozenset({"class", "struct", "interface", "enum", "module", "impl", "trait", "type"})


@dataclass
class _Evidence:
    """What the seeding knew about each candidate, beyond its score."""

    lexical: dict[str, int] = field(default_factory=dict)  # place among the full-text hits
    seeded: frozenset[str] = frozenset()  # started with mass of its own
    path_boost: Callable[[str], float] = lambda path: 1.0  # the path evidence's multiplier for a file
    file_lexical: dict[str, int] = field(default_factory=dict)  # place of the file among the full-text hits' files
    history: RecentChanges | None = None  # what the recent commits and the working tree changed
    question_terms: frozenset[str] = frozenset()  # the question's search terms (stemmed words, identifier parts)

    @classmethod
    def of(cls, seeds, personalization: dict[str, float], history: RecentChanges | None = None,
           question: str = "") -> "_Evidence":
        files: dict[str, int] = {}
        for node in seeds.lexical:
            files.setdefault(node.split("::", 1)[0], len(files))
        return cls({n: i for i, n in enumerate(seeds.lexical)}, frozenset(personalization), seeds.path_boost, files,
                   history, frozenset(terms_of(question)))

    def name_share(self, unit: Unit) -> float:
        """The share of the words of a Python definition's own name (its last part, split at
        underscores and humps, stemmed, stop words dropped) that the question uses."""
        if not self.question_terms or not unit.path.endswith((".py", ".pyi")):
            return 0.0
        parts = _name_terms(unit.node.rsplit("::", 1)[-1].rsplit(".", 1)[-1].split(":", 1)[0])
        return len(parts & self.question_terms) / len(parts) if parts else 0.0

    def features(self, rank: int, ratio: float, unit: Unit, named: bool, member_of_named: bool,
                 container: bool) -> tuple[float, ...]:
        """The model's inputs for one candidate, in the order of FEATURES."""
        lexical_rank = self.lexical.get(unit.node)
        file_lexical_rank = self.file_lexical.get(unit.path)
        age = file_age = None
        if self.history is not None:
            age = self.history.age_of(unit.path, unit.start, unit.end)
            file_age = self.history.file_age(unit.path)
        return (
            1.0,
            math.log(rank + 1),
            math.log(min(max(ratio, 1e-6), 4.0)),
            float(named),
            float(member_of_named),
            float(container),
            math.log(max(unit.end - unit.start + 1, 1)),
            0.0 if lexical_rank is None else 1.0,
            0.0 if lexical_rank is None else math.log(lexical_rank + 1),
            float(unit.node in self.seeded),
            math.log(max(self.path_boost(unit.path), 1e-3)),
            0.0 if file_lexical_rank is None else 1.0,
            0.0 if file_lexical_rank is None else math.log(file_lexical_rank + 1),
            0.0 if age is None else 1.0,
            0.0 if age is None else math.log(age + 1),
            0.0 if file_age is None else 1.0,
            0.0 if file_age is None else math.log(file_age + 1),
            float(_is_python_protocol(unit)),
            float(_is_rust_poll(unit)),
            self.name_share(unit),
        )


# The same names come back question after question (a project's candidates are mostly the
# same few thousand definitions): their words are worked out once.
@lru_cache(maxsize=1 << 16)
def _name_terms(name: str) -> frozenset[str]:
    """The search terms of a definition's name: its parts, stemmed, stop words dropped."""
    return frozenset(terms_of(" ".join(split_identifier(name))))


def _is_python_protocol(unit: Unit) -> bool:
    """A Python special method (``__init__``, ``__call__``, ``__eq__``, a library's own
    ``__foo__`` protocol): what a class does for its callers is written there."""
    if not unit.path.endswith((".py", ".pyi")):
        return False
    name = unit.node.rsplit("::", 1)[-1].rsplit(".", 1)[-1].split(":", 1)[0]  # `__eq__:2` redefined
    return len(name) > 4 and name.startswith("__") and name.endswith("__") and name.strip("_") != ""


def _is_rust_poll(unit: Unit) -> bool:
    """A Rust `poll` method (``Future::poll``, ``Stream::poll_next``, ``AsyncRead::poll_read``,
    a type's own ``poll_flush``/``poll_shutdown`` steps): an async type's behaviour is written
    there, the state machine its callers only drive."""
    if not unit.path.endswith(".rs"):
        return False
    qual = unit.node.rsplit("::", 1)[-1]
    name = qual.rsplit(".", 1)[-1].split(":", 1)[0]
    return "." in qual and (name == "poll" or name.startswith("poll_"))


# A logistic model of "this candidate is what the question needs" over
# features every ranking has (FEATURES): the candidate's place, its score
# relative to the best unnamed function-like candidate, whether the question
# names it or names the class holding it, whether it is a container with
# definitions of its own (until 2026-12-05 a container's kind alone counted;
# the weight was fitted then and is kept: a type that holds nothing is the
# unit a change edits, and scores as a function now), its length (a longer
# body is likelier to hold the line a change touches),
# whether and how high full-text search found it (words of the question in
# its code), whether it was a seed itself, the path evidence for its file,
# how high its file comes among the files of the full-text hits (the file
# where the question's words concentrate holds the change more often than the
# graph alone says, whichever of its definitions the words hit), and how
# recently the project's history changed its lines and its file (work comes
# in series, and a question is most often about the task at hand: lines a
# recent commit or an uncommitted edit touched are likelier targets; ages
# count commits, 0 being the working tree).  Fitted by maximum likelihood on
# the development half of bench/quality.py (`bench/selection_fit.py fit`:
# commit messages of the development repositories in five languages, each
# feature's weight also checked leaving one repository out) and checked on
# the repositories of the check half, which it never saw; see
# docs/benchmarks.md.  The last feature, a Python special method (``__init__``,
# ``__call__``, ``__eq__``, a library's ``__foo__`` protocol hook), was added
# later: a class's behaviour lives in its protocol methods, and a change to
# what the class does lands there more often than their rank says (56 targets
# among such candidates where the model without it expected 36).  Its weight
# was fitted alone, the other weights' log-odds held as they were.  So was
# the next, a Rust method named `poll` or `poll_*` (an async type's Future,
# Stream, AsyncRead or AsyncWrite steps): where async code does its work (32
# targets among such candidates of the development half's Rust cases where
# the model expected 12, under-predicted in each repository that has them;
# 1.04 to 1.32 fitted leaving any one repository out).
# The last, the share of a Python definition's own name that the question's
# words spell (`if_range` for "if-range discards weak etags", `cell_len` for
# "cell length"), was fitted the same way: a method of a large
# class, ranked below its class's other members by the graph, is the one the
# question's words name, which full-text search over whole bodies only half
# sees.  On the Python repositories of the development half the fit gives 0.44
# (0.31-0.54 leaving one repository out), over all five languages 0.24; 0.3 is
# kept, as the slices' recall was flat from 0.2 to 0.44 and a weight past 0.35
# cost a plain-English question whose wording leaves the name out.  0 outside
# Python, where the held-out likelihood was no better with it.
FEATURES = ("bias", "log_rank", "log_ratio", "named", "member_of_named", "container", "log_lines",
            "lexical", "log_lexical_rank", "seeded", "log_path_boost", "file_lexical", "log_file_lexical_rank",
            "recent", "log_recent_age", "file_recent", "log_file_recent_age", "python_protocol", "rust_poll",
            "name_share")
_P_WEIGHTS = (-4.191, -0.478, 0.234, 0.748, 0.506, -0.775, 0.361, 2.897, -0.436, -0.905, 0.624, 0.715, -0.624,
              1.558, -0.418, 0.042, -0.021, 0.53, 1.215, 0.3)


def target_probability(features: tuple[float, ...], weights: tuple[float, ...] = _P_WEIGHTS) -> float:
    z = sum(map(operator.mul, weights, features))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def _estimate_tokens(doc: FileDoc, unit: Unit) -> int:
    """A body's tokens, estimated from its characters (about 3.6 a token in code)
    so offers can be ordered without counting every candidate exactly."""
    ends = doc.line_ends
    if ends is not None:
        last = min(unit.end, len(ends) - 1)
        chars = ends[last] - ends[min(unit.start - 1, last)]
    else:
        chars = sum(len(line) + 1 for line in doc.lines[unit.start - 1 : unit.end])
    return max(1, int(chars / 3.6))


def _is_inside(node: str, container: Unit, graph: GraphView) -> bool:
    """True when ``node`` is written inside ``container``'s lines.  A name
    nested under a type is not enough: a Rust `impl` block, a Go method or
    `Foo.prototype.m = ...` is named under its type but written elsewhere,
    so showing the type whole does not show it."""
    if not node.startswith(container.node + "."):
        return False
    d = graph.node(node)
    return container.start <= d["start_line"] and d["end_line"] <= container.end


def _covered(node: str, chosen: dict[str, Unit], graph: GraphView) -> bool:
    """True when an enclosing symbol that holds its lines is already shown in full."""
    path, _, qual = node.partition("::")
    parts = qual.split(".")
    for i in range(len(parts) - 1, 0, -1):
        u = chosen.get(f"{path}::{'.'.join(parts[:i])}")
        if u is not None and u.mode == FULL and _is_inside(node, u, graph):
            return True
    return False


def _fit(graph: GraphView, docs, units: list[Unit], budget: int, sections: dict | None = None,
         memo: dict[str, int] | None = None) -> tuple[str, list[Unit], list[str], int]:
    """Render within ``budget``, giving up what selection valued least first
    (full -> signature -> drop; by score when the units carry no selection order).
    Returns the text, the units and files it shows, and its exact token count.

    Selection already estimated the costs, so the first render often fits;
    otherwise a binary search finds the longest ranked prefix that fits, and
    the first unit left out gets a chance as a signature.  Every attempt is
    counted exactly, from its files' sections (see ``joined_tokens``): a
    section is rendered and encoded once however many attempts show it.
    """
    if all(u.taken for u in units):
        # Selection took units best value per token first, so what it took
        # last is what it valued least: undo it first.  (By score alone, a
        # file's only signature, taken for orientation, would go before a
        # second signature from a file the slice already shows.)
        units = sorted(units, key=lambda u: (u.taken, u.node))
    else:
        units = sorted(units, key=lambda u: (-u.score, u.node))
    memo = {} if memo is None else memo  # exact token counts by text, shared with the caller
    sections = {} if sections is None else sections

    def count(text: str) -> int:
        n = memo.get(text)
        if n is None:
            n = memo[text] = count_tokens_memo(text)
        return n

    def attempt(chosen: list[Unit], compact: bool = False) -> tuple[list[str], int]:
        texts = render_sections(docs, chosen, graph, _order(chosen), compact, count, sections)
        return texts, joined_tokens(texts, count)

    texts, n = attempt(units)
    if n <= budget:
        return join_sections(texts), units, _order(units), n
    # Drop the lowest-ranked units worth the overshoot (by their estimated
    # cost), then search the prefixes between that and what was dropped.
    over = n - budget
    hi = len(units)
    lo, removed = hi, 0
    while lo > 0 and removed < over:
        lo -= 1
        u = units[lo]
        removed += (u.cost_full if u.mode == FULL else u.cost_sig) + UNIT_FRAMING // 2
    if attempt(units[:lo])[1] > budget:
        hi, lo = lo, 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if attempt(units[:mid])[1] <= budget:
            lo = mid
        else:
            hi = mid
    kept = units[:lo]
    nxt = units[lo] if lo < len(units) else None
    if nxt is not None and nxt.mode == FULL:
        nxt.mode = SIG
        if attempt(kept + [nxt])[1] <= budget:
            kept.append(nxt)
    if kept:
        texts, n = attempt(kept)
        return join_sections(texts), kept, _order(kept), n
    # Not even the best unit fits with its framing: show it bare, then as a signature.
    best = units[0]
    for mode in (best.mode, SIG):
        best.mode = mode
        texts, n = attempt([best], compact=True)
        if n <= budget:
            return join_sections(texts), [best], [best.path], n
    return "", [], [], 0


def _order(units: list[Unit]) -> list[str]:
    """The files of ``units``, best-scored first (whatever order fitting gives units up in)."""
    return list(dict.fromkeys(u.path for u in sorted(units, key=lambda u: (-u.score, u.node))))
