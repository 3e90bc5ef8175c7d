"""What a question asks for: validated parameters, intent, and seed symbols."""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass, field

from memstrata.indexer.graph_view import GraphView
from memstrata.storage import code_index as ci
from memstrata.storage.text import query_terms, split_identifier

from .english import ENGLISH
from .errors import QueryError, echoed, json_type
from .terms import STOPWORDS

MAX_QUERY_CHARS = 20_000
MAX_SEARCH_TERMS = 24
MAX_TOKENS_LIMIT = 1_000_000


def validate(query: object, max_tokens: object, include_tests: object) -> tuple[str, int, bool]:
    if not isinstance(query, str):
        raise QueryError(f"query must be a string, got {json_type(query)}")
    q = query.strip()
    if not q:
        raise QueryError("query is empty: ask a question or name a symbol, e.g. 'AuthService.login and its callers'")
    if len(q) > MAX_QUERY_CHARS:
        raise QueryError(f"query is too long ({len(q):,} characters; the limit is {MAX_QUERY_CHARS:,}): "
                         "paste the part of the log or trace that matters")
    if isinstance(max_tokens, bool):
        raise QueryError(f"max_tokens must be an integer, got {json_type(max_tokens)}")
    if isinstance(max_tokens, str):
        try:
            max_tokens = int(max_tokens.strip())
        except ValueError:
            raise QueryError(f"max_tokens must be an integer, got {echoed(max_tokens, quoted=True)}") from None
    if isinstance(max_tokens, float) and max_tokens.is_integer():
        max_tokens = int(max_tokens)
    if not isinstance(max_tokens, int):
        raise QueryError(f"max_tokens must be an integer, got {json_type(max_tokens)}")
    if max_tokens < 1:
        raise QueryError(f"max_tokens must be at least 1, got {echoed(str(max_tokens))}")
    if max_tokens > MAX_TOKENS_LIMIT:
        raise QueryError(f"max_tokens must be at most {MAX_TOKENS_LIMIT:,}, got {echoed(f'{max_tokens:,}')}")
    if not isinstance(include_tests, bool):
        raise QueryError(f"include_tests must be true or false, got {json_type(include_tests)}")
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


# -- noise ----------------------------------------------------------------------

# What a pasted commit message or issue carries that names no code: trailer
# lines, change ids, commit hashes, URLs, e-mail addresses, PR and issue
# numbers.  Removed before anything is read as a word.
_TRAILER_LINE = re.compile(
    r"^[ \t]*(?:[A-Za-z][\w-]{0,40}-by|change-id|cherry-picked-from|reviewed-on|pr-url)[ \t]*:.*$", re.I | re.M)
# Every repetition that a failing match would scan again from each next position is bounded (a
# trailer's key, a mail address's local part, a hash): unbounded, a long run of word characters
# took time quadratic in its length (a second for 10,000 characters of a question).
_NOISE = re.compile(
    r"\b[A-Za-z][\w-]{0,40}-by:[^<>\n]{0,80}?<[^<>\s]+>"  # Signed-off-by: Name <mail> (also inline)
    r"|\b(?i:change-id|[a-z][\w-]{0,40}-by|reviewed-on|pr-url|cherry-picked-from):\s*\S*"
    r"|\b(?:https?|ftp)://\S+|\bwww\.\S+"
    r"|[\w.+-]{1,64}@[\w-]+(?:\.[\w-]+)+"
    r"|\b(?=[0-9a-f]{0,39}[0-9])(?=[0-9a-f]{0,39}[a-f])[0-9a-f]{7,40}\b"
    r"|\bI[0-9a-f]{40}\b"
    r"|\(#\d+\)|(?<![\w&#])#\d+\b|\b(?:gh|GH|bpo|PR|pr)-?#?\d+\b"
    # A Python traceback's own lines name no code: its "Traceback" read as a word pointed at a
    # project's traceback.py instead of the frames the traceback lists.
    r"|\bTraceback \(most recent call last\):"
    r"|\bDuring handling of the above exception, another exception occurred:"
    r"|\bThe above exception was the direct cause of the following exception:",
)
# Sphinx roles (:meth:`.Select.with_for_update`, :py:class:`~a.B`) keep only
# the backticked target.
_ROLE = re.compile(r":(?:[a-z]+:)?(?:meth|func|class|attr|mod|obj|data|exc|const|ref|doc|term|any|member|method|"
                   r"function|type|var|enum|struct|macro|fn|trait):(?=`)")


def clean_query(query: str) -> str:
    """``query`` without trailers, change ids, hashes, URLs, mail addresses
    and PR/issue numbers; Sphinx role markers reduced to their backticks."""
    text = _TRAILER_LINE.sub(" ", query)
    text = _NOISE.sub(" ", text)
    return _ROLE.sub("", text)


# A commit subject's leading scope ("io: ...", "fix(parser): ...",
# "shop-util, net: ...") names a component (a directory, a crate, a
# package), not a symbol: it counts as path evidence only, so a module that
# happens to share the scope's name is not read as the named target.
_SCOPE_PREFIX = re.compile(r"^\s*(?:[a-z][\w./-]*(?:\([^)\n]{0,60}\))?(?:\s*,\s*[a-z][\w./-]*)*!?:\s"
                           r"|\[[A-Za-z][\w./-]*(?:\s*,\s*[A-Za-z][\w./-]*)*\]\s)")


def split_scope(text: str) -> tuple[str, str]:
    """(scope, rest) of a message that starts with a commit scope, else ("", text)."""
    m = _SCOPE_PREFIX.match(text)
    if m is None:
        return "", text
    return m.group(0), text[m.end():]


# -- seeds --------------------------------------------------------------------

