"""Strata's itemwise batches and samples: the result shapes the batch commands share.

A batch answers ``{"mode": "itemwise", "status", "applied", "commit", "items"}``
where each item reports its own outcome: ``ok``, ``miss`` (a read that found
nothing) or ``error`` (an item the engine refused; the rest still commit, in
one commit whose receipt every applied item repeats).  The overall status is
``ok`` when every item is ``ok`` and they all applied or all did not,
``error`` when every item failed, ``partial`` otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import StrataError

if TYPE_CHECKING:
    from .engine import Engine

# How many items a ``*_sample`` returns when the command names no count.
SAMPLE_COUNT = 10


class Batch:
    def __init__(self, e: Engine):
        self.e = e
        self.items: list[dict] = []

    def add(self, result: Any, *, status: str = "ok", effect: dict | None = None) -> dict:
        item = {"index": len(self.items), "status": status, "applied": bool(effect and effect["applied"]),
                "effect": effect, "commit": None, "result": result, "error": None}
        self.items.append(item)
        return item

    def fail(self, exc: StrataError, result: Any) -> dict:
        item = self.add(result, status="error")
        item["error"] = self.e.error_status(exc)
        return item

    def envelope(self, kind: str, commit: dict | None = None) -> dict:
        items = self.items
        for item in items:
            if item["applied"]:
                item["commit"] = commit
        if not items:
            status = "ok"
        elif all(i["status"] == "error" for i in items):
            status = "error"
        elif all(i["status"] == "ok" for i in items) and len({i["applied"] for i in items}) == 1:
            status = "ok"
        else:
            status = "partial"
        applied = any(i["applied"] for i in items)
        return {"type": kind, "data": {"mode": "itemwise", "status": status, "applied": applied,
                                       "commit": commit if applied else None, "items": items}}


def check_unique(keys: list, code: str, message: str) -> None:
    if len(set(keys)) != len(keys):
        raise StrataError(code, message)


def sample(rows: list, count: int | None) -> list:
    """``count`` rows spread evenly over ``rows`` (all of them when there are no more)."""
    count = SAMPLE_COUNT if count is None else count
    n = len(rows)
    if count >= n:
        return list(rows)
    return [rows[i * n // count] for i in range(count)]


def sample_page(kind: str, rows: list, count: int | None, render) -> dict:
    return {"type": kind, "data": {"total_count": len(rows), "items": [render(r) for r in sample(rows, count)],
                                   "has_more": False, "cursor": None}}
