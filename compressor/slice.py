"""``context_query``: question + budget -> the smallest slice that holds the answer."""

from __future__ import annotations

import heapq
import itertools
import logging
import operator
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from memstrata.indexer.graph_view import GraphView
from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreError
from memstrata.storage import code_index as ci

from .analyze import BASE_WEIGHTS, NameIndex, find_seeds, intent_of, validate
from .rank import personalized_rank
from .render import (
    CONTAINERS, FULL, MAX_FULL_CONTAINER_LINES, SIG, FileDoc, Unit, cost_of, join_sections, render_sections, unit_for,
)
from .tokens import count_tokens

log = logging.getLogger(__name__)

MAX_CANDIDATES = 160
# Symbols the question names are shown in full; so is anything else scoring
# at least this share of the best unnamed function-like symbol, while full
# bodies leave SIGNATURE_RESERVE of the budget for the signatures around them.
FULL_SHARE = 0.8
MIN_FULL = 2
SIGNATURE_RESERVE = 0.15
FILE_FRAMING = 12  # estimated tokens of a file header line
UNIT_FRAMING = 10  # estimated tokens of the gap marker before a unit
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


def _name_index(graph: GraphView) -> NameIndex:
    with _caches_lock:
        hit = _name_indexes.get(id(graph))
        if hit is not None and hit[0] == graph.version:
            return hit[1]
    index = NameIndex(graph)
    with _caches_lock:
        _name_indexes[id(graph)] = (graph.version, index)
    return index


def remember_file_tokens(path: str, text: str, n: int) -> None:
    with _caches_lock:
        if len(_file_tokens) > 20_000:
            _file_tokens.clear()
        _file_tokens[(path, hash(text))] = n


def file_tokens(path: str, text: str) -> int:
    n = _file_tokens.get((path, hash(text)))
    if n is None:
        n = count_tokens(text)
        remember_file_tokens(path, text, n)
    return n


_counter_pool: ThreadPoolExecutor | None = None
BACKGROUND_COUNT_BYTES = 64_000  # below this, counting inline is cheaper than a hand-off


def _count_in_background(files: list[tuple[str, str]]) -> Future | None:
    global _counter_pool
    todo = [(p, t) for p, t in files if (p, hash(t)) not in _file_tokens]
    if sum(len(t) for _, t in todo) < BACKGROUND_COUNT_BYTES:
        return None
    with _caches_lock:
        if _counter_pool is None:
            _counter_pool = ThreadPoolExecutor(1, thread_name_prefix="memstrata-tokens")
    return _counter_pool.submit(lambda: [file_tokens(p, t) for p, t in todo])


def context_query(ws: Workspace, query: str, max_tokens: int = 4096, include_tests: bool = False) -> ContextSlice:
    """Build the context slice for ``query`` within ``max_tokens`` (cl100k tokens).

    ``baseline_tokens`` is the token count of the complete text of every file
    in ``sources``: what a file-level RAG would have sent to give the model
    the same sources.  Raises :class:`QueryError` for unusable input.
    """
    query, budget, include_tests = validate(query, max_tokens, include_tests)
    notes: list[str] = []
    state = ws.quick_status()
    if state in ("indexing", "stale"):
        notes.append(f"index is {state}: answered from the {ws.files_indexed()} files indexed so far")
    with ws.lock:
        graph = ws.graph
        names = _name_index(graph)
        intent = intent_of(query)
        tests_ok = include_tests

        test_files = graph.test_files

        def allowed(node: str) -> bool:
            return tests_ok or node.split("::", 1)[0] not in test_files

        seeds = find_seeds(query, graph, names, ws.store, include_tests)
        personalization = seeds.personalization()
        if not personalization:
            notes.append("nothing in the project matches the query")
            return ContextSlice("", 0, 0, [], notes=notes, max_tokens=budget)
        # Sorted so that equal questions always rank identically.
        personalization = dict(sorted(personalization.items()))
        scores = personalized_rank(graph, personalization, intent.weights, include_tests)
        # The prior only ever lowers a score, so it need only be applied to
        # the best few hundred symbols.
        pool = _best_symbols(scores, MAX_CANDIDATES * 4, lambda n: "::" in n and allowed(n) and n in graph)
        adjusted = []
        for node, score in pool:
            if node in seeds.named:  # what the question names comes first
                adjusted.append((node, score * 2 + 1.0))
            else:
                adjusted.append((node, score * _prior(graph, node) * seeds.path_boost(graph.file_of(node))))
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
        result = _build(ws, graph, ranked, budget, notes, seeds.named, focus, fill, sig_only)
    return result