_STOP_FOR_PATHS = frozenset(
    """a an the and or of to in on for from with by at as is are was were be been it its this that these those
    what which who whom whose how why where when does do did done can could should would will shall may might
    me my we our you your i not no yes all any some each every into about than then there here also just only
    please show find give get tell explain list see look code function functions method methods class classes
    file files module modules callers caller callees callee calls call called usages usage uses used references
    reference implementation implementations subclasses subclass base parent tests test work works working
    implement implements implemented implementing
    fix fixed fixes bug bugs add added adds support make makes use using update updated change changed new
    when if else return returns value values handle handles handling issue issues allow allows
    feat chore refactor docs ci perf wip revert merge closes resolves refs see pr apply applied review
    suggestion suggestions feedback address addressed comment comments cleanup tweak tweaks typo typos""".split()
)
# Function words of prose: never a name, but they may still be a file stem
# (`once.rs`), so path evidence reads them.
_PROSE = frozenset(
    """has have had having so far such very much many more most less other another both either neither nor yet
    still already ever never always often again once since because while though although whether unless until
    upon via per etc seems seem found now instead rather""".split()
)
_STOP = _STOP_FOR_PATHS | _PROSE

_BACKTICKED = re.compile(r"`([^`]+)`")
# A part may begin with "#" after a dot: a JavaScript/TypeScript private member (``Ky.#retry``).
_IDENT_TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.#?|::|#|->)[A-Za-z_$][\w$]*)*")
# Written to take time linear in the question: a path starts only where a run of path characters
# starts and reads it once (possessively), a file name (`.eslintrc.cjs` too) has at most nine dotted
# parts.  Tried from every position of a long run ("a-a-a-...", "a.a.a..."), the first form of this
# pattern took time cubic in the run's length: 18 s for a question of 800 such characters.  Over
# 43,000 commit messages of the corpora both forms find the same.
_PATH_TOKEN = re.compile(
    r"(?:(?<![\w.\-])[\w.\-]++(?<=[\w\-])(?:/[\w.\-]+)+"
    r"|(?<![\w\-])[\w\-]+(?:\.[\w\-]+){0,8}\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|mts|cts|go|rs|java|c|h|cc|cpp|hpp|"
    r"cs|rb|php)\b)(?::\d+(?::\d+)?)?")
_TRACEBACK_LOCATION = re.compile(r'File "([^"\n]+)", line (\d+)')
# (The slash before a folder is looked at, not taken: `lib/python3/site-packages/` is two matches.)
_INSTALLED = re.compile(r"(?<![^/])(?:site-packages|dist-packages|lib/python\d[\d.]*)/")
_HYPHENATED = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+\b")
# "#" separates only after a name character (Ruby's ``A#m``); one that begins a part is the name's
# own (a private member, ``Ky.#retry``), as the index spells it.
_QUAL_SPLIT = re.compile(r"\.|::|->|(?<=[\w$])#")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# A run of name characters, snake_case and hyphenated names whole (a hyphen only between name
# characters: "workers--they" is two words, as prose writes a dash).
_NAME_RUN = re.compile(r"[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*")


# When the question names symbols or paths outright, everything found by
# fuzzier means (split words, full-text search) shares this much of the
# starting mass in total, so a crowd of lexical hits cannot drown them.
FUZZY_SHARE_WITH_NAMED = 0.5
# Full-text hits asked for: the best LEXICAL_SEEDS seed the ranking, the
# rest wait to fill a budget the graph ranking leaves unused.
LEXICAL_SEEDS = 60
LEXICAL_FILL = 200
# Path evidence: the multiplier for what lives in a file or directory the
# question names (see ``path_boost``); a directory covering more than
# DIR_MAX_SHARE of the project's files says nothing.
FILE_EVIDENCE = 1.0
DIR_EVIDENCE = 0.6
DIR_MAX_SHARE = 0.25
# A commit scope naming a package of a monorepo says where; the message's
# words say what there.  The package's own best full-text matches seed the
# ranking (PACKAGE_SEEDS of them, at PACKAGE_WEIGHT of the global hits'
# strength): the project-wide best matches of everyday words ("request",
# "channel", "client") are elsewhere, and evidence only multiplies what the
# ranking reaches.  Found among the first PACKAGE_SEARCH hits.
PACKAGE_SEEDS = 5
PACKAGE_WEIGHT = 0.5
PACKAGE_SEARCH = 4000


def selectivity(n: int) -> float:
    """How much a name defined ``n`` times says: 1 for a unique name, about
    0.16 for one defined 200 times."""
    return 1.0 / (1.0 + math.log(n)) if n > 1 else 1.0


