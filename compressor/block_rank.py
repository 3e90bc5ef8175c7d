"""How strongly a question points at each unit of one block.

Two signals, both local to the block (nothing from other files is needed):

* **named**: the question writes a unit's name as code (``parse_args``,
  ``Context.invoke``, ``HTTPServer``, ```render` ``, ``invoke()``), or as a
  plain word of four letters or more that is exactly the unit's name;
* **rank**: Okapi BM25 of the question's words over the units of the block
  (identifier-aware, lightly stemmed, stop words and commit-message verbs
  dropped), plus a bonus when a word is part of the unit's own name.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from functools import lru_cache

from .outline import Outline
from .terms import STOPWORDS, terms_of

K1 = 1.2
B = 0.75
NAME_BONUS = 1.5
PROPAGATION = 0.5
CODE_USE_BONUS = 2.0
MIN_PLAIN_NAME = 4
# Words that say what a change does, not what it is about.
_ACTION_WORDS = frozenset(
    """fix fixes fixed fixing add adds added adding bump bumped update updates updated change changes changed
    make makes made use uses used using allow allows allowed support supports supported improve improves
    improved remove removes removed refactor refactored cleanup clean tweak tweaks minor issue issues bug bugs
    pr prs merge merged revert reverted instead properly correctly correct now new old also again still
    should would could can't cannot doesn't don't won't work works working wrong right ensure ensures
    please help thanks thank question questions answer explain look see show tell want need like
    code file files function functions method methods class classes line lines""".split())
_CODE_IDENT = re.compile(r"`([^`\n]{1,120})`|\b([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+)\b|\b([A-Za-z_$][\w$]*)\s*\(")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
_DOTTED = re.compile(r"\b[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+\b")
_HUMP = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_TESTS = re.compile(r"\b(tests?|tested|testing|specs?|pytest|unittest|fixtures?)\b", re.I)


@dataclass
class Asked:
    """A question prepared for matching against blocks."""

    terms: Counter
    code_names: frozenset[str]     # identifiers written as code
    words: frozenset[str]          # every identifier-like word as written
    about_tests: bool
    # qualname -> the project ranking's chance that the definition, in the block being cut, is
    # what the question needs (:func:`.chances.symbol_chances`); empty when no project is at hand.
    chances: Mapping[str, float] = field(default_factory=dict)


@lru_cache(maxsize=4096)
def prepare(question: str) -> Asked:
    """The question's terms and names (cached: agents ask the same question every turn; do not mutate)."""
    code: set[str] = set()
    for m in _CODE_IDENT.finditer(question):
        quoted, dotted, called = m.groups()
        if dotted:
            # ``Context.forward`` names the method; ``Context`` only frames it.
            code.add(dotted)
            code.add(dotted.rsplit(".", 1)[1])
        else:
            for part in _WORD.findall(quoted or called):
                code.add(part)
            if quoted and "." in quoted:
                code.add(quoted.strip("() "))
    words = set(_WORD.findall(_DOTTED.sub(" ", question)))
    for w in words:
        if "_" in w.strip("_") or _HUMP.search(w):
            code.add(w)
    # An action word written as code (``methods``, `line`) is an identifier, not a verb.
    code_terms = {t for c in code for t in terms_of(c)}
    terms = Counter(t for t in terms_of(question) if t not in _ACTION_WORDS or t in code_terms)
    return Asked(terms, frozenset(code), frozenset(words), bool(_TESTS.search(question)))


def relevant_part(outline: Outline, asked: Asked) -> tuple:
    """What of ``asked`` can change how ``outline`` is cut: its terms, and only the names that occur
    in the block -- of the words written plainly, only those :func:`named_units` could take for a
    unit's name (a path or a verb the conversation mentions later then leaves the cut alone).
    Two questions with the same relevant part get the same cut."""
    seen = getattr(outline, "_relevance", None)
    if seen is None:
        vocabulary = frozenset().union(*(u.idents for u in outline.units),
                                       *({u.name, u.qualname} for u in outline.units))
        plain = frozenset(u.name for u in outline.units if _plain_name(u))
        seen = outline._relevance = (vocabulary, plain)
    vocabulary, plain = seen
    chances = tuple(round(c, 3) for c in unit_chances(outline, asked)) if asked.chances else ()
    return (tuple(sorted(asked.terms.items())), asked.code_names & vocabulary, asked.words & plain,
            asked.about_tests, chances)


