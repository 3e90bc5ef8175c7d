"""Run one tool-call script through MemStrata's Strata server and through the real engine, and compare.

A script is a list of steps ``(tool, arguments)`` or ``(tool, arguments,
{"name": "path.to.value"})``: the third item saves a value from that step's
answer, and a later argument written ``"$name"`` is replaced, on each side,
by that side's own saved value (so a receipt's timestamp can feed ``as_of``
without assuming both clocks agree).

Answers are compared after normalising what legitimately differs:
commit-clock values are renamed in order of first appearance on each side
(equal values stay equal, so "read as_of the fork point" still has to
answer the same commit), wall-clock times, hashes that cover them and
reference ids are checked for shape and masked; similarity scores are
compared exactly (the server computes them in the engine's precision and order).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any


CLOCK_KEYS = {"version", "timestamp", "created_at", "deleted_at", "fork_version", "fork_timestamp",
              "created_version", "created_timestamp", "updated_version", "updated_timestamp"}
WALL_KEYS = {"committed_at"}
REFERENCE = re.compile(r"^err_local_[0-9a-f]{8}_\d{6}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Side:
    """Per-side renaming state, so that equalities survive masking."""

    clock: dict[int, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    saved: dict[str, Any] = field(default_factory=dict)

    def clock_name(self, v: Any) -> Any:
        if type(v) is not int:
            return v
        return self.clock.setdefault(v, f"<clock {len(self.clock)}>")

    def hash_name(self, v: str) -> str:
        if v == "0" * 64:
            return "<genesis>"
        assert HEX64.match(v), v
        return self.hashes.setdefault(v, f"<hash {len(self.hashes)}>")


def normalise(value: Any, side: Side, parent: str | None = None, in_event: bool = False) -> Any:
    if isinstance(value, dict):
        out = {}
        event = parent == "event"
        for k, v in value.items():
            if k in WALL_KEYS or (event and k == "timestamp"):
                assert type(v) is int and v > 1_600_000_000_000_000, (k, v)
                out[k] = "<wall clock>"
            elif k == "reference_id":
                assert REFERENCE.match(v), v
                out[k] = "<reference>"
            elif k in ("hash", "previous_hash") and isinstance(v, str):
                out[k] = side.hash_name(v)
            elif k == "cleanup" and isinstance(v, dict):
                # Storage accounting of each engine's own layout (the native
                # one even differs between its cache and durable modes).
                assert set(v) == {"removed_refs", "releasable_tables", "protected_tables"}, v
                out[k] = "<storage accounting>"
            elif k == "memory_budget" and isinstance(v, dict):
                # The host's free memory, read by each side at its own moment.
                assert set(v) == {"total_bytes", "source", "usable_host_bytes"}, v
                out[k] = {"source": v["source"]}
            elif k == "capabilities" and isinstance(v, dict):
                # Arrow and inference are families this server does not run
                # (docs/strata.md); it says so where the engine says true.
                out[k] = {c: f for c, f in v.items() if c not in ("arrow", "inference")}
            elif k in CLOCK_KEYS and (not event or k != "timestamp"):
                out[k] = side.clock_name(v)
            else:
                out[k] = normalise(v, side, k)
        return out
    if isinstance(value, list):
        return [normalise(v, side, parent) for v in value]
    return value


def parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def resolve(args: Any, side: Side) -> Any:
    if isinstance(args, str) and args.startswith("$") and args[1:] in side.saved:
        return side.saved[args[1:]]
    if isinstance(args, dict):
        return {k: resolve(v, side) for k, v in args.items()}
    if isinstance(args, list):
        return [resolve(v, side) for v in args]
    return args


def pick(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


# Per-node float maps of the graph analytics: equal keys (in the same order)
# and values within 1e-6, since summation order may differ between engines
# (null, where a distance overflowed, only matches null).
APPROX_MAPS = {"ranks", "coefficients", "distances"}


def same(a: Any, b: Any, key: str | None = None) -> bool:
    if key in APPROX_MAPS and isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(
            a[k] is b[k] is None
            or type(a[k]) is type(b[k]) is float and math.isclose(a[k], b[k], rel_tol=0, abs_tol=1e-6) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return set(a) == set(b) and all(same(a[k], b[k], k) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y, key) for x, y in zip(a, b))
    return a == b


def run_script(script: list, ours, oracle) -> list[str]:
    """Differences, one readable paragraph per step that differs (empty: none)."""
    mine, real = Side(), Side()
    problems = []
    for index, step in enumerate(script):
        tool, args = step[0], step[1]
        save = step[2] if len(step) > 2 else {}
        got_text, got_error = ours.call_tool(tool, resolve(args, mine))
        want_text, want_error = oracle.call_tool(tool, resolve(args, real))
        got, want = parse(got_text), parse(want_text)
        for name, path in save.items():
            if not got_error:
                mine.saved[name] = pick(got, path)
            if not want_error:
                real.saved[name] = pick(want, path)
        got_n, want_n = normalise(got, mine), normalise(want, real)
        if got_error != want_error or not same(got_n, want_n):
            problems.append(f"step {index}: {tool} {json.dumps(args)[:300]}\n"
                            f"  memstrata (isError={got_error}): {json.dumps(got_n)[:1500]}\n"
                            f"  stratadb  (isError={want_error}): {json.dumps(want_n)[:1500]}")
    return problems


def in_memory_differences(script: list, server_class=None) -> list[str]:
    """``script`` run on a fresh in-memory database (through ``server_class``,
    StrataServer by default: a subclass skews answers for the self-checks)
    and on a fresh real engine; the differences, as run_script gives them."""
    from memstrata.strata.engine import Engine
    from memstrata.strata.mcp import StrataServer
    from memstrata.strata.store import StrataStore

    from .oracle import OracleSession

    store, oracle = StrataStore.memory(), OracleSession()
    try:
        return run_script(script, (server_class or StrataServer)(Engine(store)), oracle)
    finally:
        store.close()
        oracle.close()


def differing(problems: list[str]) -> str:
    """The assertion message for a script that differs from the engine."""
    return f"{len(problems)} step(s) differ from stratadb:\n" + "\n".join(problems[:10])