@dataclass
class Seeds:
    symbols: dict[str, float] = field(default_factory=dict)  # node -> strength
    files: dict[str, float] = field(default_factory=dict)  # path -> strength
    named: set[str] = field(default_factory=set)  # symbols the query names explicitly
    fuzzy: dict[str, float] = field(default_factory=dict)  # found by words / full-text search
    evidence: dict[str, float] = field(default_factory=dict)  # file or directory path -> boost
    lexical: list[str] = field(default_factory=list)  # full-text hits, best first (all of them)
    packages: list[str] = field(default_factory=list)  # package directories a commit scope names
    # path_boost by file: asked for each of a question's candidates, which share few files
    _boosts: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    def add_symbol(self, node: str, score: float) -> None:
        if score > self.symbols.get(node, 0.0):
            self.symbols[node] = score

    def add_fuzzy(self, node: str, score: float) -> None:
        if score > self.fuzzy.get(node, 0.0):
            self.fuzzy[node] = score

    def add_evidence(self, path: str, boost: float) -> None:
        if boost > self.evidence.get(path, 0.0):
            self.evidence[path] = boost
            self._boosts.clear()

    def path_boost(self, path: str) -> float:
        """The multiplier for a node in file ``path``: the strongest evidence
        naming the file or one of its directories."""
        if not self.evidence:
            return 1.0
        boost = self._boosts.get(path)
        if boost is None:
            best = self.evidence.get(path, 0.0)
            d = path
            while "/" in d:
                d = d.rsplit("/", 1)[0]
                b = self.evidence.get(d + "/")
                if b is not None and b > best:
                    best = b
            boost = self._boosts[path] = 1.0 + best
        return boost

    def personalization(self) -> dict[str, float]:
        """Starting mass of the ranking: explicit seeds first, fuzzy ones capped."""
        explicit: dict[str, float] = dict(self.symbols)
        for path, s in self.files.items():
            explicit[path] = max(explicit.get(path, 0.0), s)
        fuzzy = {n: s for n, s in self.fuzzy.items() if n not in explicit}
        if self.evidence:
            fuzzy = {n: s * self.path_boost(n.split("::", 1)[0]) for n, s in fuzzy.items()}
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
    """Case- and separator-insensitive lookup of symbol names, file stems and
    directory names."""

    def __init__(self, graph: GraphView):
        self.by_key: dict[str, set[str]] = defaultdict(set)
        for name in graph.names():
            self.by_key[_key(name)].add(name)
        self.file_stems: dict[str, list[str]] = defaultdict(list)
        self.dirs: dict[str, list[str]] = defaultdict(list)  # key of a basename -> "a/b/" prefixes
        dir_files: dict[str, int] = defaultdict(int)
        files = graph.files()
        # Stems of several words (auth_tokens, cache_entriesV2): by
        # their first word, with all their words, singular.
        self.stem_parts: dict[str, list[tuple[frozenset[str], str]]] = defaultdict(list)
        self.stem_words: dict[str, list[str]] = defaultdict(list)  # each word of such a stem -> its files
        for path in files:
            base = path.rsplit("/", 1)[-1]
            stem = base.split(".", 1)[0]
            self.file_stems[_key(stem)].append(path)
            parts = [_fold(p) for p in split_identifier(stem.replace("-", "_")) if len(p) > 1 and not p.isdigit()]
            if len(set(parts)) > 1:
                self.stem_parts[parts[0]].append((frozenset(parts), path))
                for part in set(parts):
                    self.stem_words[part].append(path)
            d = path
            while "/" in d:
                d = d.rsplit("/", 1)[0]
                dir_files[d + "/"] += 1
        self.file_count = max(1, len(files))
        self.dir_files = dict(dir_files)
        for d in dir_files:
            self.dirs[_key(d[:-1].rsplit("/", 1)[-1])].append(d)
        # Package roots of a workspace or monorepo (`shop-util/`,
        # `packages/runtime-core/`): directories holding a `src/` or `lib/`
        # tree.  Indexed by each dash/underscore/slash-separated part of
        # their path, so a commit scope that names only part of a package
        # (`util`, `stream`) still finds it.
        self.packages: dict[str, list[tuple[tuple[str, ...], str]]] = defaultdict(list)
        for d in dir_files:
            if d + "src/" in dir_files or d + "lib/" in dir_files:
                parts = _package_parts(d)
                for part in set(parts):
                    self.packages[part].append((parts, d))


def _package_parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in re.split(r"[-_/]+", path.strip("/").lower()) if p)


def _key(name: str) -> str:
    return name.replace("_", "").replace("$", "").replace("-", "").lower()


