"""Strata JSON documents: path reads and writes, one ``document_version`` per revision.

Paths are the engine's subset of JSONPath: ``$`` (also ``""`` and ``$.``) is
the whole document; then ``.name`` (letters, digits, ``_``, ``-``; the dot may
be left out after ``$`` and after a bracket), ``['any key']`` or ``["any key"]``
(a backslash escapes the quote and itself), and ``[N]`` array indexes (``+N``
too; a dot may come before a bracket).  A path that does not start with ``$``
is read as if ``$.`` preceded it.  Recursive descent, wildcards and negative
indexes are refused.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import islice
from typing import TYPE_CHECKING, Any

from .store import JSON, JSON_INDEX, prefix_end

from .batch import Batch, check_unique, sample_page
from .commands import batch_for
from .commands import EFFECT_DELETED, EFFECT_NOT_FOUND, canonical, check_encoded, effect, found, handler, name_page
from . import names
from .errors import StrataError
from .names import check_name
from .path_letters import is_key_char

if TYPE_CHECKING:
    from .engine import Engine

U64_MAX = 2**64 - 1
_INDEX = re.compile(r"\+?[0-9]+")
_MISSING = object()


def _path_error(message: str) -> StrataError:
    return StrataError("invalid_argument.engine.json_path", message)


# `$.a.b_c`: ASCII names joined by dots, read at once (nearly every path a command carries;
# any other spelling goes through the engine's whole grammar below).
_PLAIN_PATH = re.compile(r"\$\.[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def parse_path(path: str) -> list[str | int]:
    if path in ("", "$", "$."):
        return []
    if not path.startswith("$"):
        path = "$." + path
    if _PLAIN_PATH.fullmatch(path):
        return path[2:].split(".")
    if path.startswith("$.."):
        raise _path_error("recursive descent is not supported in JSON path")
    segments: list[str | int] = []
    # One dot may follow the `$`, and a dot may come before a bracket: `$.[0]`, `$.a.['b']`.
    i, n = (2 if path[1:2] == "." else 1), len(path)
    while i < n:
        ch = path[i]
        if ch == "[":
            segment, i = _bracket_at(path, i)
            segments.append(segment)
            continue
        if ch == ".":
            i += 1
            if i < n and path[i] == "[":
                continue
            if i >= n or path[i] == ".":
                raise _path_error("empty key in JSON path")
        # A bare key: after the `$`, a dot or a closing bracket.
        name = _name_at(path, i)
        if not name:
            raise _unsupported_character()
        segments.append(name)
        i += len(name)
    return segments


def _bracket_at(path: str, i: int) -> tuple[str | int, int]:
    """The segment in the brackets opening at ``i``, and the position after them."""
    if path[i + 1:i + 2] in ("'", '"'):
        key, end = _quoted_at(path, i + 1)
        if path[end:end + 1] != "]":
            raise _path_error("unclosed bracket in JSON path")
        if not key:
            raise _path_error("empty key in JSON path")
        return key, end + 1
    close = path.find("]", i)
    if close < 0:
        raise _path_error("unclosed bracket in JSON path")
    inner = path[i + 1:close]
    if not inner:
        raise _path_error("empty array index in JSON path")
    # An index reads as an unsigned integer does in the engine: one optional `+`, then digits.
    if not _INDEX.fullmatch(inner) or int(inner) > U64_MAX:
        raise _path_error("invalid array index in JSON path")
    return int(inner), close + 1


def _quoted_at(path: str, q: int) -> tuple[str, int]:
    """The key quoted from ``q``, and the position after its closing quote.

    A backslash escapes the quote and itself; before any other character it is kept as written.
    """
    quote, out, i = path[q], [], q + 1
    while i < len(path):
        ch = path[i]
        if ch == "\\" and path[i + 1:i + 2] in (quote, "\\"):
            out.append(path[i + 1])
            i += 2
        elif ch == quote:
            return "".join(out), i + 1
        else:
            out.append(ch)
            i += 1
    raise _path_error("unclosed quoted key in JSON path")


def _name_at(path: str, i: int) -> str:
    end = i
    while end < len(path) and is_key_char(path[end]):
        end += 1
    return path[i:end]


def _unsupported_character() -> StrataError:
    return _path_error(
        'unsupported character in JSON path; use bracket notation (e.g. ["my.key"]) to address keys '
        "with dots, spaces, or other characters outside [A-Za-z0-9_-]")


def _type_error(expected: str) -> StrataError:
    return StrataError("invalid_argument.engine.json_path_type", f"JSON path expected {expected}")


def _not_found() -> StrataError:
    return StrataError("invalid_argument.engine.json_path_not_found", "JSON path not found")


def get_at(doc: Any, segments: list[str | int]) -> Any:
    node = doc
    for seg in segments:
        if isinstance(seg, str) and isinstance(node, dict) and seg in node:
            node = node[seg]
        elif isinstance(seg, int) and isinstance(node, list) and seg < len(node):
            node = node[seg]
        else:
            return _MISSING
    return node


def set_at(doc: Any, segments: list[str | int], value: Any) -> Any:
    """``doc`` with ``value`` at the path (``doc`` is _MISSING for a new document).

    A missing key, or a null where an object is needed, becomes an object on
    the way down; arrays are never created or extended.
    """
    if not segments:
        return value
    seg, rest = segments[0], segments[1:]
    if isinstance(seg, str):
        if doc is _MISSING or doc is None:
            doc = {}
        elif not isinstance(doc, dict):
            raise _type_error("object")
        doc[seg] = set_at(doc.get(seg, _MISSING), rest, value) if rest else value
        return doc
    if not isinstance(doc, list):
        raise _type_error("array")
    if seg >= len(doc):
        raise _not_found()
    doc[seg] = set_at(doc[seg], rest, value) if rest else value
    return doc


def delete_at(doc: Any, segments: list[str | int]) -> bool:
    """Remove the value at the path in place; False when nothing is there."""
    node = doc
    for seg in segments[:-1]:
        if not _holds(node, seg):
            return False
        node = node[seg]
    if not _holds(node, segments[-1]):
        return False
    del node[segments[-1]]
    return True


def _holds(node: Any, seg: str | int) -> bool:
    """Whether ``node`` has ``seg``; a key into a non-object or an index into
    a non-array is the engine's type error, not a missing value."""
    if isinstance(seg, str):
        if not isinstance(node, dict):
            raise _type_error("object")
        return seg in node
    if not isinstance(node, list):
        raise _type_error("array")
    return seg < len(node)


