"""Strata event logs: immutable, densely numbered per branch and space, hash-chained.

Each event's hash is SHA-256 over
``u64le(sequence) | u32le(len(type)) | type | u64le(timestamp_us) | u32le(len(P)) | P | previous_hash``
where P is the payload as compact JSON with sorted keys; the first event's
previous hash is 32 zero bytes.  ``event_verify_chain`` recomputes it.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import TYPE_CHECKING

from .store import Event, View

from .batch import Batch
from .commands import EFFECT_CREATED, batch_for, canonical, check_encoded, found, handler, page, take
from . import names
from .errors import StrataError
from .names import check_name

if TYPE_CHECKING:
    from .engine import Engine

GENESIS = bytes(32)
# An append writes the event, its type index entry and the log's metadata.
APPEND_PUTS = 3


def event_hash(sequence: int, event_type: str, timestamp: int, payload: str, previous: bytes) -> bytes:
    t = event_type.encode("utf-8")
    p = payload.encode("utf-8")
    return hashlib.sha256(struct.pack("<Q", sequence) + struct.pack("<I", len(t)) + t
                          + struct.pack("<Q", timestamp) + struct.pack("<I", len(p)) + p + previous).digest()


def record(ev: Event) -> dict:
    return {"event": {"sequence": ev.sequence, "event_type": ev.event_type, "payload": json.loads(ev.payload),
                      "timestamp": ev.timestamp, "previous_hash": ev.previous_hash.hex(), "hash": ev.hash.hex()},
            "version": ev.version, "timestamp": ev.version}


@handler("event_append")
def event_append(e: Engine, a: dict) -> dict:
    b, space = e.scope(a, lambda: _check_event(a["event_type"], a["payload"]))
    payload = canonical(a["payload"])
    view = e.store.view(b)
    last = e.store.last_event(view, space)
    sequence = 0 if last is None else last.sequence + 1
    previous = GENESIS if last is None else last.hash
    # An event is stamped before the commit that carries it, as the engine's are: a time
    # range starting at an append's own receipt (its committed_at) does not hold that event.
    with e.store.commit(b, instants=1) as tx:
        tx.register_space(view, space)
        at = tx.committed_at - 1
        digest = event_hash(sequence, a["event_type"], at, payload, previous)
        tx.append_event(space, Event(sequence, tx.version, a["event_type"], payload, at, previous, digest))
    return {"type": "event_append_result", "data": {
        "sequence": sequence, "event_type": a["event_type"], "effect": dict(EFFECT_CREATED),
        "commit": e.receipt(tx, APPEND_PUTS)}}


@handler("event_list")
def event_list(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    if a.get("event_type") is not None:
        check_event_type(a["event_type"])
    after = a.get("cursor")
    if after is None:
        after = a.get("after_sequence")
    limit = a.get("limit")
    events = e.store.events(view, space, -1 if after is None else after, a.get("event_type"), batch=batch_for(limit))
    rows, has_more = take(events, limit)
    return {"type": "event_records",
            "data": page([record(ev) for ev in rows], has_more, rows[-1].sequence if has_more else None)}


@handler("event_get")
def event_get(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    ev = e.store.event(e.read_view(b, a), space, a["sequence"])
    return found("event_record", ev and record(ev))


@handler("event_count")
def event_count(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    last = e.store.last_event(e.read_view(b, a), space)
    return {"type": "event_count", "data": {"count": 0 if last is None else last.sequence + 1}}


def verify(events) -> dict:
    previous, expected, length = GENESIS, 0, 0
    for ev in events:
        problem = None
        if ev.sequence != expected:
            problem = f"sequence gap: expected {expected}, found {ev.sequence}"
        elif ev.previous_hash != previous:
            problem = f"event {ev.sequence} does not link to the previous event's hash"
        elif event_hash(ev.sequence, ev.event_type, ev.timestamp, ev.payload, ev.previous_hash) != ev.hash:
            problem = f"event {ev.sequence} hash does not match its contents"
        if problem:
            return {"valid": False, "length": length, "first_invalid": ev.sequence, "error": problem}
        previous, expected, length = ev.hash, expected + 1, length + 1
    return {"valid": True, "length": length, "first_invalid": None, "error": None}


@handler("event_verify_chain")
def event_verify_chain(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view: View = e.store.view(b)
    return {"type": "event_chain_verification", "data": verify(e.store.events(view, space, batch=4096))}


# -- batches, ranges and types -----------------------------------------------------------------


def check_event_type(event_type: str) -> None:
    check_name(names.EVENT_TYPE, event_type)


def _check_event(event_type: str, payload) -> None:
    check_event_type(event_type)
    if not isinstance(payload, dict):
        raise StrataError("invalid_argument.engine.event_payload", "event payload must be a JSON object")
    check_encoded("invalid_argument.engine.event_payload_too_large", "event payload", canonical(payload))


@handler("event_batch_append")
def event_batch_append(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    batch = Batch(e)
    good = []
    for x in a["entries"]:
        try:
            _check_event(x["event_type"], x["payload"])
        except StrataError as exc:
            batch.fail(exc, {"sequence": None, "event_type": None})
            continue
        good.append((batch.add(None, effect=dict(EFFECT_CREATED)), x))
    if not good:
        return batch.envelope("event_batch_append_results")
    view = e.store.view(b)
    last = e.store.last_event(view, space)
    sequence = 0 if last is None else last.sequence + 1
    previous = GENESIS if last is None else last.hash
    # Each event of the batch gets its own instant, strictly increasing, after the previous
    # commit and before this one's (as event_append's), so time ranges order them.
    with e.store.commit(b, instants=len(good)) as tx:
        tx.register_space(view, space)
        first = tx.committed_at - len(good)
        for i, (item, x) in enumerate(good):
            payload = canonical(x["payload"])
            at = first + i
            digest = event_hash(sequence, x["event_type"], at, payload, previous)
            tx.append_event(space, Event(sequence, tx.version, x["event_type"], payload, at, previous, digest))
            item["result"] = {"sequence": sequence, "event_type": x["event_type"]}
            sequence, previous = sequence + 1, digest
    return batch.envelope("event_batch_append_results", e.receipt(tx, 2 * len(good) + 1))


@handler("event_exists")
def event_exists(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    return {"type": "bool", "data": e.store.event(e.store.view(b), space, a["sequence"]) is not None}


def _range(e: Engine, a: dict, inside) -> dict:
    b, space = e.scope(a)
    event_type = a.get("event_type")
    if event_type == "":
        raise StrataError("invalid_argument.engine.event_type", "event type must not be empty")
    events = [ev for ev in e.store.events(e.store.view(b), space, -1, event_type, batch=4096) if inside(ev)]
    if a["direction"] == "reverse":
        events.reverse()
    rows, has_more = take(events, a.get("limit"))
    return {"type": "event_range_result",
            "data": page([record(ev) for ev in rows], has_more, rows[-1].sequence if has_more else None)}


@handler("event_range")
def event_range(e: Engine, a: dict) -> dict:
    start, end = a["start_seq"], a.get("end_seq")
    return _range(e, a, lambda ev: ev.sequence >= start and (end is None or ev.sequence < end))


@handler("event_range_by_time")
def event_range_by_time(e: Engine, a: dict) -> dict:
    start, end = a["start_ts"], a.get("end_ts")
    return _range(e, a, lambda ev: ev.timestamp >= start and (end is None or ev.timestamp < end))


@handler("event_list_types")
def event_list_types(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    types = sorted({ev.event_type for ev in e.store.events(e.read_view(b, a), space, batch=4096)})
    return {"type": "event_type_list", "data": page(types, False, None)}