def _fold(word: str) -> str:
    """Lower-case and singular enough to match `completions` with `completion`."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclass
class _Token:
    text: str  # as written, qualifiers included
    parts: list[str]
    quoted: bool  # inside backticks
    called: bool  # followed by "("

    @property
    def name(self) -> str:
        return self.parts[-1]

    def is_code(self) -> bool:
        return self.quoted or self.called or len(self.parts) > 1 or _looks_like_code(self.name)


# A conventional-commit type with its scope ("fix(parser): ...", "build(deps)!: ...") is no call,
# wherever it stands: a squash-merged pull request's message lists its commits in its body
# ("* fix(vue-query): ...", "- test(core): ..."), and a project that defines `fix`, `test` or
# `build` would otherwise have that function named (shown first and whole) by every such line.
_TYPE_AND_SCOPE = re.compile(r"\([^()\n]{1,60}\)!?:(?=\s|$)")


def _tokens(text: str) -> list[_Token]:
    spans = [m.span(1) for m in _BACKTICKED.finditer(text)]
    out = []
    for m in _IDENT_TOKEN.finditer(text):
        token = m.group(0)
        start, end = m.span()
        quoted = any(a <= start and end <= b for a, b in spans)
        called = text[end : end + 1] == "(" and not (
            not quoted and token in _COMMIT_TYPES and _TYPE_AND_SCOPE.match(text, end) is not None)
        out.append(_Token(token, _QUAL_SPLIT.split(token), quoted, called))
    return out


def _question_tokens(query: str) -> list[_Token]:
    """The identifier tokens of a question, paths and a leading commit scope left out (`fix(io):`
    reads like a call of `fix`; the seeds, too, read a scope as a component, never a name): what
    the name notes look at."""
    return _tokens(_PATH_TOKEN.sub(" ", split_scope(clean_query(query))[1]))


def names_in_tests_only(query: str, graph: GraphView) -> list[str]:
    """The names ``query`` writes as code whose every definition is test code (left out of a
    slice unless tests are asked for)."""
    out: list[str] = []
    for tok in _question_tokens(query):
        if len(tok.parts) != 1 or not tok.is_code() or tok.name in out:
            continue
        defs = graph.definitions(tok.name)
        if defs and all(graph.is_test_node(d) for d in defs):
            out.append(tok.name)
    return out


def names_not_defined(query: str, graph: GraphView) -> list[str]:
    """The names ``query`` clearly writes as code (backticked, called, dotted, snake_case or
    CamelCase; not a capitalised word of a sentence, nor an acronym in capitals, HTTP or SSL,
    which a question uses as a word) that nothing in the project defines: a misspelling, a
    library's name, a name from another project.  The slice still shows the closest matches;
    this says that they are only that."""
    out: list[str] = []
    for tok in _question_tokens(query):
        name = tok.name
        spelled = ".".join(tok.parts)
        strong = (tok.quoted or tok.called or len(tok.parts) > 1 or "_" in name.strip("_")
                  or (any(c.isupper() for c in name[1:]) and any(c.islower() for c in name)))
        if not strong or len(name) < 3 or spelled in out or graph.definitions(name):
            continue
        out.append(spelled)
    return out


def has_other_words(query: str, names: list[str]) -> bool:
    """Whether ``query`` says anything besides ``names`` (as :func:`names_not_defined` spells
    them): a word that is not a function word of a question or request."""
    rest = query
    for name in names:
        rest = rest.replace(name, " ")
    return any(w.lower() not in _STOP for w in _WORD.findall(rest) if len(w) > 1)


def find_seeds(query: str, graph: GraphView, names: NameIndex, store, include_tests: bool,
               relaxed: bool = False) -> Seeds:
    """What the question points at in the project.  ``relaxed``: the fallback for a question none
    of whose distinctive words matches anything ("Fix flaky test", "docs: fix markup"): the
    full-text search then also takes the everyday words of commit messages and requests (fix,
    test, docs, comments, ...), leaving out only English function words."""
    seeds = Seeds()
    text = clean_query(query)
    tests = graph.test_files

    def allowed(node: str) -> bool:
        return include_tests or not graph.is_test_node(node)

    # 1. Paths the query names (``pkg/mod.py``, ``mod.py:120``, ``lib/rules/``); a Python
    # traceback's ``File "/abs/path/pkg/mod.py", line 120`` is read as ``pkg/mod.py:120``.
    text = _TRACEBACK_LOCATION.sub(lambda t: f" {t.group(1)}:{t.group(2)} ", text)
    for m in _PATH_TOKEN.finditer(text):
        token, _, position = m.group(0).partition(":")
        absolute = token.startswith("/") or text[m.start() - 1:m.start()] == "/"   # the match leaves a leading / out
        token = token.strip("./")
        if not token:
            continue
        # An absolute path (a traceback's) ends with the project's own path of the file -- one of
        # two parts or more: a lone name (utils.py) ends too many paths.  A frame inside an
        # installed package is that package's file: the project's only when the project holds
        # the package's whole path below the install folder (a library's own code in a bug
        # report's traceback: site-packages/pkg/engine.py is pkg/engine.py or src/pkg/engine.py),
        # never a project file that merely ends that path (utils/http.py in
        # site-packages/other/utils/http.py).
        installed = list(_INSTALLED.finditer(token)) if absolute else []
        package_path = token[installed[-1].end():] if installed else ""
        matched = [path for path in graph.files()
                   if path == token or path.endswith("/" + token)
                   or (absolute and not installed and "/" in path and token.endswith("/" + path))
                   or ("/" in package_path and (path == package_path or path.endswith("/" + package_path)))]
        for path in matched:
            seeds.files[path] = max(seeds.files.get(path, 0), 8.0)
            seeds.add_evidence(path, FILE_EVIDENCE)
        line = position.split(":", 1)[0]
        if line.isdigit() and 1 <= len(matched) <= 3:
            # A location (a traceback's or a compiler's ``file:line``) names the definition that
            # holds the line: it is the code asked about, shown whole like a name written as code.
            for path in matched:
                d = _definition_at(graph, path, int(line))
                if d is not None and allowed(d):
                    seeds.add_symbol(d, 10.0)
                    seeds.named.add(d)
        prefix = token.rstrip("/") + "/"
        for d in names.dirs.get(_key(prefix[:-1].rsplit("/", 1)[-1]), ()):
            if d == prefix or d.endswith("/" + prefix):
                seeds.add_evidence(d, DIR_EVIDENCE)
    text = _PATH_TOKEN.sub(" ", text)

    # 2. Words and hyphenated names that name a file stem or a directory
    # (a dialect, backend, plugin, rule, package): evidence for what lives there.
    _path_evidence(text, names, seeds, include_tests, tests)
    _scope, text = split_scope(text)

    # 3. Identifiers, qualified or not, exactly as written.  Words count as
    # code when their phrasing says so (backticks, a call, a qualifier,
    # CamelCase or snake_case); an everyday English word written as prose
    # ("select the version") is left to the fuzzier steps below.
    resolved_words: set[str] = set()
    qualified_words: set[str] = set()  # the parts of a qualified name that matched its definition
    quoted_words: set[str] = set()
    words_lower = {w.lower() for w in _WORD.findall(text)}
    for tok in _tokens(text):
        if tok.quoted:
            quoted_words.update(p.lower() for p in tok.parts)
        code = tok.is_code()
        name = tok.name
        lower = name.lower()
        if len(tok.parts) == 1 and not code and (lower in _STOP or lower in ENGLISH or len(name) < 2):
            continue
        if len(tok.parts) == 1 and len(name) < 2 and not (tok.quoted or tok.called):
            continue  # `x`, `X` in prose or a formula ("-(X**Y)")
        if len(tok.parts) > 1 and _seed_qualified(tok, graph, names, seeds, allowed):
            resolved_words.update(p.lower() for p in tok.parts)
            qualified_words.update(p.lower() for p in tok.parts)
            continue
        defs = [d for d in graph.definitions(name) if allowed(d)]
        if not defs:
            continue
        total = (9.0 if code else 6.0) * selectivity(len(defs))
        weights = [_def_evidence(d, graph, seeds, words_lower) for d in defs]
        norm = sum(weights)
        for d, w in zip(defs, weights):
            seeds.add_symbol(d, total * w / norm)
        favoured = [d for d, w in zip(defs, weights) if w > 1.0] or defs
        if len(favoured) > 3:
            # A name defined alike in many packages of a monorepo (one hook per framework's
            # package), where the question's scope or words point at one package more than the
            # rest: the definitions backed clearly best are the ones it names.
            best = max(weights)
            favoured = [d for d, w in zip(defs, weights) if w > 1.0 and w >= best * STRONGEST_EVIDENCE]
        # Only a mention written as code names its target outright (shown
        # first, whole): a plain prose word that happens to equal a name
        # ("add quotes around the option", "fix the watch callback") is a
        # strong seed, but commit messages and questions are full of such
        # words, and forcing their namesakes in crowds out the ranking.
        if len(favoured) <= 3 and code:
            seeds.named.update(favoured)
        resolved_words.add(lower)

    # 4. Words that spell a name with its separators dropped ("hash password",
    # "dispatch a request" -> dispatch_request).
    words = [w for w in _WORD.findall(text) if w.lower() not in resolved_words]
    content = [w for w in words if w.lower() not in _STOP]
    seen_keys: set[str] = set()
    for sequence in (words, content):
        for n in (3, 2, 1):
            for i in range(len(sequence) - n + 1):
                chunk = sequence[i : i + n]
                if n == 1 and (chunk[0].lower() in _STOP or len(chunk[0]) < 3):
                    continue
                if any(len(w) < 2 for w in chunk):
                    continue  # "X**Y" is no `xy`
                key = "".join(w.lower() for w in chunk)
                if key in seen_keys:
                    continue
                seen_keys.add(key)
                for name in names.by_key.get(key, ()):
                    defs = [d for d in graph.definitions(name) if allowed(d)]
                    if not defs:
                        continue
                    per = (3.0 + n) * selectivity(len(defs)) / len(defs) ** 0.5
                    for d in defs:
                        seeds.add_fuzzy(d, per)

    # 5. Lexical search over names, signatures, docstrings and code; weaker
    # when the question names its symbols outright.  Hits past the seeding
    # share wait in ``lexical`` to fill an unused budget.
    lexical_weight = 1.5 if seeds.named else 4.0
    stop = STOPWORDS if relaxed else _STOP
    # The parts of a qualified name that matched its definition are not searched again as text:
    # the qualifier picked the one meant, and the parts' other mentions ("Command.Find" -> every
    # method with "command" in its name) would crowd its own dependencies out of the ranking.  A
    # plain name is still searched: its namesakes in another case (Go's `Settle`) are found so.
    terms = [t for t in query_terms(text)
             if (t not in stop or t in quoted_words) and len(t) > 1 and t not in qualified_words]
    if len(terms) > MAX_SEARCH_TERMS:
        # Long questions (a pasted stack trace, a proxied prompt): keep the
        # longest words, which tend to be the rarest and cheapest to match.
        keep = set(sorted(terms, key=len, reverse=True)[:MAX_SEARCH_TERMS])
        terms = [t for t in terms if t in keep]
    if terms:
        limit = PACKAGE_SEARCH if seeds.packages else LEXICAL_FILL
        hits = ci.search_symbols(store, terms, limit=limit, counts=_term_counts(graph))
        if hits:
            top = hits[0][1] or 1.0
            rank = 0
            in_package: dict[str, list[tuple[str, float]]] = {d: [] for d in seeds.packages}
            for i, (sid, score) in enumerate(hits):
                if i >= LEXICAL_FILL and all(len(found) >= PACKAGE_SEEDS for found in in_package.values()):
                    break
                node = graph.node_for_db_id(sid)
                if node is None or not allowed(node):
                    continue
                for d, found in in_package.items():
                    if len(found) < PACKAGE_SEEDS and node.startswith(d):
                        found.append((node, score))
                if i >= LEXICAL_FILL:
                    continue
                seeds.lexical.append(node)
                if rank < LEXICAL_SEEDS:
                    seeds.add_fuzzy(node, lexical_weight * (score / top) / (1 + rank * 0.05))
                rank += 1
            for found in in_package.values():
                best = found[0][1] if found else 1.0
                for k, (node, score) in enumerate(found):
                    seeds.add_fuzzy(node, PACKAGE_WEIGHT * lexical_weight * (score / (best or 1.0)) / (1 + k * 0.05))
    return seeds


_term_counts_by_graph: "weakref.WeakKeyDictionary[GraphView, tuple[int, dict[str, int]]]" = weakref.WeakKeyDictionary()
_term_counts_lock = threading.Lock()


def _term_counts(graph: GraphView) -> dict[str, int]:
    """Rows each full-text token matches, remembered until the graph (and so
    the index behind it) changes: questions share most of their words."""
    with _term_counts_lock:
        hit = _term_counts_by_graph.get(graph)
        if hit is None or hit[0] != graph.version or len(hit[1]) > 100_000:
            hit = _term_counts_by_graph[graph] = (graph.version, {})
        return hit[1]


# "sync: ...", "feat(parser): ...", "time, sync: ...", "[io] ...": the area a
# message is about, named by the convention of many projects' histories.  A
# scope may list several packages of a monorepo with a shell's brace list
# ("fix({react,vue}-query): ..." is react-query and vue-query).
_AREA_PREFIX = re.compile(r"^\s*(?:([\w\-/.{}]+(?:\s*,\s*[\w\-/.{}]+)*)(?:\(([\w\-/., {}]+)\))?!?:\s"
                          r"|\[([\w\-/., {}]+)\]\s)")
_BRACE_LIST = re.compile(r"\{([^{}]*)\}")
AREA_FACTOR = 2.0
# Conventional-commit types say what kind of change it is, not where.
_COMMIT_TYPES = frozenset("""feat fix chore docs doc ci build perf refactor style test tests revert deps release
    bump wip misc""".split())


def _area_words(text: str) -> set[str]:
    """The words of the area a request's leading commit scope names (``fix(codegen,http): ...`` ->
    ``codegen``, ``http``; ``[io/net] ...`` -> ``io``, ``net``); empty without one."""
    m = _AREA_PREFIX.match(text)
    if m is None:
        return set()
    return {w for g in m.groups() if g for item in _expand_braces(g) for w in re.split(r"[\s,/.]+", item) if w}


def _expand_braces(scope: str) -> list[str]:
    """``{react,vue}-query, core`` -> ``react-query``, ``vue-query``, ``core``: the scope's
    comma-separated items, each brace list spelled out (the first list first, then the rest
    of each spelling, so nested or repeated lists expand too)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(scope):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth <= 0:
            items.append(scope[start:i])
            start, depth = i + 1, 0
    items.append(scope[start:])
    out: list[str] = []
    while items and len(out) < 64:  # a pathological scope cannot multiply without bound
        item = items.pop(0)
        m = _BRACE_LIST.search(item)
        if m is None:
            out.append(item.replace("{", " ").replace("}", " "))
            continue
        items[:0] = [item[: m.start()] + alt + item[m.end():] for alt in m.group(1).split(",")]
    return out