def _best_symbols(scores: dict[str, float], n: int, keep) -> list[tuple[str, float]]:
    """The ``n`` best-scored nodes passing ``keep``; the filter runs on a
    generous top slice first, the whole dict only if that falls short."""
    key = operator.itemgetter(1)  # ties keep the (deterministic) order of the push
    top = heapq.nlargest(n * 2, scores.items(), key=key)
    kept = [kv for kv in top if keep(kv[0])]
    if len(kept) >= n or len(top) == len(scores):
        return kept[:n]
    return heapq.nlargest(n, ((k, v) for k, v in scores.items() if keep(k)), key=key)


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


# Code that is rarely what a question is about unless it says so.
_PERIPHERAL_DIRS = frozenset({"examples", "example", "benchmarks", "benchmark", "bench", "docs", "doc",
                              "tools", "scripts", "demo", "demos", "samples", "sample"})


_RUST_TEST_MODULES = frozenset({"tests", "test"})


def _prior(graph: GraphView, node: str) -> float:
    """A multiplier on ranking scores for symbols that are usually noise."""
    data = graph.node(node)
    path = data["path"]
    factor = 1.0
    if any(part in _PERIPHERAL_DIRS for part in path.split("/")[:-1]):
        factor *= 0.4
    if path.endswith(".pyi") and f"{path[:-1]}::{data['qualname']}" in graph:
        factor *= 0.3  # the stub of a symbol whose implementation is indexed
    if data["kind"] == "constant":
        factor *= 0.5
    if path.endswith(".rs") and data["qualname"].split(".", 1)[0] in _RUST_TEST_MODULES:
        factor *= 0.2  # unit tests inside a source file (`#[cfg(test)] mod tests`)
    return factor


def _build(ws: Workspace, graph: GraphView, ranked: list[tuple[str, float]], budget: int,
           notes: list[str], named: set[str] = frozenset(), focus: set[str] = frozenset(),
           fill: list[tuple[str, float]] = (), sig_only: set[str] = frozenset()) -> ContextSlice:
    docs = _Docs(ws, graph)
    docs.load(list(dict.fromkeys(graph.file_of(n) for n, _ in ranked)))
    units, estimate = _select(graph, docs, ranked, budget, named, focus, fill, sig_only=sig_only)
    # Whole-file token counts (baseline_tokens) are the costliest count of a
    # query on a cold cache; tiktoken releases the GIL, so they run on the
    # other core while the slice is fitted.
    counting = _count_in_background([(p, docs.texts[p]) for p in dict.fromkeys(u.path for u in units)])
    shown = docs.shown(units)
    sections: dict = {}
    counted: dict[str, int] = {}
    context, fitted, file_order = _fit(graph, shown, units, budget, sections, counted)
    tokens = counted.get(context) if context in counted else count_tokens(context)
    if tokens < budget * REFILL_BELOW and estimate >= budget * 0.9 and tokens > 0:
        # The per-unit framing estimates were pessimistic (small units, few
        # gap markers): select again for the budget the text really has left.
        nominal = int(budget * min(3.0, estimate / tokens) * 0.95)
        units, _ = _select(graph, docs, ranked, nominal, named, focus, fill, full_limit=budget, sig_only=sig_only)
        shown = docs.shown(units)
        context2, fitted2, order2 = _fit(graph, shown, units, budget, sections, counted)
        tokens2 = counted.get(context2) if context2 in counted else count_tokens(context2)
        if tokens2 > tokens:
            context, fitted, file_order, tokens = context2, fitted2, order2, tokens2
    units = fitted
    if counting is not None:
        counting.result()
    baseline = sum(file_tokens(p, docs.texts[p]) for p in file_order)
    docs.save_counts(file_order)
    if not units and ranked:
        notes.append(f"max_tokens={budget} is too small for any matching code")
    return ContextSlice(
        context=context,
        tokens=tokens,
        baseline_tokens=baseline,
        sources=file_order,
        symbols=[u.node for u in units],
        full_symbols=[u.node for u in units if u.mode == FULL],
        notes=notes,
        max_tokens=budget,
    )


