"""Which files are code, in which language, and the tree-sitter objects for it.

Grammars come from the official per-language wheels (bundled, never
downloaded).  Language objects, parsers and compiled queries are built lazily
and cached per process, so parse workers pay for them once.
"""

from __future__ import annotations

import importlib
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