def unit_chances(outline: Outline, asked: Asked) -> list[float]:
    """The project ranking's chance for each unit of the block (0 where it has none)."""
    chances = asked.chances
    if not chances:
        return [0.0] * len(outline.units)
    return [chances.get(u.qualname, 0.0) if u.kind != "stmt" and u.qualname else 0.0 for u in outline.units]


def _plain_name(u) -> bool:
    """Whether a plain word (not written as code) equal to ``u``'s name names it."""
    return (u.kind != "stmt" and bool(u.name) and len(u.name) >= MIN_PLAIN_NAME
            and u.name.lower() not in STOPWORDS and u.name.lower() not in _ACTION_WORDS)


def named_units(outline: Outline, asked: Asked) -> dict[int, bool]:
    """Units the question names -> True when written as code, False when as a plain word."""
    out: dict[int, bool] = {}
    for i, u in enumerate(outline.units):
        if u.kind == "stmt" or not u.name:
            continue
        if u.qualname in asked.code_names or u.name in asked.code_names or (u.name in asked.words
                                                                            and _in_capitals(u.name)):
            out[i] = True
        elif u.name in asked.words and _plain_name(u):
            out[i] = False
    return out


def _in_capitals(name: str) -> bool:
    """A name of capitals (``EMA``, ``URL``, ``LRU2``): a request that writes it exactly so, even
    as a plain word ("the EMA class"), writes the name as the code does.  Too short for a plain
    word's rule, and no English word is spelled so."""
    return len(name) >= 2 and name.isupper() and name.isalnum()


def unit_scores(outline: Outline, asked: Asked, path: str = "") -> list[float]:
    """BM25 of the question over the block's units, plus the own-name bonus.

    Words of the block's own path are left out: "table" in a question about
    ``table.py`` matches every unit of it and tells nothing apart.
    """
    units = outline.units
    own_path = set(terms_of(path.replace("/", " ").replace(".", " "))) if path else set()
    terms = [t for t in asked.terms if t not in own_path]
    if not terms or not units:
        return [0.0] * len(units)
    docs, lengths = _unit_terms(outline)
    avg = (sum(lengths) / len(lengths)) or 1.0
    n = len(units)
    df = Counter()
    for d in docs:
        df.update(t for t in terms if t in d)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    scores = []
    for u, d, length in zip(units, docs, lengths):
        s = 0.0
        for t in terms:
            tf = d.get(t, 0)
            if tf:
                s += idf[t] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))
        if u.name:
            own = set(_word_terms(u.name))
            s += NAME_BONUS * sum(idf[t] for t in terms if t in own)
        scores.append(s)
    # Code the question writes (``methods``, ``prompt``) that a unit uses: the unit works with it.
    used = [c for c in asked.code_names if "." not in c]
    if used:
        for c in used:
            users = [i for i, u in enumerate(units) if c in u.idents and u.name != c]
            if users:
                weight = CODE_USE_BONUS * math.log(1 + (n - len(users) + 0.5) / (len(users) + 0.5))
                for i in users:
                    scores[i] += weight
    return scores


def propagate(outline: Outline, scores: list[float], named: set[int], share: float = PROPAGATION) -> list[float]:
    """Let a unit borrow ``share`` of its best neighbour's score, neighbours being the units
    of this block it uses by name or that use it: the helper a relevant function calls, the
    caller of a relevant helper.  Named units lend the best score there is."""
    units = outline.units
    top = max(scores, default=0.0)
    lend = [top if i in named else sc for i, sc in enumerate(scores)]
    by_name: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        if u.name and u.kind != "stmt":
            by_name.setdefault(u.name, []).append(i)
    best = [0.0] * len(units)
    for i, u in enumerate(units):
        for name in u.idents:
            for j in by_name.get(name, ()):
                if j != i and units[j].parent != i and units[i].parent != j:
                    best[i] = max(best[i], lend[j])
                    best[j] = max(best[j], lend[i])
    return [sc + share * b for sc, b in zip(scores, best)]


def _unit_terms(outline: Outline) -> tuple[list[Counter], list[int]]:
    """Term counts per unit, computed once per outline (outlines are cached by content)."""
    cached = getattr(outline, "_terms", None)
    if cached is None:
        docs = []
        for u in outline.units:
            docs.append(Counter(t for word in _WORD.findall(u.text) for t in _word_terms(word)))
        cached = (docs, [sum(d.values()) for d in docs])
        outline._terms = cached
    return cached


@lru_cache(maxsize=65536)
def _word_terms(word: str) -> tuple[str, ...]:
    return tuple(terms_of(word))


def looks_like_test(name: str) -> bool:
    return name.startswith(("test_", "Test")) or name in ("setUp", "tearDown")
