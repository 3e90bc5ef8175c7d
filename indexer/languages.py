"""Which files are code, in which language, and the tree-sitter objects for it.

Grammars come from the official per-language wheels (bundled, never
downloaded).  Language objects, parsers and compiled queries are built lazily
and cached per process, so parse workers pay for them once.
"""

from __future__ import annotations

import importlib
import re
import threading
from functools import lru_cache
from pathlib import Path

import tree_sitter as ts

# extension -> language name
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".rake": "ruby",  # Rake task files
    ".ru": "ruby",    # Rack's config.ru
    ".php": "php",
}

# language name -> (module, attribute returning the grammar pointer)
_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "php": ("tree_sitter_php", "language_php"),
}

LANGUAGES = tuple(_GRAMMARS)
QUERY_DIR = Path(__file__).with_name("queries")

_lock = threading.Lock()


class UnsupportedLanguage(LookupError):
    pass


def language_for_path(path: str) -> str | None:
    """The language of a file by its extension, or None if it is not code we parse."""
    dot = path.rfind(".")
    if dot < 0:
        return None
    return EXTENSIONS.get(path[dot:].lower())


# A `.h` header is C++ when its text says so: C++ libraries name their headers
# `.h` as often as `.hpp`, and read as C a namespace, a template or a class
# is a syntax error that loses the definitions in it.  (A class head is
# looked for within 200 characters: unbounded, a file of `class x` lines
# without a brace would be scanned to its end from every one of them.)
_CPP_HEADER = re.compile(
    rb"^[ \t]*(?:namespace(?:[ \t]+\w+)?\s*\{|template\s*<|class[ \t]+\w+[^;(){}]{0,200}\{|"
    rb"(?:public|private|protected)[ \t]*:|using[ \t]+namespace[ \t]|extern[ \t]+\"C\+\+\")",
    re.M)


def language_of(path: str, language: str | None, source: bytes) -> str | None:
    """``language`` (by the path's extension), or C++ for a ``.h`` header written in C++."""
    if language == "c" and path[-2:].lower() == ".h" and _CPP_HEADER.search(source):
        return "cpp"
    return language


@lru_cache(maxsize=None)
def get_language(name: str) -> ts.Language:
    try:
        module_name, attr = _GRAMMARS[name]
    except KeyError:
        raise UnsupportedLanguage(name) from None
    module = importlib.import_module(module_name)
    return ts.Language(getattr(module, attr)())


def query_source(name: str) -> str:
    # TSX shares the TypeScript query file; its grammar is a superset.
    file_name = "typescript" if name == "tsx" else name
    return (QUERY_DIR / f"{file_name}.scm").read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def get_query(name: str) -> ts.Query:
    return ts.Query(get_language(name), query_source(name))


class QueryPass:
    """Part of a language's query, run as one cursor over a file.

    ``patterns[i]`` is the source text of the pass's pattern ``i`` (what its
    matches capture can be read from it); ``max_start_depth`` 0 means every
    pattern is anchored at the file's root node.  A plain class: a dataclass
    compiles its methods at import, which every ``memstrata`` command pays."""

    __slots__ = ("query", "patterns", "max_start_depth")

    def __init__(self, query: ts.Query, patterns: tuple[str, ...], max_start_depth: int | None):
        self.query = query
        self.patterns = patterns
        self.max_start_depth = max_start_depth


# The node type a pattern starts with: ``(type`` or ``((type`` (a pattern with
# predicates); an alternation ``[...]`` is never taken as anchored.
_PATTERN_HEAD = re.compile(r"\s*\((?:\s*\()?\s*([A-Za-z_]\w*)")