# Code that is rarely what a question is about unless it says so: examples,
# benchmarks, docs, scripts, and what JavaScript monorepos call a
# "playground" (small apps that exercise the library in its end-to-end tests
# or by hand).
PERIPHERAL_DIRS = frozenset({"examples", "example", "benchmarks", "benchmark", "bench", "benches", "docs",
                             "doc", "tools", "scripts", "demo", "demos", "samples", "sample",
                             "playground", "playgrounds"})


def is_peripheral(path: str) -> bool:
    """Whether ``path`` (a file, or a directory ending in "/") lies under a peripheral directory."""
    return any(part in PERIPHERAL_DIRS for part in path.split("/")[:-1])


def _own_first(paths, own_first: bool) -> list[str]:
    """``paths`` without those under a peripheral directory when ``own_first`` and any are left."""
    if not own_first:
        return list(paths)
    return [p for p in paths if not is_peripheral(p)] or list(paths)


def _path_evidence(text: str, names: NameIndex, seeds: Seeds, include_tests: bool, tests: set[str]) -> None:
    candidates = {m.group(0) for m in _HYPHENATED.finditer(text)}
    candidates |= {w for w in _WORD.findall(text) if len(w) >= 2 and w.lower() not in _STOP_FOR_PATHS}
    area = _area_words(text)
    candidates |= area
    for word in sorted(area):
        _package_evidence(word, names, seeds)
        _stem_part_evidence(word, names, seeds, include_tests, tests)
    # A name the project's own code and its examples share ("worker" -> src/worker.ts and a
    # dozen example apps' worker.js) names the project's own file, unless the question says
    # it is about the examples.  The examples' namesakes still count in how much the name
    # says (a name several files share is no less ambiguous for it): they only get nothing.
    own_first = not any(w.lower() in PERIPHERAL_DIRS or _fold(w) in PERIPHERAL_DIRS for w in _WORD.findall(text))
    # Words written on their own, not a part of a snake_case or hyphenated name
    # (`tracebacks_code_width`, `grpc-google`).
    prose = {w.lower() for w in _NAME_RUN.findall(text) if "_" not in w and "-" not in w}
    for word in candidates:
        key = _key(word)
        strength = AREA_FACTOR if word in area else 1.0
        if len(key) < 3 and word not in area:
            continue
        if key not in names.file_stems and key not in names.dirs and word.lower() in prose \
                and _fold(word) not in _STOP_FOR_PATHS:
            # A plural in prose names the file or directory of its singular ("preserve
            # params of workers" -> worker.ts, "hooks/"), as it names a multi-word stem's part;
            # a verb's -s form is no plural ("it gets", "updates": `get.go` is no topic of them).
            key = _key(_fold(word))
            if key not in names.file_stems and key not in names.dirs and word.lower() not in ENGLISH:
                # And one of a kind in prose names the module named for its plural, the
                # kind's home ("the `optional` validator" -> validators.py, "a completion" ->
                # completions.go): a module of many validators, converters or formatters is
                # named after all of them, while a question speaks of the one it is about.
                # Weaker than the module's name written out, never an everyday word ("the
                # type hints" are no topic of types.py, "an option" none of options.ts), and
                # never a directory: `dialects/` holds every dialect, not the one named.
                plural = next((k for k in _plurals(_key(word)) if k in names.file_stems), None)
                if plural is not None:
                    key, strength = plural, strength * PLURAL_STEM_EVIDENCE
        files = [p for p in names.file_stems.get(key, ()) if include_tests or p not in tests]
        if files:
            boost = strength * FILE_EVIDENCE * selectivity(len(files)) ** 2
            for path in _own_first(files, own_first):
                if word in area and len(files) > 1 and path.endswith(_FILE_IS_MODULE):
                    # Where each file is a module named by its stem (Rust), one module name
                    # recurs across crates and subtrees (a test crate's `io.rs`, a metrics
                    # `io.rs`, a client's and a server's `http1.rs`); a commit scope naming it
                    # names the area, whose code is mostly elsewhere: evidence, not a seed.
                    seeds.add_evidence(path, boost)
                else:
                    _named_file(seeds, path, boost)
        dirs = names.dirs.get(key, ())
        if dirs:
            covered = sum(names.dir_files[d] for d in dirs)
            if covered <= DIR_MAX_SHARE * names.file_count:
                boost = strength * DIR_EVIDENCE * selectivity(len(dirs)) ** 2
                for d in _own_first(dirs, own_first):
                    seeds.add_evidence(d, boost)
    # A stem of several words, all of which the question uses, in any order
    # ("refresh the token used for auth" -> auth_tokens.go).
    folded = {_fold(w) for w in _WORD.findall(text)}
    matched = [path for w in folded for parts, path in names.stem_parts.get(w, ())
               if parts <= folded and (include_tests or path not in tests)]
    if matched:
        boost = FILE_EVIDENCE * 0.8 * selectivity(len(matched)) ** 2
        for path in matched:
            _named_file(seeds, path, boost)
    # One distinctive word of such a stem, the rest unsaid ("find mutex
    # violations" -> flag_mutex.go): files named `<area>_<topic>` are asked
    # about by their topic alone.  Only a word few files' stems hold says
    # where, and only a word of the project's vocabulary: an everyday word
    # ("parse the value", "copy the headers") names a file by chance.  Weaker
    # than the whole stem, and never for a file a whole stem matched.  A scope's
    # words are left to _stem_part_evidence (never a file seed), and a word of
    # a longer name (`grpc-google`) is that name's, not a topic of its own.
    # The word is judged as written and as made singular (`status`, `classes`
    # are everyday words; their folds `statu`, `classe` are in no list).
    area_folded = {_fold(w) for w in _WORD.findall(" ".join(area))}
    topics = set()
    for raw in prose:
        w = _fold(raw)
        if len(w) >= 4 and w not in area_folded and not ({raw, w} & _STOP_FOR_PATHS or raw in ENGLISH
                                                           or w in ENGLISH or _key(raw) in names.file_stems
                                                           or w in names.file_stems):
            topics.add(w)
    for w in topics:
        found = [path for path in names.stem_words.get(w, ()) if include_tests or path not in tests]
        if not found or len(found) > STEM_WORD_MAX_FILES or any(path in matched for path in found):
            continue
        boost = FILE_EVIDENCE * STEM_WORD_EVIDENCE * selectivity(len(found)) ** 2
        for path in found:
            if own_first and is_peripheral(path):
                continue  # this weak a hint never points into the examples
            _named_file(seeds, path, boost)


