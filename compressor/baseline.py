"""The naive-RAG arm that ``context_query`` is measured against.

Every indexed file (tests only when asked) is cut into fixed 40-line chunks,
scored with Okapi BM25 against the question, and the best chunks are packed
in score order until the token budget is used up.  A chunk that does not fit
is skipped and the next one tried, so the result never exceeds the budget.
This is deliberately the plain retrieval most RAG setups start from: no
graph, no symbol boundaries, just words.

Terms are identifier-aware (``parseHTTPRequest`` also yields ``parse``,
``http``, ``request``), lower-cased, lightly stemmed (plural / -ing / -ed),
and English stop words are dropped, on both the chunks and the question.

``baseline_tokens`` follows the same definition as ``context_query``'s: the
tokens of the complete text of every file in ``sources``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field

from memstrata.storage import Store
from memstrata.storage import code_index as ci

from .analyze import validate
from .terms import STOPWORDS, terms_of  # noqa: F401 - STOPWORDS: bench/quality.py reads it from here
from .tokens import count_tokens

CHUNK_LINES = 40
K1 = 1.2
B = 0.75
# Below this many free tokens no chunk (header + 40 lines) can fit any more.
MIN_FREE_TOKENS = 12

@dataclass(slots=True)
class Chunk:
    path: str
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    text: str
    length: int  # number of terms
    tokens: int = -1  # rendered cost, counted on first use


@dataclass
class RagSlice:
    context: str
    tokens: int
    baseline_tokens: int
    sources: list[str]  # files in the order of their best chunk
    spans: list[tuple[str, int, int]] = field(default_factory=list)  # (path, first line, last line)
    max_tokens: int = 0


_chunk_cache: dict[tuple[str, int, int], list[tuple]] = {}


def _file_chunks(path: str, text: str, chunk_lines: int) -> list[tuple]:
    """(first, last, text, length, term counts) of one file's chunks; kept per
    file content, so rebuilding the index after a few files changed only
    re-reads those files' terms."""
    key = (path, hash(text), chunk_lines)
    hit = _chunk_cache.get(key)
    if hit is not None:
        return hit
    out = []
    lines = text.split("\n")
    for i in range(0, len(lines), chunk_lines):
        part = lines[i : i + chunk_lines]
        body = "\n".join(part).rstrip()
        if not body.strip():
            continue
        terms = terms_of(body)
        out.append((i + 1, i + len(part), body, len(terms), tuple(Counter(terms).items())))
    with _cache_lock:
        if len(_chunk_cache) > 50_000:
            _chunk_cache.clear()
        _chunk_cache[key] = out
    return out


class ChunkIndex:
    """BM25 over fixed-size line chunks of a set of files, held in memory."""

    def __init__(self, texts: dict[str, str], chunk_lines: int = CHUNK_LINES):
        self.chunks: list[Chunk] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.file_texts = texts
        self._file_tokens: dict[str, int] = {}
        for path in sorted(texts):
            for start, end, text, length, tfs in _file_chunks(path, texts[path], chunk_lines):
                idx = len(self.chunks)
                self.chunks.append(Chunk(path, start, end, text, length))
                for term, tf in tfs:
                    self.postings.setdefault(term, []).append((idx, tf))
        n = len(self.chunks)
        self.avg_len = (sum(c.length for c in self.chunks) / n) if n else 0.0
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def search(self, query: str) -> list[tuple[int, float]]:
        """(chunk index, score) of every chunk sharing a term with ``query``, best first."""
        scores: dict[int, float] = {}
        avg = self.avg_len or 1.0
        for term, qtf in Counter(terms_of(query)).items():
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = self.idf[term]
            for idx, tf in postings:
                norm = K1 * (1 - B + B * self.chunks[idx].length / avg)
                scores[idx] = scores.get(idx, 0.0) + qtf * idf * tf * (K1 + 1) / (tf + norm)
        # Ties broken by position so the order is deterministic.
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))

    def chunk_text(self, chunk: Chunk) -> str:
        return f"# {chunk.path}:{chunk.start}-{chunk.end}\n{chunk.text}"

    def chunk_tokens(self, chunk: Chunk) -> int:
        if chunk.tokens < 0:
            chunk.tokens = count_tokens(self.chunk_text(chunk))
        return chunk.tokens

    def file_tokens(self, path: str) -> int:
        n = self._file_tokens.get(path)
        if n is None:
            n = self._file_tokens[path] = count_tokens(self.file_texts[path])
        return n


_SEP = "\n\n"
_cache_lock = threading.Lock()
# One index per (store file, include_tests); rebuilt when the file set or any hash changes.
_cache: dict[tuple[str, bool], tuple[frozenset, ChunkIndex]] = {}


def chunk_index(store: Store, include_tests: bool = False) -> ChunkIndex:
    """The cached chunk index of the store's files, rebuilt only when they changed."""
    states = ci.file_states(store)
    test_flags = {path: bool(is_test) for path, _lang, is_test, _lines, _status in ci.load_files(store)}
    wanted = {p: s.hash for p, s in states.items() if include_tests or not test_flags.get(p, False)}
    key = (str(store.path), include_tests)
    signature = frozenset(wanted.items())
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == signature:
            return hit[1]
    index = ChunkIndex(ci.file_texts(store, sorted(wanted)))
    with _cache_lock:
        _cache[key] = (signature, index)
    return index


def naive_rag(ws, query: str, max_tokens: int = 4096, include_tests: bool = False) -> RagSlice:
    """BM25 chunks for ``query`` packed in score order into at most ``max_tokens`` tokens.

    ``ws`` is a :class:`indexer.workspace.Workspace` (anything with a ``store``).
    """
    query, budget, include_tests = validate(query, max_tokens, include_tests)
    index = chunk_index(ws.store, include_tests)
    return pack(index, index.search(query), budget)


def pack(index: ChunkIndex, ranked: list[tuple[int, float]], budget: int) -> RagSlice:
    picked: list[Chunk] = []
    text = ""
    used = 0
    sep_cost = count_tokens(_SEP)
    for idx, _score in ranked:
        free = budget - used
        if free < MIN_FREE_TOKENS:
            break
        chunk = index.chunks[idx]
        cost = index.chunk_tokens(chunk) + (sep_cost if picked else 0)
        if cost > free + 2:  # cannot fit even if the join merges a token or two
            continue
        candidate = (text + _SEP if picked else "") + index.chunk_text(chunk)
        exact = count_tokens(candidate + "\n")
        if exact > budget:
            continue
        picked.append(chunk)
        text = candidate
        used = exact
    context = text + "\n" if picked else ""
    sources = list(dict.fromkeys(c.path for c in picked))
    return RagSlice(
        context=context,
        tokens=count_tokens(context),
        baseline_tokens=sum(index.file_tokens(p) for p in sources),
        sources=sources,
        spans=[(c.path, c.start, c.end) for c in picked],
        max_tokens=budget,
    )
