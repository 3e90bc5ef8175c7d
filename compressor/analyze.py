"""What a question asks for: validated parameters, intent, and seed symbols."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from memstrata.indexer.graph import CodeGraph
from memstrata.storage import code_index as ci
from memstrata.storage.text import query_terms

from .errors import QueryError

MAX_QUERY_CHARS = 20_000
MAX_SEARCH_TERMS = 24
MAX_TOKENS_LIMIT = 1_000_000


def validate(query: object, max_tokens: object, include_tests: object) -> tuple[str, int, bool]:
    if not isinstance(query, str):
        raise QueryError("query must be a string")
    q = query.strip()
    if not q:
        raise QueryError("query is empty: ask a question or name a symbol, e.g. 'AuthService.login and its callers'")
    if len(q) > MAX_QUERY_CHARS:
        raise QueryError(f"query is too long ({len(q):,} characters; the limit is {MAX_QUERY_CHARS:,})")
    if isinstance(max_tokens, bool):
        raise QueryError("max_tokens must be an integer")
    if isinstance(max_tokens, str):
        try:
            max_tokens = int(max_tokens.strip())
        except ValueError:
            raise QueryError(f"max_tokens must be an integer, got {max_tokens!r}") from None
    if isinstance(max_tokens, float) and max_tokens.is_integer():
        max_tokens = int(max_tokens)
    if not isinstance(max_tokens, int):
        raise QueryError("max_tokens must be an integer")
    if max_tokens < 1:
        raise QueryError(f"max_tokens must be at least 1, got {max_tokens}")
    if max_tokens > MAX_TOKENS_LIMIT:
        raise QueryError(f"max_tokens must be at most {MAX_TOKENS_LIMIT:,}, got {max_tokens:,}")
    if not isinstance(include_tests, bool):
        raise QueryError("include_tests must be true or false")
    return q, max_tokens, include_tests


# -- intent -------------------------------------------------------------------

# (edge kind, outgoing?) -> weight of following that edge from a relevant node.
BASE_WEIGHTS = {
    ("calls", True): 0.8,  # what it calls
    ("calls", False): 0.9,  # who calls it
    ("references", True): 0.6,
    ("references", False): 0.5,
    ("inherits", True): 0.7,  # its bases
    ("inherits", False): 0.5,  # its subclasses
    ("contains", True): 0.35,  # class -> methods, file -> symbols
    ("contains", False): 0.5,  # method -> class
    ("imports", True): 0.15,
    ("imports", False): 0.1,
}

_INTENTS: list[tuple[re.Pattern, dict[tuple[str, bool], float]]] = [
    (re.compile(r"\b(callers?|called\s+(by|from)|who\s+calls|call\s*sites?|usages?|used\s+by|uses\s+of|references?\s+to|where\s+is\s+\w+\s+used)\b", re.I),
     {("calls", False): 3.0, ("references", False): 2.0}),
    (re.compile(r"\b(callees?|what\s+does\s+\S+\s+call|calls\s+made|dependencies|depends\s+on)\b", re.I),
     {("calls", True): 3.0, ("references", True): 2.0}),
    (re.compile(r"\b(subclass(es)?|implementations?|implementers?|implemented\s+by|overrides?|derived|inherit(s|ed|ing)?\s+from\s+it)\b", re.I),
     {("inherits", False): 4.0}),
    (re.compile(r"\b(base\s+class(es)?|superclass(es)?|parent\s+class|inherits?\s+from|extends)\b", re.I),
     {("inherits", True): 4.0}),
    (re.compile(r"\b(imports?|imported\s+by|importers?|modules?\s+that\s+import)\b", re.I),
     {("imports", False): 6.0, ("imports", True): 4.0}),
    (re.compile(r"\b(tests?|tested|testing|specs?)\b", re.I), {}),
]
_TESTS_INTENT = _INTENTS[-1][0]


@dataclass
class Intent:
    weights: dict[tuple[str, bool], float]
    wants_tests: bool


def intent_of(query: str) -> Intent:
    weights = dict(BASE_WEIGHTS)
    for pattern, boost in _INTENTS:
        if pattern.search(query):
            for key, factor in boost.items():
                weights[key] = weights[key] * factor
    return Intent(weights, bool(_TESTS_INTENT.search(query)))


# -- seeds --------------------------------------------------------------------

_STOP = frozenset(
    """a an the and or of to in on for from with by at as is are was were be been it its this that these those
    what which who whom whose how why where when does do did done can could should would will shall may might
    me my we our you your i not no yes all any some each every into about than then there here also just only
    please show find give get tell explain list see look code function functions method methods class classes
    file files module modules callers caller callees callee calls call called usages usage uses used references
    reference implementation implementations subclasses subclass base parent tests test work works working
    fix fixed fixes bug bugs add added adds support make makes use using update updated change changed new
    when if else return returns value values handle handles handling issue issues allow allows""".split()
)
_BACKTICKED = re.compile(r"`([^`]+)`")
_IDENT_TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#|->)[A-Za-z_$][\w$]*)*")
_PATH_TOKEN = re.compile(r"[\w.\-]*[\w\-]+(?:/[\w.\-]+)+|[\w\-]+\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|java|c|h|cc|cpp|hpp|cs|rb|php)\b")


# When the question names symbols or paths outright, everything found by
# fuzzier means (split words, full-text search) shares this much of the
# starting mass in total, so a crowd of lexical hits cannot drown them.
FUZZY_SHARE_WITH_NAMED = 0.5


@dataclass
class Seeds:
    symbols: dict[str, float] = field(default_factory=dict)  # node -> strength
    files: dict[str, float] = field(default_factory=dict)  # path -> strength
    named: set[str] = field(default_factory=set)  # symbols the query names explicitly
    fuzzy: dict[str, float] = field(default_factory=dict)  # found by words / full-text search

    def add_symbol(self, node: str, score: float) -> None:
        if score > self.symbols.get(node, 0.0):
            self.symbols[node] = score

    def add_fuzzy(self, node: str, score: float) -> None:
        if score > self.fuzzy.get(node, 0.0):
            self.fuzzy[node] = score

    def personalization(self) -> dict[str, float]:
        """Starting mass of the ranking: explicit seeds first, fuzzy ones capped."""
        explicit: dict[str, float] = dict(self.symbols)
        for path, s in self.files.items():
            explicit[path] = max(explicit.get(path, 0.0), s)
        fuzzy = {n: s for n, s in self.fuzzy.items() if n not in explicit}
        if not explicit:
            return fuzzy
        total_explicit = sum(explicit.values())
        total_fuzzy = sum(fuzzy.values())
        if total_fuzzy > 0:
            cap = FUZZY_SHARE_WITH_NAMED / (1 - FUZZY_SHARE_WITH_NAMED) * total_explicit
            scale = min(1.0, cap / total_fuzzy)
            for n, s in fuzzy.items():
                explicit[n] = s * scale
        return explicit


class NameIndex:
    """Case- and separator-insensitive lookup of symbol names and file stems."""

    def __init__(self, graph: CodeGraph):
        self.by_key: dict[str, set[str]] = defaultdict(set)
        for name in graph.names():
            self.by_key[_key(name)].add(name)
        self.file_stems: dict[str, list[str]] = defaultdict(list)
        for path in graph.files():
            stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
            self.file_stems[_key(stem)].append(path)


def _key(name: str) -> str:
    return name.replace("_", "").replace("$", "").lower()


def find_seeds(query: str, graph: CodeGraph, names: NameIndex, store, include_tests: bool) -> Seeds:
    seeds = Seeds()

    def allowed(node: str) -> bool:
        return include_tests or not graph.node(graph.file_of(node)).get("is_test", False)

    # 1. Paths the query names.
    for token in _PATH_TOKEN.findall(query):
        token = token.strip("./")
        for path in graph.files():
            if path == token or path.endswith("/" + token):
                seeds.files[path] = max(seeds.files.get(path, 0), 8.0)

    # 2. Identifiers, qualified or not, exactly as written.  Words in
    # backticks are code whatever they look like (`methods`, `close`).
    quoted = {w for span in _BACKTICKED.findall(query) for w in _IDENT_TOKEN.findall(span)}
    resolved_words: set[str] = set()
    for token in _IDENT_TOKEN.findall(query):
        parts = re.split(r"\.|::|#|->", token)
        name = parts[-1]
        if (name.lower() in _STOP and len(parts) == 1 and not _looks_like_code(name)
                and token not in quoted):
            continue
        defs = [d for d in graph.definitions(name) if allowed(d)]
        if len(parts) > 1:
            suffix = ".".join(parts)
            exact = [d for d in defs if graph.node(d)["qualname"].endswith(suffix)]
            if exact:
                for d in exact:
                    seeds.add_symbol(d, 10.0)
                    seeds.named.add(d)
                resolved_words.update(p.lower() for p in parts)
                continue
            # `Class.method` where the class part names a class: the class is a seed too.
            for d in graph.definitions(parts[-2]):
                if allowed(d):
                    seeds.add_symbol(d, 4.0)
        if defs:
            strength = 9.0 if _looks_like_code(name) or token in quoted else 6.0
            strength /= max(1.0, len(defs) ** 0.5)
            for d in defs:
                seeds.add_symbol(d, strength)
                if len(defs) <= 3:
                    seeds.named.add(d)
            resolved_words.add(name.lower())

    # 3. Words that spell a name with its separators dropped ("hash password").
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z0-9]*", query) if w.lower() not in resolved_words]
    for n in (3, 2, 1):
        for i in range(len(words) - n + 1):
            chunk = words[i : i + n]
            if n == 1 and (chunk[0].lower() in _STOP or len(chunk[0]) < 3):
                continue
            key = "".join(w.lower() for w in chunk)
            for name in names.by_key.get(key, ()):
                defs = [d for d in graph.definitions(name) if allowed(d)]
                for d in defs:
                    seeds.add_fuzzy(d, (3.0 + n) / max(1.0, len(defs) ** 0.5))
            for path in names.file_stems.get(key, ()):
                if include_tests or not graph.node(path).get("is_test", False):
                    seeds.files[path] = max(seeds.files.get(path, 0.0), 1.5 + n)

    # 4. Lexical search over names, signatures, docstrings and code; weaker
    # when the question names its symbols outright.
    lexical_weight = 1.5 if seeds.named else 4.0
    quoted_terms = {t.lower() for t in quoted}
    terms = [t for t in query_terms(query) if (t not in _STOP or t in quoted_terms) and len(t) > 1]
    if len(terms) > MAX_SEARCH_TERMS:
        # Long questions (a pasted stack trace, a proxied prompt): keep the
        # longest words, which tend to be the rarest and cheapest to match.
        keep = set(sorted(terms, key=len, reverse=True)[:MAX_SEARCH_TERMS])
        terms = [t for t in terms if t in keep]
    if terms:
        hits = ci.search_symbols(store, terms, limit=60)
        if hits:
            top = hits[0][1] or 1.0
            by_id = _nodes_by_db_id(graph, [h[0] for h in hits])
            for rank, (sid, score) in enumerate(hits):
                node = by_id.get(sid)
                if node is None or not allowed(node):
                    continue
                seeds.add_fuzzy(node, lexical_weight * (score / top) / (1 + rank * 0.05))
    return seeds


def _looks_like_code(word: str) -> bool:
    return "_" in word or any(c.isupper() for c in word[1:]) or (word[:1].isupper() and len(word) > 1)


def _nodes_by_db_id(graph: CodeGraph, ids: list[int]) -> dict[int, str]:
    return {i: n for i in ids if (n := graph.node_for_db_id(i)) is not None}