# -- commands ---------------------------------------------------------------------------


def check_doc_id(key: str) -> bytes:
    check_name(names.JSON_DOCUMENT_ID, key)
    return key.encode("utf-8")


def doc_revision(aux: str) -> int:
    """A document's revision counter from its row's ``aux`` (``N``, or ``N@origin`` for a promoted copy)."""
    return int(aux.split("@", 1)[0])


def _document(e: Engine, view, space: str, key: bytes) -> tuple[Any, int, int]:
    """(document or _MISSING, its version, its document_version)."""
    entry = e.store.live(view, space, JSON, key)
    if entry is None:
        return _MISSING, 0, 0
    return json.loads(entry.value), entry.version, doc_revision(entry.aux)


# -- index entries ------------------------------------------------------------------------
#
# The engine keeps one entry per document and index whose field holds a value of the
# index's kind (a number for `numeric`, a string for `tag` and `text`), and its write
# receipts count the entries a write puts and deletes.  This server answers no query
# from them, so it keeps none: it counts what the engine would write, from the
# document before and after.


def _indexes(e: Engine, b, view, space: str) -> list[tuple[list, str]]:
    """(field path, index type) of each JSON index defined in the space, cached per branch and space."""
    cache = e.caches.setdefault("json_indexes", {})
    found = cache.get((b.id, space))
    if found is None:
        found = cache[(b.id, space)] = [
            (parse_path(spec["field_path"]), spec["index_type"])
            for spec in (json.loads(x.value) for x in e.store.scan(view, space, JSON_INDEX))]
    return found


def _forget_indexes(e: Engine, b, space: str) -> None:
    e.caches.get("json_indexes", {}).pop((b.id, space), None)


