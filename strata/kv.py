"""Strata KV commands: byte keys and values (base64 on the wire), versioned."""

from __future__ import annotations

import binascii
import sys
from itertools import islice
from typing import TYPE_CHECKING

from .store import KV, prefix_end

from .batch import Batch, check_unique, sample_page
from .commands import EFFECT_DELETED, EFFECT_NOT_FOUND, batch_for, effect, found, handler, page, take
from .errors import StrataError

if TYPE_CHECKING:
    from .engine import Engine

# The engine refuses a key whose storage encoding exceeds 64 KiB: the key
# bytes (NULs count twice) plus the space name plus a fixed 36-byte frame.
KEY_LIMIT = 65536
KEY_FRAME = 36
# And a row (the encoded key, the value and a fixed 30-byte frame) past 16 MiB.
ROW_LIMIT = 16 << 20
ROW_FRAME = 30


def b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def check_key(key: bytes) -> None:
    if not key:
        raise StrataError("invalid_argument.engine.kv_key", "KV key must not be empty")


def _key_size(key: bytes, space: str) -> int:
    return KEY_FRAME + len(space.encode("utf-8")) + len(key) + key.count(0)


def check_key_size(key: bytes, space: str) -> None:
    size = _key_size(key, space)
    if size > KEY_LIMIT:
        raise _too_large("key", "a committed key exceeds the maximum encodable size", size, KEY_LIMIT)


def check_row_size(key: bytes, space: str, value: bytes) -> None:
    size = _key_size(key, space) + len(value) + ROW_FRAME
    if size > ROW_LIMIT:
        raise _too_large("row", "a single committed row exceeds the maximum encodable size", size, ROW_LIMIT)


def _too_large(part: str, reason: str, size: int, limit: int) -> StrataError:
    return StrataError(
        "invalid_argument.engine.persistence",
        f"persistence request was invalid: the {part} is too large to encode ({size} bytes; the limit is {limit})",
        [("field", part), ("reason", reason), ("actual_bytes", str(size)), ("limit_bytes", str(limit))])


def _live(e: Engine, view, space: str, key: bytes):
    return e.store.live(view, space, KV, key)


@handler("kv_put")
def kv_put(e: Engine, a: dict) -> dict:
    key = a["key"]
    check_key(key)
    b, space = e.scope(a)
    check_key_size(key, space)
    check_row_size(key, space, a["value"])
    view = e.store.view(b)
    created = _live(e, view, space, key) is None
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
        tx.put(space, KV, key, a["value"])
    return {"type": "write_result",
            "data": {"key": b64(key), "effect": effect(created), "commit": e.receipt(tx, 1)}}


@handler("kv_get")
def kv_get(e: Engine, a: dict) -> dict:
    check_key(a["key"])
    b, space = e.scope(a)
    entry = _live(e, e.read_view(b, a), space, a["key"])
    return found("kv_versioned_value", entry and {
        "value": b64(entry.value), "version": entry.version, "timestamp": entry.version})


@handler("kv_delete")
def kv_delete(e: Engine, a: dict) -> dict:
    key = a["key"]
    check_key(key)
    b, space = e.scope(a)
    view = e.store.view(b)
    if _live(e, view, space, key) is None:
        return {"type": "delete_result", "data": {"key": b64(key), "effect": dict(EFFECT_NOT_FOUND)}}
    with e.store.commit(b) as tx:
        tx.delete(space, KV, key)
    return {"type": "delete_result",
            "data": {"key": b64(key), "effect": dict(EFFECT_DELETED), "commit": e.receipt(tx, 0, 1)}}


@handler("kv_exists")
def kv_exists(e: Engine, a: dict) -> dict:
    check_key(a["key"])
    b, space = e.scope(a)
    return {"type": "bool", "data": _live(e, e.store.view(b), space, a["key"]) is not None}


@handler("kv_history")
def kv_history(e: Engine, a: dict) -> dict:
    check_key(a["key"])
    b, space = e.scope(a)
    rows = e.store.history(e.store.view(b), space, KV, a["key"])
    if not rows:
        return {"type": "version_history", "data": None}
    items = []
    for entry in rows:
        commit = e.store.commit_of(entry.version)
        items.append({"value": None if entry.value is None else b64(entry.value),
                      "tombstone": entry.value is None, "version": entry.version,
                      "timestamp": entry.version, "committed_at": commit.committed_at if commit else None})
    return {"type": "version_history", "data": {"items": items}}


def _prefix(a: dict) -> bytes:
    prefix = a.get("prefix")
    if prefix is None:
        return b""
    check_key(prefix)  # the engine treats an empty prefix as an empty key
    return prefix


@handler("kv_list")
def kv_list(e: Engine, a: dict) -> dict:
    # The prefix and the cursor come before an as_of conflict and the scope, as the engine checks them.
    prefix = _prefix(a)
    cursor = a.get("cursor")
    if cursor is not None:
        check_key(cursor)  # a cursor is a key, held to the same rules
    b, space = e.scope(a)
    view = e.read_view(b, a)
    limit = a.get("limit")
    if cursor is not None and cursor >= prefix:
        start, after = cursor, True
    else:
        start, after = prefix, False
    entries = e.store.scan(view, space, KV, start, prefix_end(prefix) if prefix else None, after=after,
                           batch=batch_for(limit))
    rows, has_more = take(entries, limit)
    keys = [x.key for x in rows]
    return {"type": "keys_page", "data": page([b64(k) for k in keys], has_more, b64(keys[-1]) if has_more else None)}