_FILE_IS_MODULE = (".rs",)


PLURAL_STEM_EVIDENCE = 0.5  # how strongly a singular in prose names its plural's file or directory


def _plurals(key: str) -> tuple[str, ...]:
    """The regular plurals of a lower-case word (`hook` -> `hooks`, `match` -> `matches`,
    `entry` -> `entries`)."""
    if key.endswith("s"):
        return ()
    if key.endswith(("ch", "sh", "x", "z")):
        return (key + "es",)
    if len(key) > 3 and key.endswith("y") and key[-2] not in "aeiou":
        return (key[:-1] + "ies",)
    return (key + "s",)


def _named_file(seeds: Seeds, path: str, boost: float) -> None:
    """A file the question's words name: evidence for what it holds, and a seed of the ranking."""
    seeds.add_evidence(path, boost)
    seeds.files[path] = max(seeds.files.get(path, 0.0), 4.0 * boost)


# A single word of a file's stem (see _path_evidence): how strong, and how few files may hold it.
STEM_WORD_EVIDENCE = 0.5
STEM_WORD_MAX_FILES = 2


def _package_evidence(scope: str, names: NameIndex, seeds: Seeds) -> None:
    """A commit scope naming a package of a workspace or monorepo by part of
    its directory name (`util: ...` -> `shop-util/`, `runtime-core: ...` ->
    `packages/runtime-core/`): directory evidence for the whole package, so
    the ranking, not the seeding, decides which of its files matter."""
    found = _named_packages(scope, names, SCOPE_PACKAGE_MAX_SHARE)
    boost = AREA_FACTOR * DIR_EVIDENCE * selectivity(len(found)) ** 2
    for d in found:
        seeds.add_evidence(d, boost)
        if d not in seeds.packages:
            seeds.packages.append(d)