def _indexed(indexes: list, doc: Any) -> list:
    out = []
    for segments, kind in indexes:
        v = _MISSING if doc is _MISSING else get_at(doc, segments)
        if kind == "numeric":
            out.append(float(v) if type(v) in (int, float) else _MISSING)
        else:
            out.append(v if type(v) is str else _MISSING)
    return out


def _entry_changes(before: list, after: list) -> tuple[int, int]:
    """(entries put, entries deleted) to go from one document's indexed values to another's."""
    puts = deletes = 0
    for old, new in zip(before, after):
        if old is new or (old is not _MISSING and new is not _MISSING and old == new):
            continue
        deletes += old is not _MISSING
        puts += new is not _MISSING
    return puts, deletes


def index_entries(e: Engine, b, view, space: str) -> int:
    """How many index entries the space's documents hold (what deleting the space removes with them)."""
    indexes = _indexes(e, b, view, space)
    if not indexes:
        return 0
    return sum(v is not _MISSING for x in e.store.scan(view, space, JSON, batch=4096)
               for v in _indexed(indexes, json.loads(x.value)))


JSON_DEPTH_LIMIT = 100   # containers nested in a document, as the engine counts them
JSON_ARRAY_LIMIT = 1_000_000   # elements of one array in a document (the engine's limit)
JSON_DOCUMENT_TOO_LARGE = "invalid_argument.engine.json_document_too_large"


def check_depth(segments: list[str | int], value: Any) -> int:
    """The engine's nesting limit for the document a write leaves: the value sits as deep as its
    path is long, and what it nests counts from there (the rest of a stored document is within it).

    Returns the length of the longest array in ``value``, measured in the same walk, for
    :func:`check_value` (which the engine applies after the encoded size)."""
    deepest, widest, stack = 0, 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            if len(segments) + deepest > JSON_DEPTH_LIMIT:
                break
            if isinstance(node, list):
                widest = max(widest, len(node))
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    if len(segments) + deepest > JSON_DEPTH_LIMIT:
        raise StrataError("invalid_argument.engine.json_document_too_deep",
                          "JSON document exceeds the maximum nesting depth")
    return widest


def check_value(value: Any, text: str) -> None:
    """The checks the engine makes of a written value on its own, before it looks at the path
    and the stored document, in its order: nested too deep, too large encoded (``text``, the
    value's compact JSON), an array with too many elements."""
    widest = check_depth([], value)
    check_encoded(JSON_DOCUMENT_TOO_LARGE, "JSON document", text)
    if widest > JSON_ARRAY_LIMIT:
        raise StrataError("invalid_argument.engine.json_array_too_large",
                          "JSON document contains an oversized array")


@handler("json_set")
def json_set(e: Engine, a: dict) -> dict:
    key = check_doc_id(a["key"])
    segments = parse_path(a["path"])
    value_text = canonical(a["value"])
    # the value on its own, before the scope and before the path is looked at
    b, space = e.scope(a, lambda: check_value(a["value"], value_text))
    view = e.store.view(b)
    doc, _, revision = _document(e, view, space, key)
    created = doc is _MISSING
    indexes = _indexes(e, b, view, space)
    before = _indexed(indexes, doc)
    new = set_at(doc, segments, a["value"])
    check_depth([], new)   # the document as the write leaves it (a path that does not fit is said first)
    # (written at the root, the document is the value, already encoded and checked)
    text = value_text if not segments else check_encoded(JSON_DOCUMENT_TOO_LARGE, "JSON document", canonical(new))
    puts, deletes = _entry_changes(before, _indexed(indexes, new))
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
        tx.put(space, JSON, key, text.encode("utf-8"), str(revision + 1))
    return {"type": "json_write_result",
            "data": {"key": a["key"], "effect": effect(created), "commit": e.receipt(tx, 1 + puts, deletes)}}


@handler("json_get")
def json_get(e: Engine, a: dict) -> dict:
    key = check_doc_id(a["key"])
    segments = parse_path(a["path"])
    b, space = e.scope(a)
    doc, version, revision = _document(e, e.read_view(b, a), space, key)
    value = _MISSING if doc is _MISSING else get_at(doc, segments)
    return found("json_versioned_value", None if value is _MISSING else {
        "value": value, "version": version, "timestamp": version, "document_version": revision})