@lru_cache(maxsize=None)
def get_query_passes(name: str) -> tuple[QueryPass, ...]:
    """The language's query split in two: the patterns anchored at the root
    node (``(module (expression_statement ...))``: top-level constants) and
    the rest.  A root-anchored pattern stays in progress for the whole walk
    of the file, which makes every node dearer to visit; on its own, with
    matches allowed to start only at the root, it visits just the top level."""
    source = query_source(name)
    root_type = get_parser(name).parse(b"").root_node.type
    language = get_language(name)
    # Compiling a query costs a worker as much as parsing a few files: the
    # patterns are cut out of the text here, and the whole query is compiled
    # only when the two halves do not hold exactly the cut patterns.
    patterns = _split_patterns(source)
    passes = _build_passes(language, patterns, root_type) if patterns else None
    if passes is None:
        full = get_query(name)
        data = source.encode("utf-8")
        patterns = [data[full.start_byte_for_pattern(i) : full.end_byte_for_pattern(i)].decode("utf-8")
                    for i in range(full.pattern_count)]
        passes = _build_passes(language, patterns, root_type, check=False)
    return passes


_DEFINES = re.compile(r"@(?:definition\.|scope\b)")


@lru_cache(maxsize=None)
def get_definition_passes(name: str) -> tuple[QueryPass, ...]:
    """:func:`get_query_passes` with only the patterns that find definitions (and ``@scope``
    blocks): what an outline of a block of code needs.  References and imports, most of a file's
    matches, are left out of the walk altogether."""
    root_type = get_parser(name).parse(b"").root_node.type
    patterns = [text for qp in get_query_passes(name) for text in qp.patterns
                if _DEFINES.search("\n".join(line.split(";", 1)[0] for line in text.splitlines()))]
    return _build_passes(get_language(name), patterns, root_type, check=False)


def _build_passes(language: ts.Language, patterns: list[str], root_type: str,
                  check: bool = True) -> tuple[QueryPass, ...] | None:
    rooted: list[str] = []
    rest: list[str] = []
    for text in patterns:
        head = _PATTERN_HEAD.match(text)
        code = "\n".join(line.split(";", 1)[0] for line in text.splitlines())
        # Only definitions move: their order among other matches is settled
        # by sorting on their spans, while imports keep the order they match in.
        anchored = head is not None and head.group(1) == root_type and "@definition." in code \
            and "@reference." not in code and "@import" not in code
        (rooted if anchored else rest).append(text)
    passes = []
    for part, depth in ((rest, None), (rooted, 0)):
        if not part:
            continue
        query = ts.Query(language, "\n".join(part))
        if check:
            starts, at = [], 0
            for text in part:
                starts.append(at + len(text.encode("utf-8")) - len(text.lstrip().encode("utf-8")))
                at += len(text.encode("utf-8")) + 1
            if query.pattern_count != len(part) or \
                    [query.start_byte_for_pattern(i) for i in range(len(part))] != starts:
                return None
        passes.append(QueryPass(query, tuple(part), depth))
    return tuple(passes)


def _split_patterns(source: str) -> list[str]:
    """The top-level patterns of a query's text, each with the comments and
    blank lines that follow it."""
    patterns: list[str] = []
    depth = 0
    start = None
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == ";":
            end = source.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if c == '"':
            i += 1
            while i < n and source[i] != '"':
                i += 2 if source[i] == "\\" else 1
            i += 1
            continue
        if c in "([":
            if depth == 0 and start is not None:  # the previous pattern closed
                patterns.append(source[start:i])
                start = i
            if start is None:
                start = i
            depth += 1
        elif c in ")]":
            depth -= 1
        i += 1
    if start is not None:
        patterns.append(source[start:])
    return patterns


_parsers = threading.local()


def get_parser(name: str) -> ts.Parser:
    """A parser for ``name``; parsers are not thread-safe, so one per thread."""
    cache = getattr(_parsers, "cache", None)
    if cache is None:
        cache = _parsers.cache = {}
    parser = cache.get(name)
    if parser is None:
        with _lock:
            parser = ts.Parser(get_language(name))
        cache[name] = parser
    return parser