def _named_packages(scope: str, names: NameIndex, max_share: float) -> list[str]:
    """The package directories a scope word names by part of their name; none when together
    they hold more than ``max_share`` of the project's files."""
    parts = _package_parts(scope)
    if not parts or scope.lower() in _COMMIT_TYPES or len("".join(parts)) < 3:
        return []
    n = len(parts)
    found = [d for dparts, d in names.packages.get(parts[0], ())
             if any(dparts[i : i + n] == parts for i in range(len(dparts) - n + 1))]
    # A workspace names its crates or packages `<project>-<component>` and their helpers
    # `<project>-<component>-<role>` (`-test`, `-derive`, `-codegen`): a scope word that ends
    # some packages' names names those, not the helpers where it is followed by more words.
    own = [d for d in found if _package_parts(d)[-n:] == parts]
    if own:
        found = own
    if sum(names.dir_files[d] for d in found) > max_share * names.file_count:
        return []
    return found


# A request's commit scope says which packages the task changes, unless the package is most of
# the project: both for the ranking's evidence and for telling a read of one of its files the
# task's own code.  A workspace of a few large crates (a protocol crate holding a third of the
# files) is still narrowed to one by a scope naming it; a plain directory word is not (DIR_MAX_SHARE).
SCOPE_PACKAGE_MAX_SHARE = 0.5


def scope_packages(query: str, names: NameIndex) -> list[str]:
    """The package directories a request's leading commit scope names (``fix(codegen,http): ...``
    -> ``crates/codegen/``, ``shop-http/``); empty when it has no scope or the scope names no
    package."""
    found: list[str] = []
    for word in sorted(_area_words(clean_query(query))):
        found += [d for d in _named_packages(word, names, SCOPE_PACKAGE_MAX_SHARE) if d not in found]
    return found


# A scope that names a file by the first words of its stem (`auth: ...` ->
# auth_tokens.go, `auth-v2: ...` -> auth_tokensV2.go): in a
# package kept in one directory, the components a history's scopes name are
# files.  Shared among the stems it starts (selectivity), and never a file
# seed: evidence for the ranking, not a file forced in.
STEM_PART_EVIDENCE = 1.0


def _stem_part_evidence(scope: str, names: NameIndex, seeds: Seeds, include_tests: bool, tests: set[str]) -> None:
    words = [_fold(p) for p in split_identifier(scope.replace("-", "_")) if len(p) > 1 and not p.isdigit()]
    if not STEM_PART_EVIDENCE or not words or scope.lower() in _COMMIT_TYPES:
        return
    parts, first = set(words), words[0]
    found = [path for stem, path in names.stem_parts.get(first, ())
             if parts <= stem and (include_tests or path not in tests)]
    if not found:
        return
    boost = AREA_FACTOR * FILE_EVIDENCE * STEM_PART_EVIDENCE * selectivity(len(found)) ** 2
    for path in found:
        seeds.add_evidence(path, boost)