@handler("json_delete")
def json_delete(e: Engine, a: dict) -> dict:
    key = check_doc_id(a["key"])
    segments = parse_path(a["path"])
    b, space = e.scope(a)
    view = e.store.view(b)
    doc, _, revision = _document(e, view, space, key)
    missing = {"type": "json_delete_result", "data": {"key": a["key"], "effect": dict(EFFECT_NOT_FOUND)}}
    if doc is _MISSING:
        return missing
    indexes = _indexes(e, b, view, space)
    before = _indexed(indexes, doc)
    if not segments:
        with e.store.commit(b) as tx:
            tx.delete(space, JSON, key)
        puts, deletes = _entry_changes(before, _indexed(indexes, _MISSING))
        counts = (puts, 1 + deletes)
    else:
        if not delete_at(doc, segments):
            return missing
        with e.store.commit(b) as tx:
            tx.put(space, JSON, key, canonical(doc).encode("utf-8"), str(revision + 1))
        puts, deletes = _entry_changes(before, _indexed(indexes, doc))
        counts = (1 + puts, deletes)
    return {"type": "json_delete_result",
            "data": {"key": a["key"], "effect": dict(EFFECT_DELETED), "commit": e.receipt(tx, *counts)}}


@handler("json_exists")
def json_exists(e: Engine, a: dict) -> dict:
    key = check_doc_id(a["key"])
    b, space = e.scope(a)
    return {"type": "bool", "data": e.store.live(e.store.view(b), space, JSON, key) is not None}


def _doc_keys(e: Engine, a: dict, view, space: str, start: str, after: bool):
    prefix = (a.get("prefix") or "").encode("utf-8")
    lower = max(prefix, start.encode("utf-8")) if start else prefix
    if start and start.encode("utf-8") < prefix:
        after = False
    return e.store.scan(view, space, JSON, lower, prefix_end(prefix) if prefix else None, after=after)


@handler("json_list")
def json_list(e: Engine, a: dict) -> dict:
    # What names the rows it lists comes before the scope, as the engine checks it.
    cursor = a.get("cursor")
    if cursor is not None:
        check_doc_id(cursor)  # a cursor is a document id, held to the same rules
    b, space = e.scope(a)
    view = e.read_view(b, a)
    return name_page("json_list_result", _doc_keys(e, a, view, space, cursor or "", cursor is not None),
                     a.get("limit"))