@handler("kv_count")
def kv_count(e: Engine, a: dict) -> dict:
    prefix = _prefix(a)
    b, space = e.scope(a)
    view = e.read_view(b, a)
    return {"type": "uint", "data": e.store.count(view, space, KV, prefix, prefix_end(prefix) if prefix else None)}


@handler("kv_scan")
def kv_scan(e: Engine, a: dict) -> dict:
    # What names the rows it lists comes before the scope, as the engine checks it.
    if a.get("start") is not None:
        check_key(a["start"])
    b, space = e.scope(a)
    start = a.get("start") or b""
    limit = a.get("limit")
    entries = e.store.scan(e.store.view(b), space, KV, start, batch=batch_for(limit))
    if limit is None:
        rows, has_more, cursor = list(entries), False, None
    else:
        # The scan cursor names the next key to read (inclusive), unlike
        # kv_list's; even a zero limit reports it.
        rows = list(islice(entries, min(limit, sys.maxsize - 1) + 1))
        has_more = len(rows) > limit
        cursor = b64(rows[limit].key) if has_more else None
        rows = rows[:limit]
    items = [{"key": b64(x.key), "value": b64(x.value), "version": x.version, "timestamp": x.version}
             for x in rows]
    return {"type": "kv_scan_result", "data": page(items, has_more, cursor)}


# -- batches and samples ------------------------------------------------------------------


def _batch_scope(e: Engine, a: dict, keys: list[bytes]):
    b, space = e.scope(a)
    # An empty key is refused as an item of its own, never as a duplicate (as the engine does).
    check_unique([k for k in keys if k], "invalid_argument.executor.kv_batch_duplicate_key",
                 "KV batch contains duplicate keys")
    return b, space


@handler("kv_batch_put")
def kv_batch_put(e: Engine, a: dict) -> dict:
    entries = a["entries"]
    keys = [x["key"] for x in entries]
    b, space = _batch_scope(e, a, keys)
    # An oversized key refuses the whole batch, before any item is judged.
    frame = KEY_FRAME + len(space.encode("utf-8"))
    for key in keys:
        if frame + len(key) + key.count(0) > KEY_LIMIT:
            check_key_size(key, space)
    view = e.store.view(b)
    batch = Batch(e)
    # Batches are where per-key lookups add up: one query answers which keys exist.
    live = e.store.live_keys(view, space, KV, [k for k in keys if k])
    writes = []
    for x, key in zip(entries, keys):
        if not key:
            try:
                check_key(key)
            except StrataError as exc:
                batch.fail(exc, {"key": ""})
            continue
        batch.add({"key": b64(key)}, effect=effect(key not in live))
        writes.append((key, x["value"]))
    if not writes:
        return batch.envelope("batch_results")
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
        tx.put_many(space, KV, writes)
    return batch.envelope("batch_results", e.receipt(tx, len(writes)))


@handler("kv_batch_delete")
def kv_batch_delete(e: Engine, a: dict) -> dict:
    keys = a["keys"]
    b, space = _batch_scope(e, a, keys)
    view = e.store.view(b)
    batch = Batch(e)
    gone = []
    for key in keys:
        try:
            check_key(key)
        except StrataError as exc:
            batch.fail(exc, {"key": b64(key)})
            continue
        live = _live(e, view, space, key) is not None
        batch.add({"key": b64(key)}, effect=dict(EFFECT_DELETED if live else EFFECT_NOT_FOUND))
        if live:
            gone.append(key)
    if not gone:
        return batch.envelope("batch_results")
    with e.store.commit(b) as tx:
        for key in gone:
            tx.delete(space, KV, key)
    return batch.envelope("batch_results", e.receipt(tx, 0, len(gone)))


@handler("kv_batch_get")
def kv_batch_get(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    batch = Batch(e)
    for key in a["keys"]:
        miss = {"key": b64(key), "found": False, "value": None, "version": None, "timestamp": None}
        try:
            check_key(key)
        except StrataError as exc:
            batch.fail(exc, miss)
            continue
        entry = _live(e, view, space, key)
        if entry is None:
            batch.add(miss, status="miss")
        else:
            batch.add({"key": b64(key), "found": True, "value": b64(entry.value), "version": entry.version,
                       "timestamp": entry.version})
    return batch.envelope("batch_get_results")


@handler("kv_batch_exists")
def kv_batch_exists(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    batch = Batch(e)
    for key in a["keys"]:
        try:
            check_key(key)
        except StrataError as exc:
            batch.fail(exc, {"key": b64(key), "exists": False})
            continue
        batch.add({"key": b64(key), "exists": _live(e, view, space, key) is not None})
    return batch.envelope("batch_exists_results")


@handler("kv_sample")
def kv_sample(e: Engine, a: dict) -> dict:
    prefix = _prefix(a)
    b, space = e.scope(a)
    rows = list(e.store.scan(e.store.view(b), space, KV, prefix, prefix_end(prefix) if prefix else None,
                             batch=4096))
    return sample_page("sample_result", rows, a.get("count"), lambda x: {
        "key": b64(x.key), "value": b64(x.value), "version": x.version, "timestamp": x.version})