class _Docs:
    """File texts for selection: the ranked files up front, fill files on demand."""

    def __init__(self, ws: Workspace, graph: GraphView):
        self.ws, self.graph = ws, graph
        self.texts: dict[str, str] = {}
        self.hashes: dict[str, str] = {}
        self.uncounted: set[str] = set()  # files whose token count the index has not saved
        self.docs: dict[str, FileDoc] = {}
        self.missing: set[str] = set()
        self.with_imports: set[str] = set()

    def load(self, paths: list[str]) -> None:
        paths = [p for p in paths if p not in self.docs and p not in self.missing]
        if not paths:
            return
        rows = ci.file_texts_counted(self.ws.store, paths)
        for path in paths:
            row = rows.get(path)
            if row is None:
                self.missing.add(path)
                continue
            text, self.hashes[path], tokens = row
            if tokens is not None:
                remember_file_tokens(path, text, tokens)
            else:
                self.uncounted.add(path)
            self.texts[path] = text
            self.docs[path] = FileDoc(path, self.graph.node(path).get("language") or "", text.split("\n"))

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
            for path, module, name, alias, line, target in ci.load_imports(self.ws.store, todo):
                docs[path].imports.append((line, target))
            self.with_imports.update(todo)
        return docs


def _select(graph: GraphView, docs: _Docs, ranked, budget: int, named: set[str] = frozenset(),
            focus: set[str] = frozenset(), fill: list[tuple[str, float]] = (),
            full_limit: int | None = None, sig_only: set[str] = frozenset()) -> tuple[list[Unit], int]:
    """Units in rank order until the (estimated) budget is spent, and that estimate.
    ``full_limit`` caps the full bodies when ``budget`` is a nominal figure."""
    if not ranked:
        return [], 0
    unnamed = [s for n, s in ranked if n not in named and n not in sig_only and graph.node(n)["kind"] not in CONTAINERS]
    top = (unnamed[0] if unnamed else ranked[0][1]) or 1.0
    full_budget = (full_limit or budget) * (1 - SIGNATURE_RESERVE)
    chosen: dict[str, Unit] = {}
    files: set[str] = set()
    used = 0
    n_ranked = len(ranked)
    for i, (node, score) in enumerate(itertools.chain(ranked, fill)):
        if used >= budget * 0.98:
            break
        path = graph.file_of(node)
        doc = docs.get(path)
        if doc is None or node in chosen or _covered(node, chosen, graph):
            continue
        unit = unit_for(node, graph, score)
        # Classes are shown whole only when the question names a small one;
        # otherwise their header frames the members that rank on their own.
        # Fill candidates (past the ranking) are shown as signatures.
        if unit.kind in CONTAINERS:
            want_full = node in named and unit.end - unit.start + 1 <= MAX_FULL_CONTAINER_LINES
        else:
            want_full = i < n_ranked and node not in sig_only and (
                node in focus or score >= FULL_SHARE * top or i < MIN_FULL)
        # Framing: a file header for a new file, a gap marker per unit.
        header = UNIT_FRAMING + (0 if path in files else FILE_FRAMING)
        if want_full:
            unit.cost_full = cost_of(doc, unit, graph, FULL)
            limit = (full_limit or budget) if node in named else full_budget
            if used + unit.cost_full + header <= limit:
                unit.mode = FULL
                # A container shown in full covers members chosen before it.
                for member in [n for n in chosen if _is_inside(n, unit)]:
                    m = chosen.pop(member)
                    used -= m.cost_full if m.mode == FULL else m.cost_sig
                chosen[node] = unit
                files.add(path)
                used += unit.cost_full + header
                continue
        unit.cost_sig = cost_of(doc, unit, graph, SIG)
        if used + unit.cost_sig + header <= budget:
            unit.mode = SIG
            unit.cost_full = 0
            chosen[node] = unit
            files.add(path)
            used += unit.cost_sig + header
    return list(chosen.values()), used


