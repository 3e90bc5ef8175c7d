"""Plain data passed between the parser, the index run and storage.

Everything here is picklable so parse results can cross process boundaries
during a parallel cold index.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Symbol kinds a query file may declare with ``@definition.<kind>``.
SYMBOL_KINDS = (
    "function",
    "method",
    "class",
    "interface",
    "struct",
    "enum",
    "type",
    "constant",
    "module",
)

# Reference kinds a query file may declare with ``@reference.<kind>``.
# bind: a variable's declared type (no edge); export: a module exporting a name it has
# (JavaScript/TypeScript `export default toRem`, `export { toRem }`), a use of that name
REF_KINDS = ("call", "type", "inherit", "bind", "export")
# The graph edge a resolved reference of each kind becomes.
REF_EDGE = {"call": "calls", "type": "references", "inherit": "inherits", "export": "references"}


@dataclass(slots=True)
class SymbolFact:
    """One definition found in a file.

    ``qualname`` is relative to the file (``Class.method``); the project-wide
    identifier is ``f"{path}::{qualname}"``.  Lines are 1-based and inclusive,
    bytes are 0-based and end-exclusive, both covering decorators/annotations
    that belong to the definition.
    """

    name: str
    qualname: str
    kind: str
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    signature: str
    docstring: str | None = None
    parent: str | None = None  # qualname of the enclosing symbol, if any


@dataclass(slots=True)
class RefFact:
    """Uses of a name from one scope: calls, type annotations, base classes.

    Identical uses (same scope, name, kind and receiver) are folded into one
    fact with a ``count``; ``line`` is the first of them.
    """

    name: str
    kind: str  # one of REF_KINDS
    line: int
    scope: str | None = None  # qualname of the innermost enclosing symbol
    receiver: str | None = None  # text before the dot: ``self``, ``os.path``, ``AuthService``
    count: int = 1


@dataclass(slots=True)
class ImportFact:
    """One imported binding, as written in the source.

    ``module`` is the module specifier exactly as the language spells it
    (``..pkg.mod``, ``./util``, ``github.com/x/y/pkg``, ``crate::a::b``).
    ``name`` is the imported member (``None`` for a whole-module import) and
    ``alias`` the local name it is bound to when that differs.
    """

    module: str
    name: str | None
    alias: str | None
    line: int


@dataclass(slots=True)
class ParseResult:
    path: str
    language: str
    symbols: list[SymbolFact] = field(default_factory=list)
    refs: list[RefFact] = field(default_factory=list)
    imports: list[ImportFact] = field(default_factory=list)
    # Set when the tree has ERROR/MISSING nodes: what parsed is still kept.
    syntax_error: str | None = None
