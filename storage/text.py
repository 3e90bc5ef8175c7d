"""Identifier-aware text for the lexical index.

SQLite's unicode61 tokenizer already splits ``snake_case`` at underscores but
keeps ``CamelCase`` whole, so a search for "auth service" would miss
``AuthService``.  We index the original text plus the lower-cased parts of
every identifier with inner capitals, and split queries the same way.
"""

from __future__ import annotations

import re
from functools import lru_cache

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HUMP = re.compile(r"[a-z][A-Z]|[A-Z][A-Z][a-z]|[A-Za-z][0-9]")
_CASE_HUMP = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_WORD = re.compile(r"\w+", re.UNICODE)


def split_identifier(ident: str) -> list[str]:
    """``parseHTTPRequest_v2`` -> ``['parse', 'http', 'request', 'v', '2']``."""
    return [p.lower() for p in _PARTS.findall(ident)]


# Identifiers with an inner capital: fooBar, FooBar, HTTPServer, v2Name.
_CAMEL_IDENT = re.compile(r"\b[A-Za-z_0-9]*(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z])[A-Za-z0-9_]*")


def expand_identifiers(text: str) -> str:
    """``text`` followed by the split parts of its camel-cased identifiers."""
    idents = set(_CAMEL_IDENT.findall(text))
    if not idents:
        return text
    extra = " ".join(" ".join(split_identifier(i)) for i in sorted(idents))
    return text + "\n" + extra


# The dotted parts of qualified names repeat across a file's symbols (a class's name in each of
# its methods') and across files (the same method names): each part's camel-cased identifiers and
# their split text are worked out once.
@lru_cache(maxsize=1 << 16)
def _camel_parts(word: str) -> tuple[tuple[str, str], ...]:
    """(identifier, its split parts joined by spaces) of each camel-cased identifier in ``word``."""
    return tuple((i, " ".join(split_identifier(i))) for i in _CAMEL_IDENT.findall(word))


def expand_name(qualname: str) -> str:
    """:func:`expand_identifiers` of a qualified name with its dots as spaces
    (``Foo.barBaz`` -> ``Foo barBaz`` and the split parts), the same text."""
    text = qualname.replace(".", " ")
    # No identifier spans a space, so the identifiers of the whole text are those of its words.
    found = dict(p for word in text.split(" ") for p in _camel_parts(word))
    if not found:
        return text
    return text + "\n" + " ".join(found[i] for i in sorted(found))


def query_terms(text: str, number_parts: bool = True) -> list[str]:
    """Lower-cased search terms of a free-text query, identifiers split, order kept.

    ``number_parts=False`` keeps a word's digits with its letters: ``sha256``,
    ``http2`` and ``v2`` stay whole, and a split never yields a bare number or
    a lone letter.  For a search that matches keywords as typed, a number split
    off a name would match every text that merely mentions that number."""
    hump = _HUMP if number_parts else _CASE_HUMP
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text):
        pieces = [word.lower()]
        if "_" in word or hump.search(word):
            parts = [p for chunk in word.split("_") for p in split_identifier(chunk)]
            pieces += parts if number_parts else [p for p in parts if len(p) > 1 and not p.isdigit()]
        for piece in pieces:
            piece = piece.strip("_")
            if piece and piece not in seen:
                seen.add(piece)
                terms.append(piece)
    return terms


def fts_quote(term: str) -> str:
    """Quote a term for an FTS5 MATCH expression (no operator injection).

    A NUL ends the expression inside FTS5's parser ("unterminated string"), so
    text pasted with one (a C string, a binary dump) becomes a space, which the
    tokenizer reads as the separator a NUL is anyway."""
    return '"' + term.replace('"', '""').replace("\0", " ") + '"'


def stored_text(value: str | bytes | memoryview) -> str:
    """A file text as the store gave it back: PostgreSQL keeps it as UTF-8 bytes
    (its text type cannot hold NUL), SQLite as text."""
    return value if isinstance(value, str) else bytes(value).decode("utf-8")