def _is_inside(node: str, container: Unit) -> bool:
    return node.startswith(container.node + ".")


def _covered(node: str, chosen: dict[str, Unit], graph: GraphView) -> bool:
    """True when an enclosing symbol is already shown in full."""
    path, _, qual = node.partition("::")
    parts = qual.split(".")
    for i in range(len(parts) - 1, 0, -1):
        u = chosen.get(f"{path}::{'.'.join(parts[:i])}")
        if u is not None and u.mode == FULL:
            return True
    return False


def _fit(graph: GraphView, docs, units: list[Unit], budget: int, sections: dict | None = None,
         memo: dict[str, int] | None = None) -> tuple[str, list[Unit], list[str]]:
    """Render within ``budget``, degrading lowest-ranked first (full -> signature -> drop).

    Selection already estimated the costs, so the first render usually fits;
    otherwise a binary search finds the longest ranked prefix that fits, and
    the first unit left out gets a chance as a signature.  The search counts
    each file's section once (sections repeat across attempts) and adds the
    joins; the text returned is always counted whole.
    """
    units = sorted(units, key=lambda u: (-u.score, u.node))
    memo = {} if memo is None else memo  # exact token counts by text, shared with the caller
    sections = {} if sections is None else sections

    def count(text: str) -> int:
        n = memo.get(text)
        if n is None:
            n = memo[text] = count_tokens(text)
        return n

    def estimate(chosen: list[Unit], compact: bool = False) -> int:
        texts = render_sections(docs, chosen, graph, _order(chosen), compact, count, sections)
        # Sections joined by a blank line rarely merge tokens across the join;
        # the margin keeps the final exact count from failing by a hair.
        return sum(count(t) for t in texts) + 2 * len(texts) + 2

    def exact(chosen: list[Unit], compact: bool = False) -> str | None:
        text = join_sections(render_sections(docs, chosen, graph, _order(chosen), compact, count, sections))
        return text if count(text) <= budget else None

    text = join_sections(render_sections(docs, units, graph, _order(units), False, count, sections))
    over = count(text) - budget
    if over <= 0:
        return text, units, _order(units)
    # Drop the lowest-ranked units worth the overshoot (by their estimated
    # cost), then search the prefixes between that and what was dropped.
    hi = len(units)
    lo, removed = hi, 0
    while lo > 0 and removed < over:
        lo -= 1
        u = units[lo]
        removed += (u.cost_full if u.mode == FULL else u.cost_sig) + UNIT_FRAMING // 2
    if estimate(units[:lo]) > budget:
        hi, lo = lo, 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimate(units[:mid]) <= budget:
            lo = mid
        else:
            hi = mid
    kept = units[:lo]
    nxt = units[lo] if lo < len(units) else None
    if nxt is not None and nxt.mode == FULL:
        nxt.mode = SIG
        if estimate(kept + [nxt]) <= budget:
            kept.append(nxt)
    while kept:
        text = join_sections(render_sections(docs, kept, graph, _order(kept), False, count, sections))
        over = count(text) - budget
        if over <= 0:
            return text, kept, _order(kept)
        while kept and over > 0:  # the joins merged fewer tokens than estimated
            u = kept.pop()
            over -= (u.cost_full if u.mode == FULL else u.cost_sig) or 1
    # Not even the best unit fits with its framing: show it bare, then as a signature.
    best = units[0]
    for mode in (best.mode, SIG):
        best.mode = mode
        text = exact([best], compact=True)
        if text is not None:
            return text, [best], [best.path]
    return "", [], []


def _order(units: list[Unit]) -> list[str]:
    return list(dict.fromkeys(u.path for u in units))
