"""Search terms of a text, for the BM25 rankings (the naive-RAG baseline's
chunks, the proxy's block units).

Terms are identifier-aware (``parseHTTPRequest`` also yields ``parse``,
``http``, ``request``), lower-cased, lightly stemmed (plural / -ing / -ed),
and English stop words are dropped.  These are words to match, not model
tokens: token counts come from :mod:`.tokens`.
"""

from __future__ import annotations

import re

from memstrata.storage.text import split_identifier

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can cannot could couldn't did didn't do does doesn't doing don't down during
    each few for from further had hadn't has hasn't have haven't having he her here hers herself him himself
    his how i if in into is isn't it it's its itself just let me more most mustn't my myself no nor not now
    of off on once only or other ought our ours ourselves out over own same shall she should shouldn't so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up upon us very via was wasn't we were weren't what when where which while who whom why will
    with won't would wouldn't you your yours yourself yourselves also etc e g eg ie""".split()
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_HUMP = re.compile(r"[a-z][A-Z]|[A-Z][A-Z][a-z]|[A-Za-z][0-9]")


def _stem(term: str) -> str:
    """A deliberately light stemmer so 'parse', 'parses', 'parsed', 'parsing' share a term."""
    if len(term) > 4 and term.endswith("ies"):
        term = term[:-3] + "y"
    elif len(term) > 3 and term.endswith("s") and not term.endswith(("ss", "us", "is")):
        term = term[:-1]
    if len(term) > 5 and term.endswith("ing"):
        term = term[:-3]
    elif len(term) > 4 and term.endswith("ed"):
        term = term[:-2]
    if len(term) > 3 and term.endswith("e"):
        term = term[:-1]
    return term


def terms_of(text: str) -> list[str]:
    """Search terms of ``text`` with repetition: words, identifier parts, no stop words."""
    out: list[str] = []
    for word in _WORD.findall(text):
        lower = word.lower()
        pieces = [lower]
        if "_" in word or _HUMP.search(word):
            pieces += [p for part in word.split("_") if part for p in split_identifier(part)]
        for piece in pieces:
            piece = piece.strip("_")
            if len(piece) < 2 or piece in STOPWORDS or piece.isdigit():
                continue
            out.append(_stem(piece))
    return out