@handler("json_count")
def json_count(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    return {"type": "uint", "data": sum(1 for _ in _doc_keys(e, a, view, space, "", False))}


@handler("json_history")
def json_history(e: Engine, a: dict) -> dict:
    key = check_doc_id(a["key"])
    b, space = e.scope(a)
    rows = e.store.history(e.store.view(b), space, JSON, key)
    if not rows:
        return {"type": "json_version_history", "data": None}
    items = []
    for entry in rows:
        commit = e.store.commit_of(entry.version)
        items.append({
            "value": None if entry.value is None else json.loads(entry.value),
            "version": entry.version, "timestamp": entry.version,
            "document_version": doc_revision(entry.aux) if entry.aux else None,
            "tombstone": entry.value is None, "committed_at": commit.committed_at if commit else None})
    return {"type": "json_version_history", "data": items}


# -- batches, scans and samples -------------------------------------------------------------

_MISS = {"found": False, "value": None, "version": None, "timestamp": None, "document_version": None}


def _check_targets(entries: list[dict]) -> None:
    """Targets must be unique among the entries whose document id and path are valid: an entry
    refused on its own is reported as that entry's failure, never as a duplicate (as the engine does)."""
    valid = []
    for x in entries:
        try:
            _target(x)
        except StrataError:
            continue
        valid.append((x["key"], x["path"]))
    check_unique(valid, "invalid_argument.executor.json_batch_duplicate_key",
                 "JSON batch contains duplicate document targets")


def _target(x: dict) -> tuple[bytes, list]:
    return check_doc_id(x["key"]), parse_path(x["path"])


@handler("json_batch_set")
def json_batch_set(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    entries = a["entries"]
    _check_targets(entries)
    view = e.store.view(b)
    batch = Batch(e)
    indexes = _indexes(e, b, view, space)
    docs: dict[bytes, list] = {}  # key -> [document, document_version, indexed before], as the batch leaves it
    for x in entries:
        try:
            key, segments = _target(x)
        except StrataError as exc:
            batch.fail(exc, {"document_version": None})
            continue
        state = docs.get(key)
        if state is None:
            doc, _, revision = _document(e, view, space, key)
            state = [doc, revision, _indexed(indexes, doc)]
        created = state[0] is _MISSING
        text = canonical(x["value"])
        value = json.loads(text)
        try:
            check_value(value, text)   # the entry's failure, whatever its path
        except StrataError as exc:
            batch.fail(exc, {"document_version": None})
            continue
        docs[key] = state
        # A value that does not fit its path refuses the whole batch, as the engine does.
        state[0] = set_at(state[0], segments, value)
        state[1] += 1
        batch.add({"document_version": state[1]}, effect=effect(created))
    if not docs:
        return batch.envelope("json_batch_results")
    # A document the entries together leave too deep or too large refuses the whole batch (each
    # entry's value fitted on its own), as a value that does not fit its path does.
    texts = {}
    for key, (doc, _, _) in docs.items():
        check_depth([], doc)
        texts[key] = check_encoded(JSON_DOCUMENT_TOO_LARGE, "JSON document", canonical(doc))
    puts = deletes = 0
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
        for key, (doc, revision, before) in docs.items():
            tx.put(space, JSON, key, texts[key].encode("utf-8"), str(revision))
            p, d = _entry_changes(before, _indexed(indexes, doc))
            puts, deletes = puts + p, deletes + d
    return batch.envelope("json_batch_results", e.receipt(tx, len(docs) + puts, deletes))


@handler("json_batch_delete")
def json_batch_delete(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    entries = a["entries"]
    _check_targets(entries)
    view = e.store.view(b)
    batch = Batch(e)
    indexes = _indexes(e, b, view, space)
    docs: dict[bytes, list] = {}  # key -> [document or _MISSING, document_version, changed, indexed before]
    for x in entries:
        try:
            key, segments = _target(x)
        except StrataError as exc:
            batch.fail(exc, {"document_version": None})
            continue
        state = docs.get(key)
        if state is None:
            doc, _, revision = _document(e, view, space, key)
            state = docs[key] = [doc, revision, False, _indexed(indexes, doc)]
        gone = False
        if state[0] is not _MISSING:
            if not segments:
                state[0], state[1], gone = _MISSING, 0, True
            elif delete_at(state[0], segments):
                state[1] += 1
                gone = True
        state[2] |= gone
        batch.add({"document_version": None}, effect=dict(EFFECT_DELETED if gone else EFFECT_NOT_FOUND))
    changed = {k: s for k, s in docs.items() if s[2]}
    if not changed:
        return batch.envelope("json_batch_results")
    puts = entry_puts = entry_deletes = 0
    with e.store.commit(b) as tx:
        for key, (doc, revision, _, before) in changed.items():
            if doc is _MISSING:
                tx.delete(space, JSON, key)
            else:
                tx.put(space, JSON, key, canonical(doc).encode("utf-8"), str(revision))
                puts += 1
            p, d = _entry_changes(before, _indexed(indexes, doc))
            entry_puts, entry_deletes = entry_puts + p, entry_deletes + d
    return batch.envelope("json_batch_results",
                          e.receipt(tx, puts + entry_puts, len(changed) - puts + entry_deletes))


@handler("json_batch_get")
def json_batch_get(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    batch = Batch(e)
    for x in a["entries"]:
        try:
            key, segments = _target(x)
        except StrataError as exc:
            batch.fail(exc, dict(_MISS))
            continue
        doc, version, revision = _document(e, view, space, key)
        value = _MISSING if doc is _MISSING else get_at(doc, segments)
        if value is _MISSING:
            batch.add(dict(_MISS), status="miss")
        else:
            batch.add({"found": True, "value": value, "version": version, "timestamp": version,
                       "document_version": revision})
    return batch.envelope("json_batch_get_results")


@handler("json_batch_exists")
def json_batch_exists(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    batch = Batch(e)
    for doc_id in a["keys"]:
        try:
            key = check_doc_id(doc_id)
        except StrataError as exc:
            batch.fail(exc, None)
            continue
        batch.add({"exists": e.store.live(view, space, JSON, key) is not None})
    return batch.envelope("json_batch_exists_results")


def _doc_item(entry) -> dict:
    return {"key": entry.key.decode("utf-8"), "value": json.loads(entry.value), "version": entry.version,
            "timestamp": entry.version, "document_version": doc_revision(entry.aux)}


@handler("json_scan")
def json_scan(e: Engine, a: dict) -> dict:
    start = a.get("start")
    lower = b"" if start is None else check_doc_id(start)
    b, space = e.scope(a)
    limit = a.get("limit")
    entries = e.store.scan(e.store.view(b), space, JSON, lower, batch=batch_for(limit))
    rows = list(entries) if limit is None else list(islice(entries, min(limit, sys.maxsize - 1) + 1))
    # Like kv_scan: the cursor names the next document to read (inclusive).
    has_more = limit is not None and len(rows) > limit
    cursor = rows[limit].key.decode("utf-8") if has_more else None
    items = [_doc_item(x) for x in (rows[:limit] if has_more else rows)]
    return {"type": "json_scan_result", "data": {"items": items, "has_more": has_more, "cursor": cursor}}


@handler("json_sample")
def json_sample(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    prefix = (a.get("prefix") or "").encode("utf-8")
    rows = list(e.store.scan(e.store.view(b), space, JSON, prefix, prefix_end(prefix) if prefix else None,
                             batch=4096))
    return sample_page("json_sample_result", rows, a.get("count"), _doc_item)


# -- index definitions ----------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def render_path(segments: list[str | int]) -> str:
    """A parsed path as the engine prints an index's field path: ``a.b``, ``["x y"].c``, ``[0]``, ``$``."""
    if not segments:
        return "$"
    out = []
    for seg in segments:
        if isinstance(seg, int):
            out.append(f"[{seg}]")
        elif _PLAIN_KEY.fullmatch(seg):
            out.append(("." if out else "") + seg)
        else:
            out.append(f"[{json.dumps(seg, ensure_ascii=False)}]")
    return "".join(out)


def _check_index_name(name: str) -> bytes:
    check_name(names.JSON_INDEX_NAME, name)
    return name.encode("utf-8")


def _index_json(entry, space: str) -> dict:
    spec = json.loads(entry.value)
    return {"name": entry.key.decode("utf-8"), "space": space, "field_path": spec["field_path"],
            "index_type": spec["index_type"], "created_version": entry.version,
            "created_timestamp": entry.version}


@handler("json_create_index")
def json_create_index(e: Engine, a: dict) -> dict:
    name = _check_index_name(a["name"])  # judged before the scope, as the engine does
    b, space = e.scope(a)
    field_path = render_path(parse_path(a["field_path"]))
    view = e.store.view(b)
    if e.store.live(view, space, JSON_INDEX, name) is not None:
        raise StrataError("already_exists.engine.json_index", "JSON index already exists")
    spec = {"field_path": field_path, "index_type": a["index_type"]}
    with e.store.commit(b) as tx:
        tx.register_space(view, space)
        tx.put(space, JSON_INDEX, name, json.dumps(spec).encode("utf-8"))
    _forget_indexes(e, b, space)
    return {"type": "json_index_definition", "data": _index_json(e.store.live(e.store.view(b), space, JSON_INDEX,
                                                                              name), space)}


@handler("json_drop_index")
def json_drop_index(e: Engine, a: dict) -> dict:
    name = _check_index_name(a["name"])  # judged before the scope, as the engine does
    b, space = e.scope(a)
    if e.store.live(e.store.view(b), space, JSON_INDEX, name) is None:
        return {"type": "bool", "data": False}
    with e.store.commit(b) as tx:
        tx.delete(space, JSON_INDEX, name)
    _forget_indexes(e, b, space)
    return {"type": "bool", "data": True}


@handler("json_list_indexes")
def json_list_indexes(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    rows = list(e.store.scan(e.store.view(b), space, JSON_INDEX))
    # The engine lists index names shortest first, then in byte order.
    rows.sort(key=lambda x: (len(x.key), x.key))
    return {"type": "json_index_list",
            "data": {"items": [_index_json(x, space) for x in rows], "has_more": False, "cursor": None}}