def _seed_qualified(tok: _Token, graph: GraphView, names: NameIndex, seeds: Seeds, allowed) -> bool:
    """Seeds for ``Class.method``, ``module.func``, ``pkg.mod.Class.method``,
    ``a::b::C``: the longest qualname suffix that matches wins; leading parts
    that match no qualname are read as a module path.  False when nothing
    matched exactly."""
    parts = tok.parts
    # A later definition of a name in its scope is ``name:set`` / ``name:2`` (indexer/parse.py,
    # _disambiguate): its name is the part before the colon.
    name = parts[-1].split(":", 1)[0]
    defs = [d for d in graph.definitions(name) if allowed(d)]
    for i in range(len(parts) - 1):
        qual = ".".join(parts[i:])
        exact = [d for d in defs if _qual_matches(graph.node(d)["qualname"], qual)]
        if not exact:
            continue
        module = [p.lower() for p in parts[:i]]
        if module:
            on_path = [d for d in exact if _path_has(graph.file_of(d), module)]
            exact = on_path or exact
        for d in exact:
            seeds.add_symbol(d, 10.0 / max(1.0, len(exact) ** 0.5))
        if len(exact) <= 3:
            seeds.named.update(exact)
        impls = _implementations(exact, defs, graph)
        for d in impls:
            seeds.add_symbol(d, 5.0 / max(1.0, len(impls) ** 0.5))
        if len(exact) <= 3 and len(impls) <= 3:
            seeds.named.update(impls)
        return True
    # `Class.method` where only the class part resolves: the class is a seed too.
    for d in graph.definitions(parts[-2]):
        if allowed(d):
            seeds.add_symbol(d, 4.0 * selectivity(len(graph.definitions(parts[-2]))))
    return False


# Kinds whose methods are declarations that other types carry out (a Go interface, a Rust trait,
# a TypeScript or Java interface).
_ABSTRACT_KINDS = frozenset({"interface", "trait"})
# More implementations than this and the method's name is a convention (`String`, `fmt`, `len`),
# not a pointer to where the named behaviour lives.
_MAX_IMPLEMENTATIONS = 6


def _implementations(named: list[str], defs: list[str], graph: GraphView) -> list[str]:
    """The methods that carry out a named interface or trait method (``Encoder.EncodeEntry``
    names ``jsonEncoder.EncodeEntry`` and ``consoleEncoder.EncodeEntry`` too): the code a change
    to the declared behaviour edits is in them, and a Go type satisfies an interface by its
    method names alone, with no edge to follow.  Same-named methods of concrete types, among
    ``defs`` (the name's allowed definitions); none when there are too many to be specific."""
    abstract = [d for d in named if _owner_kind(graph, d) in _ABSTRACT_KINDS]
    if not abstract:
        return []
    # Where the language says which methods implement it (Rust's `impl Trait for T`, a class
    # that `implements` an interface) the graph links them to the declaration: those, and
    # only those.  A Go interface has no such link, and is matched by the method's name.
    allowed = set(defs)
    linked = [n.node for d in abstract for n in graph.neighbors(d, kinds=["inherits"], direction="in")
              if n.node in allowed and n.node not in named]
    if linked:
        impls = list(dict.fromkeys(linked))
    else:
        impls = [d for d in defs if d not in named and graph.node(d).get("kind") == "method"
                 and _owner_kind(graph, d) not in _ABSTRACT_KINDS]
    return impls if len(impls) <= _MAX_IMPLEMENTATIONS else []


def _owner_kind(graph: GraphView, node: str) -> str | None:
    """The kind of the definition ``node`` is declared in (None at a file's top level)."""
    path, qualname = node.split("::", 1)
    if "." not in qualname:
        return None
    owner = f"{path}::{qualname.rsplit('.', 1)[0]}"
    return graph.node(owner).get("kind") if owner in graph else None


def _definition_at(graph: GraphView, path: str, line: int) -> str | None:
    """The innermost definition of ``path`` whose lines hold ``line`` (None at module level)."""
    best, span = None, None
    for node in graph.symbols_in_file(path):
        attrs = graph.node(node)
        start, end = attrs.get("start_line"), attrs.get("end_line")
        if start is not None and end is not None and start <= line <= end and (span is None or end - start < span):
            best, span = node, end - start
    return best


_LATER_DEFINITION = re.compile(r":\w+(?=\.|$)")  # the suffix of a later definition of a name (parse._disambiguate)


def _qual_matches(qualname: str, qual: str) -> bool:
    if ":" in qualname and ":" not in qual:
        qualname = _LATER_DEFINITION.sub("", qualname)  # ``Cls.size`` also names ``Cls.size:set``, ``Cls.size:2``
    return qualname == qual or qualname.endswith("." + qual)


def _path_has(path: str, module: list[str]) -> bool:
    """Whether the dotted module prefix (``sqlalchemy.dialects.mysql``) is
    spelled by the file's path, ignoring a leading source root."""
    pieces = [p.lower() for p in path.rsplit(".", 1)[0].split("/")]
    n = len(module)
    return any(pieces[i : i + n] == module for i in range(len(pieces) - n + 1))


STRONGEST_EVIDENCE = 0.75  # definitions within this share of the best-backed namesake's evidence are its peers


def _def_evidence(node: str, graph: GraphView, seeds: Seeds, words: set[str]) -> float:
    """How much more than its namesakes one definition of a name is backed
    by the rest of the question: its file or directory named, its class named."""
    boost = seeds.path_boost(graph.file_of(node))
    qualname = graph.node(node)["qualname"]
    if "." in qualname and qualname.rsplit(".", 2)[-2].lower() in words:
        boost += 1.0
    return boost


def _looks_like_code(word: str) -> bool:
    return "_" in word or any(c.isupper() for c in word[1:]) or (word[:1].isupper() and len(word) > 1)
