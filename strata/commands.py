"""The Strata command registry and what every command handler shares.

Each family module (``branches``, ``kv``, ``jsondocs``, ``vectors``,
``events``, ``graph``) registers its handlers here with :func:`handler` when
it is imported, and :class:`~memstrata.strata.engine.Engine` dispatches
through :data:`HANDLERS`.  The registry, the JSON text the engine writes, the
shapes of results (effects, pages, point reads) and the checks on branch and
space names live here rather than in ``engine`` so that the families and the
engine both depend on this module and never on each other: the engine
imports the families to have them register, and a family needs the engine
only as a type.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import sys
from collections.abc import Iterable
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable

from . import names
from .errors import StrataError, check_length
from .names import check_name
from .store import DEFAULT_SPACE

if TYPE_CHECKING:
    from .engine import Engine


# -- JSON text as the engine writes it ------------------------------------------------

_EXP = re.compile(r"e-0+(?=\d)")


_ENCODERS = {flag: json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=flag)
             for flag in (False, True)}


def _engine_float(r: str) -> str:
    """A float's ``repr`` with a negative exponent as the engine writes it: ``1e-7`` (not
    ``1e-07``), and positional from 1e-5 up (``0.000015``, where Python writes ``1.5e-05``):
    the engine goes scientific one decade later than Python does."""
    mantissa, _, exponent = r.partition("e-")
    if int(exponent) == 5:
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return _EXP.sub("e-", r)


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON, non-ASCII kept, floats as the engine prints them (``1e-7``, not ``1e-07``;
    ``0.000015``, not ``1.5e-05``: stored payloads are hashed in this form too; a non-finite
    one, such as a path length that overflowed, as ``null``, as serde_json writes it, never
    Python's ``Infinity``/``NaN``, which are no JSON)."""
    text = _ENCODERS[sort_keys].encode(value)
    if "e-0" not in text and "Infinity" not in text and "NaN" not in text:
        return text
    # Only Python's two-digit negative exponents differ; re-encode with those
    # floats swapped for markers so that strings are never touched.
    # A marker carries a per-call random tag, so no string value can pass for one.
    tag = secrets.token_hex(6)
    fixed: list[str] = []

    def mark(v: Any) -> Any:
        if type(v) is float:
            if not math.isfinite(v):
                return None
            r = repr(v)
            if "e-0" in r:
                fixed.append(_engine_float(r))
                return f"\x00{tag}{len(fixed) - 1}\x00"
            return v
        if isinstance(v, dict):
            return {k: mark(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mark(x) for x in v]
        return v

    text = _ENCODERS[sort_keys].encode(mark(value))
    if not fixed:
        return text
    # One pass over the text: a replace per marker is quadratic on large results
    # (10,000 PageRank scores took seconds).
    marker = re.compile(r'"\\u0000' + tag + r'(\d+)\\u0000"')
    return marker.sub(lambda m: fixed[int(m.group(1))], text)


def canonical(value: Any) -> str:
    """Stored form of a user JSON value: keys sorted, as the engine keeps them."""
    return dumps(value, sort_keys=True)


ENCODED_LIMIT = 16 << 20  # the engine's limit on one encoded JSON value (and on one stored row)


def check_encoded(code: str, what: str, text: str) -> str:
    """``text`` (a value's compact JSON), refused as ``code`` past the engine's 16 MiB."""
    verb = "exceed" if what.endswith("properties") else "exceeds"
    check_length(code, what, text, ENCODED_LIMIT, f"{verb} the maximum encoded size")
    return text


# -- result shapes ----------------------------------------------------------------------

EFFECT_CREATED = {"applied": True, "kind": "created", "matched": False, "affected_count": 1}
EFFECT_UPDATED = {"applied": True, "kind": "updated", "matched": True, "affected_count": 1}
EFFECT_DELETED = {"applied": True, "kind": "deleted", "matched": True, "affected_count": 1}
EFFECT_NOT_FOUND = {"applied": False, "kind": "not_found", "matched": False, "affected_count": 0}
EFFECT_UNCHANGED = {"applied": False, "kind": "unchanged", "matched": True, "affected_count": 0}


def effect(created: bool) -> dict:
    return dict(EFFECT_CREATED if created else EFFECT_UPDATED)


def page(items: list, has_more: bool, cursor: Any) -> dict:
    return {"items": items, "has_more": has_more, "cursor": cursor if has_more else None}


def found(kind: str, value: Any) -> dict:
    """A point read's envelope: ``{"found": false, "value": null}`` on a miss, never an error."""
    return {"type": kind, "data": {"found": value is not None, "value": value}}


def name_page(kind: str, entries: Iterable, limit: int | None) -> dict:
    """A page of names (the decoded keys of ``entries``); the cursor is the last name returned."""
    rows, has_more = take(entries, limit)
    names = [x.key.decode("utf-8") for x in rows]
    return {"type": kind, "data": page(names, has_more, names[-1] if has_more else None)}


def take(items: Iterable, limit: int | None) -> tuple[list, bool]:
    """The first ``limit`` items (all when None) and whether more follow, reading one extra at most."""
    if limit is None:
        return list(items), False
    if limit == 0:
        return [], False
    got = list(islice(items, min(limit, sys.maxsize - 1) + 1))
    return got[:limit], len(got) > limit


def batch_for(limit: int | None) -> int:
    """How many rows a paged read fetches per level at first."""
    return 256 if limit is None else max(1, min(limit + 1, 4096))


# -- branch and space names ------------------------------------------------------------


def check_branch_name(name: str) -> None:
    check_name(names.BRANCH, name)


def check_space(space: str | None) -> str:
    if space is None:
        return DEFAULT_SPACE
    check_name(names.SPACE, space)
    return space


# -- the registry -----------------------------------------------------------------------

Handler = Callable[["Engine", dict], dict]
HANDLERS: dict[str, Handler] = {}


def handler(wire: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[wire] = fn
        return fn
    return register
