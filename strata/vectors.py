"""Strata vector collections: f32 embeddings with metadata, exact similarity search.

Scores are computed as the engine computes them, so that they match it to the
last bit: the dot product summed in f32 one component after another (it may
overflow: the engine then writes ``null``); cosine similarity (0 against a
zero vector) and ``1 / (1 + distance)`` for euclidean in f64, rounded to f32
at the end (they never overflow).  Ranking is by score descending, a NaN
below everything, ties to the smaller key.  Search is exact (every
visible vector is scored): at the head of a branch the collection is held in
memory as one matrix and kept current by the writes of this process, which
is the only one that has the database open; reads at an older version build
the matrix for that version.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from .store import (
    VECTOR, VECTOR_COLLECTION, View, prefix_end, split_tuple_key, tuple_key,
)

from .batch import Batch, check_unique, sample_page
from .commands import EFFECT_DELETED, EFFECT_NOT_FOUND, canonical, check_encoded, effect, found, handler, page, take
from . import names
from .errors import StrataError
from .names import check_filter_fields, check_name
from .wire import Condition

if TYPE_CHECKING:
    from .engine import Engine

MAX_DIMENSION = 32768


def f32_text(x: float) -> float:
    """The shortest decimal that reads back as the same f32 (what the engine prints)."""
    return float(str(np.float32(x)))


def score_text(x: float) -> float | None:
    """A score as the engine writes it: an infinite or NaN one is ``null`` (JSON has no such number)."""
    return f32_text(x) if np.isfinite(x) else None


# -- collections ----------------------------------------------------------------------------


@dataclass(slots=True)
class Collection:
    name: str
    dimension: int
    metric: str
    count: int
    version: int
    created: int | None = None  # the version that created it (what branch_diff reports)

    def aux(self) -> str:
        meta = {"dimension": self.dimension, "metric": self.metric, "count": self.count}
        if self.created is not None:
            meta["created"] = self.created
        return json.dumps(meta)

    def listing(self) -> dict:
        return {"name": self.name, "dimension": self.dimension, "metric": self.metric, "count": self.count}


def check_collection_name(name: str) -> None:
    check_name(names.VECTOR_COLLECTION, name)


def check_vector_key(key: str) -> None:
    check_name(names.VECTOR_KEY, key)


def _missing() -> StrataError:
    return StrataError("not_found.engine.vector_collection", "vector collection does not exist")


def load_collection(e: Engine, view: View, space: str, name: str) -> Collection | None:
    check_collection_name(name)  # also on reads: a bad name is refused, never "not found"
    entry = e.store.live(view, space, VECTOR_COLLECTION, name.encode("utf-8"))
    if entry is None:
        return None
    meta = json.loads(entry.aux)
    return Collection(name, meta["dimension"], meta["metric"], meta["count"], entry.version, meta.get("created"))


def require_collection(e: Engine, view: View, space: str, name: str) -> Collection:
    coll = load_collection(e, view, space, name)
    if coll is None:
        raise _missing()
    return coll


# -- the in-memory matrix ---------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    key: str
    embedding: np.ndarray
    metadata: Any  # dict, or None when the vector has none
    version: int
    revision: int


def decode_record(key: str, value: bytes, aux: str, version: int) -> Record:
    extra = json.loads(aux)
    return Record(key, np.frombuffer(value, dtype=np.float32), extra.get("m"), version, extra["r"])


@dataclass
class Index:
    """Every visible vector of one collection, as rows of one f32 matrix (norms in f64, for cosine)."""

    dimension: int
    keys: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    metadata: list[Any] = field(default_factory=list)
    alive: list[bool] = field(default_factory=list)
    matrix: np.ndarray | None = None
    norms: np.ndarray | None = None
    size: int = 0

    def set(self, key: str, embedding: np.ndarray, metadata: Any) -> None:
        row = self.rows.get(key)
        if row is None:
            row = self.size
            self._grow(row + 1)
            self.rows[key] = row
            self.keys.append(key)
            self.metadata.append(metadata)
            self.alive.append(True)
            self.size += 1
        else:
            self.metadata[row] = metadata
            self.alive[row] = True
        self.matrix[row] = embedding
        wide = embedding.astype(np.float64)
        self.norms[row] = np.sqrt(np.dot(wide, wide))

    def remove(self, key: str) -> None:
        row = self.rows.get(key)
        if row is not None:
            self.alive[row] = False

    def _grow(self, needed: int) -> None:
        if self.matrix is None:
            cap = max(16, needed)
            self.matrix = np.zeros((cap, self.dimension), dtype=np.float32)
            self.norms = np.zeros(cap, dtype=np.float64)
        elif needed > len(self.matrix):
            cap = max(needed, len(self.matrix) * 2)
            matrix = np.zeros((cap, self.dimension), dtype=np.float32)
            matrix[:self.size] = self.matrix[:self.size]
            norms = np.zeros(cap, dtype=np.float64)
            norms[:self.size] = self.norms[:self.size]
            self.matrix, self.norms = matrix, norms

    def search(self, metric: str, query: np.ndarray, k: int,
               conditions: list[Condition]) -> list[tuple[float, str, Any]]:
        if self.size == 0 or k == 0:
            return []
        rows = np.fromiter((i for i in range(self.size) if self.alive[i]
                            and _matches(self.metadata[i], conditions)), dtype=np.int64) \
            if conditions or not all(self.alive) else None
        matrix = self.matrix[:self.size] if rows is None else self.matrix[rows]
        if len(matrix) == 0:
            return []
        scores = _scores(metric, matrix, self.norms[:self.size] if rows is None else self.norms[rows], query)
        ids = np.arange(self.size) if rows is None else rows
        nan = np.isnan(scores)
        rank = np.where(nan, -np.inf, scores)
        if k < len(scores):
            # Every row tied with the k-th best stays in, so ties resolve by key.
            kth = np.partition(rank, len(rank) - k)[len(rank) - k]
            keep = rank >= kth
            scores, ids, nan = scores[keep], ids[keep], nan[keep]
        order = sorted(range(len(ids)), key=lambda j: (bool(nan[j]), -float(scores[j]) if not nan[j] else 0.0,
                                                        self.keys[ids[j]]))[:k]
        return [(float(scores[j]), self.keys[ids[j]], self.metadata[ids[j]]) for j in order]


def _scores(metric: str, matrix: np.ndarray, norms: np.ndarray, query: np.ndarray) -> np.ndarray:
    if metric == "dot_product":
        with np.errstate(over="ignore", invalid="ignore"):
            return _sequential_dot(matrix, query)
    # The engine ranks by the f32 score: f64 values that round alike tie, and go by key.
    wide, q = matrix.astype(np.float64), query.astype(np.float64)
    if metric == "euclidean":
        diff = wide - q
        return (1.0 / (1.0 + np.sqrt(np.einsum("ij,ij->i", diff, diff)))).astype(np.float32)
    denom = norms * np.sqrt(np.dot(q, q))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, (wide @ q) / denom, 0.0).astype(np.float32)


def _sequential_dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each product rounded to f32, then a running f32 sum in component order, as the engine sums.

    A BLAS product or numpy's pairwise sum rounds differently.  Few rows: one cumsum (it runs in
    order); many: one pass per component over all rows, which holds no rows-by-dimension copy.
    """
    if len(matrix) < 1024:
        return np.cumsum(matrix * query, axis=1, dtype=np.float32)[:, -1]
    acc = np.zeros(len(matrix), dtype=np.float32)
    term = np.empty(len(matrix), dtype=np.float32)
    for j, component in enumerate(query):
        np.multiply(matrix[:, j], component, out=term)
        acc += term
    return acc


def _matches(metadata: Any, conditions: list[Condition]) -> bool:
    if not conditions:
        return True
    if not isinstance(metadata, dict):
        return False
    for c in conditions:
        if c.field not in metadata:
            return False
        v = metadata[c.field]
        if c.kind == "null":
            if v is not None:
                return False
        elif c.kind == "bool":
            if not (v is True or v is False) or v != c.value:
                return False
        elif c.kind == "number":
            if v is True or v is False or not isinstance(v, (int, float)) or float(v) != c.value:
                return False
        elif not isinstance(v, str) or v != c.value:
            return False
    return True


def _index_key(b_id: int, space: str, name: str) -> tuple:
    return (b_id, space, name)


def build_index(e: Engine, view: View, space: str, coll: Collection) -> Index:
    index = Index(coll.dimension)
    prefix = tuple_key(coll.name)
    for entry in e.store.scan(view, space, VECTOR, prefix, prefix_end(prefix), batch=4096):
        rec = decode_record(split_tuple_key(entry.key)[1], entry.value, entry.aux, entry.version)
        index.set(rec.key, rec.embedding, rec.metadata)
    return index


def head_index(e: Engine, b_id: int, view: View, space: str, coll: Collection) -> Index:
    cache = e.caches.setdefault("vectors", {})
    key = _index_key(b_id, space, coll.name)
    index = cache.get(key)
    if index is None:
        index = cache[key] = build_index(e, view, space, coll)
    return index


def _cached(e: Engine, b_id: int, space: str, name: str) -> Index | None:
    return e.caches.setdefault("vectors", {}).get(_index_key(b_id, space, name))


# -- commands -----------------------------------------------------------------------------------


def _vector_input(a: dict, field: str) -> np.ndarray | None:
    vector, text = a.get(field), a.get("text")
    if vector is not None and text is not None:
        raise StrataError("invalid_argument.executor.vector_input",
                          "pass either a vector or a text to embed, not both")
    if text is not None:
        return None
    if not vector:
        raise StrataError("invalid_argument.executor.vector_input", "pass a vector, or a text to embed")
    return _f32(vector)


def _f32(values: list[float]) -> np.ndarray:
    """The values as they are stored (f32), refused as the engine refuses them and before anything
    else is looked at (branch, collection, key, dimension): first a value that is not zero but
    rounds to zero, then one past f32's range."""
    with np.errstate(over="ignore", under="ignore"):
        arr = np.asarray(values, dtype=np.float32)
        if (arr == 0).any() and ((arr == 0) & (np.asarray(values, dtype=np.float64) != 0)).any():
            raise StrataError("invalid_argument.engine.vector_embedding",
                              "vector embedding value underflows to zero in f32")
    if not np.isfinite(arr).all():
        raise StrataError("invalid_argument.engine.vector_embedding", "vector embedding contains a non-finite value")
    return arr


def _no_model(name: str) -> StrataError:
    return StrataError(
        "failed_precondition.engine.embedding_model_missing",
        f"vector collection `{name}` records no embedding model, so text cannot be embedded for it; "
        f"declare one with `vector collection set-embedding-model {name} <model>`, or pass a vector directly")


def _embedding(values: np.ndarray, dimension: int) -> np.ndarray:
    if len(values) != dimension:
        raise StrataError("invalid_argument.engine.vector_dimension",
                          f"vector dimension mismatch: expected {dimension}, got {len(values)}")
    return values


@handler("vector_create_collection")
def vector_create_collection(e: Engine, a: dict) -> dict:
    # The name and the dimension come before the scope, as the engine checks them.
    name = a["collection"]
    check_collection_name(name)
    if not 1 <= a["dimension"] <= MAX_DIMENSION:
        raise StrataError("invalid_argument.engine.vector_dimension",
                          "vector collection dimension is outside the supported range")
    b, space = e.scope(a)
    if a.get("embedding_model") is not None:
        raise StrataError("unsupported.server.argument",
                          "embedding models are not supported by this server: pass vectors directly")
    view = e.store.view(b)
    if load_collection(e, view, space, name) is not None:
        raise StrataError("already_exists.engine.vector_collection", "vector collection already exists")
    coll = Collection(name, a["dimension"], a["metric"], 0, 0)
    with e.store.commit(b) as tx:
        coll.created = tx.version
        tx.register_space(view, space)
        tx.put(space, VECTOR_COLLECTION, name.encode("utf-8"), b"", coll.aux())
    e.caches.setdefault("vectors", {}).pop(_index_key(b.id, space, name), None)
    return {"type": "vector_collection_list", "data": {"items": [coll.listing()], "has_more": False, "cursor": None}}


@handler("vector_upsert")
def vector_upsert(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    values = _vector_input(a, "vector")
    # A given vector's metadata is checked next, before the branch, the collection and the
    # vector's dimension (text to embed is resolved first: without a model that is the error).
    metadata = a.get("metadata")
    if values is not None and metadata is not None:
        if not isinstance(metadata, dict):
            raise StrataError("invalid_argument.engine.vector_metadata", "vector metadata must be a JSON object")
        metadata = json.loads(check_encoded("invalid_argument.engine.vector_metadata_too_large",
                                            "vector metadata", canonical(metadata)))
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    if values is None:
        raise _no_model(coll.name)
    embedding = _embedding(values, coll.dimension)
    key = tuple_key(coll.name, a["key"])
    old = e.store.get(view, space, VECTOR, key)
    created = old is None or old.value is None
    revision = 1 if old is None or old.aux is None else json.loads(old.aux)["r"] + 1
    extra = {"r": revision} if metadata is None else {"m": metadata, "r": revision}
    with e.store.commit(b) as tx:
        tx.put(space, VECTOR, key, embedding.tobytes(), json.dumps(extra))
        if created:
            coll.count += 1
            tx.put(space, VECTOR_COLLECTION, coll.name.encode("utf-8"), b"", coll.aux())
    index = _cached(e, b.id, space, coll.name)
    if index is not None:
        index.set(a["key"], embedding, metadata)
    return {"type": "vector_write_result", "data": {
        "collection": coll.name, "key": a["key"], "effect": effect(created), "commit": e.receipt(tx, 1),
        "vector_revision": revision}}


@handler("vector_query")
def vector_query(e: Engine, a: dict) -> dict:
    # Here the collection name, an as_of conflict and the vector input come before the filter's fields.
    check_name(names.VECTOR_COLLECTION, a["collection"])
    e.check_as_of(a)
    e.instant_first(a)
    values = _vector_input(a, "query")
    check_filter_fields(a.get("filter"))
    b, space = e.scope(a)
    view = e.read_view(b, a)
    coll = require_collection(e, view, space, a["collection"])
    if values is None:
        raise _no_model(coll.name)
    query = _embedding(values, coll.dimension)
    at_head = a.get("as_of") is None and a.get("as_of_time") is None
    index = head_index(e, b.id, view, space, coll) if at_head else build_index(e, view, space, coll)
    out = []
    for score, key, metadata in index.search(coll.metric, query, a["k"], a.get("filter") or []):
        match = {"key": key, "score": score_text(score)}
        if metadata is not None:
            match["metadata"] = metadata
        out.append(match)
    return {"type": "vector_matches", "data": out}


def _live_record(e: Engine, view: View, space: str, coll: Collection, key: str) -> Record | None:
    entry = e.store.live(view, space, VECTOR, tuple_key(coll.name, key))
    if entry is None:
        return None
    return decode_record(key, entry.value, entry.aux, entry.version)


@handler("vector_get")
def vector_get(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    b, space = e.scope(a)
    view = e.read_view(b, a)
    coll = require_collection(e, view, space, a["collection"])
    rec = _live_record(e, view, space, coll, a["key"])
    if rec is None:
        return found("vector_data", None)
    data: dict = {"embedding": [f32_text(x) for x in rec.embedding.tolist()]}
    if rec.metadata is not None:
        data["metadata"] = rec.metadata
    return found("vector_data", {"key": rec.key, "data": data, "version": rec.version,
                                 "timestamp": rec.version, "vector_revision": rec.revision})


@handler("vector_delete")
def vector_delete(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    base = {"collection": coll.name, "key": a["key"]}
    rec = _live_record(e, view, space, coll, a["key"])
    if rec is None:
        return {"type": "vector_delete_result", "data": {**base, "effect": dict(EFFECT_NOT_FOUND)}}
    with e.store.commit(b) as tx:
        # The revision counter survives the deletion: a re-insert continues it.
        tx.delete(space, VECTOR, tuple_key(coll.name, a["key"]), json.dumps({"r": rec.revision}))
        coll.count -= 1
        tx.put(space, VECTOR_COLLECTION, coll.name.encode("utf-8"), b"", coll.aux())
    index = _cached(e, b.id, space, coll.name)
    if index is not None:
        index.remove(a["key"])
    return {"type": "vector_delete_result",
            "data": {**base, "effect": dict(EFFECT_DELETED), "commit": e.receipt(tx, 0, 1)}}


@handler("vector_exists")
def vector_exists(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    return {"type": "bool", "data": _live_record(e, view, space, coll, a["key"]) is not None}


@handler("vector_count")
def vector_count(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    coll = require_collection(e, e.read_view(b, a), space, a["collection"])
    return {"type": "uint", "data": coll.count}


@handler("vector_list_collections")
def vector_list_collections(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    items = [Collection(x.key.decode("utf-8"), **json.loads(x.aux), version=x.version).listing()
             for x in e.store.scan(view, space, VECTOR_COLLECTION)]
    return {"type": "vector_collection_list", "data": {"items": items, "has_more": False, "cursor": None}}


@handler("vector_delete_collection")
def vector_delete_collection(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = load_collection(e, view, space, a["collection"])
    if coll is None:
        return {"type": "bool", "data": False}
    if coll.count and not a.get("force"):
        raise StrataError("failed_precondition.engine.vector_collection_not_empty",
                          f"vector collection `{coll.name}` contains visible data; retry with force=true to delete it")
    prefix = tuple_key(coll.name)
    keys = [x.key for x in e.store.scan(view, space, VECTOR, prefix, prefix_end(prefix))]
    with e.store.commit(b) as tx:
        for key in keys:
            tx.delete(space, VECTOR, key)
        tx.delete(space, VECTOR_COLLECTION, coll.name.encode("utf-8"))
    e.caches.setdefault("vectors", {}).pop(_index_key(b.id, space, coll.name), None)
    return {"type": "bool", "data": True}


# -- batches, history, scans and bulk updates -----------------------------------------------------


def _record_json(rec: Record) -> dict:
    data: dict = {"embedding": [f32_text(x) for x in rec.embedding.tolist()]}
    if rec.metadata is not None:
        data["metadata"] = rec.metadata
    return {"key": rec.key, "data": data, "version": rec.version, "timestamp": rec.version,
            "vector_revision": rec.revision}


def _write(e: Engine, tx, b_id: int, space: str, coll: Collection, key: str, embedding: np.ndarray,
           metadata: Any, revision: int) -> None:
    extra = {"r": revision} if metadata is None else {"m": metadata, "r": revision}
    tx.put(space, VECTOR, tuple_key(coll.name, key), embedding.tobytes(), json.dumps(extra))
    index = _cached(e, b_id, space, coll.name)
    if index is not None:
        index.set(key, embedding, metadata)


def _erase(e: Engine, tx, b_id: int, space: str, coll: Collection, rec: Record) -> None:
    # The revision counter survives the deletion, as in vector_delete.
    tx.delete(space, VECTOR, tuple_key(coll.name, rec.key), json.dumps({"r": rec.revision}))
    index = _cached(e, b_id, space, coll.name)
    if index is not None:
        index.remove(rec.key)


def _revision_after(e: Engine, view: View, space: str, coll: Collection, key: str) -> tuple[bool, int]:
    old = e.store.get(view, space, VECTOR, tuple_key(coll.name, key))
    created = old is None or old.value is None
    return created, 1 if old is None or old.aux is None else json.loads(old.aux)["r"] + 1


def _unique_keys(keys: list[str]) -> None:
    check_unique(keys, "invalid_argument.executor.vector_batch_duplicate_key", "vector batch contains duplicate keys")


def _batch_embedding(values: list[float], key: str, dimension: int) -> np.ndarray:
    arr = _f32(values)
    check_vector_key(key)
    if not 1 <= len(values) <= MAX_DIMENSION:
        raise StrataError("invalid_argument.engine.vector_embedding",
                          "vector embedding dimension is outside the supported range")
    if len(values) != dimension:
        raise StrataError("invalid_argument.executor.vector_dimension",
                          f"vector dimension mismatch: expected {dimension}, got {len(values)}")
    return arr


@handler("vector_batch_upsert")
def vector_batch_upsert(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    # Items are checked first; keys must be unique only among the items that passed (an item
    # refused on its own is reported as such, whatever its key), as the engine does.
    checked: list[tuple[dict, np.ndarray | StrataError, dict | None]] = []
    for x in a["entries"]:
        try:
            # The metadata is the item's failure before its vector is (not an object, too large).
            metadata = x.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise StrataError("invalid_argument.engine.vector_metadata", "vector metadata must be a JSON object")
            if metadata is not None:
                check_encoded("invalid_argument.engine.vector_metadata_too_large", "vector metadata",
                              canonical(metadata))
            embedding = _batch_embedding(x["vector"], x["key"], coll.dimension)
            checked.append((x, embedding, metadata))
        except StrataError as exc:
            checked.append((x, exc, None))
    _unique_keys([x["key"] for x, embedding, _m in checked if not isinstance(embedding, StrataError)])
    batch = Batch(e)
    writes = []
    for x, embedding, metadata in checked:
        if isinstance(embedding, StrataError):
            batch.fail(embedding, {"vector_revision": None})
            continue
        created, revision = _revision_after(e, view, space, coll, x["key"])
        batch.add({"vector_revision": revision}, effect=effect(created))
        writes.append((x["key"], embedding, None if metadata is None else json.loads(canonical(metadata)),
                       revision, created))
    if not writes:
        return batch.envelope("vector_batch_upsert_results")
    with e.store.commit(b) as tx:
        for key, embedding, metadata, revision, created in writes:
            _write(e, tx, b.id, space, coll, key, embedding, metadata, revision)
            coll.count += created
        tx.put(space, VECTOR_COLLECTION, coll.name.encode("utf-8"), b"", coll.aux())
    return batch.envelope("vector_batch_upsert_results", e.receipt(tx, len(writes)))


@handler("vector_batch_get")
def vector_batch_get(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    batch = Batch(e)
    for key in a["keys"]:
        if _refused_key(batch, key, {"found": False, "value": None}):
            continue
        rec = _live_record(e, view, space, coll, key)
        if rec is None:
            batch.add({"found": False, "value": None}, status="miss")
        else:
            batch.add({"found": True, "value": _record_json(rec)})
    return batch.envelope("vector_batch_get_results")


@handler("vector_batch_exists")
def vector_batch_exists(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    batch = Batch(e)
    for key in a["keys"]:
        if not _refused_key(batch, key, None):
            batch.add({"exists": _live_record(e, view, space, coll, key) is not None})
    return batch.envelope("vector_batch_exists_results")


def _key_error(key: str) -> StrataError | None:
    """Why ``key`` is not a valid vector key, or None."""
    try:
        check_vector_key(key)
    except StrataError as exc:
        return exc
    return None


def _refused_key(batch: Batch, key: str, result) -> bool:
    """True, with the item's error added, when ``key`` is not a valid vector key."""
    if (exc := _key_error(key)) is None:
        return False
    batch.fail(exc, result)
    return True


def _delete_records(e: Engine, b, view: View, space: str, coll: Collection, records: list[Record]):
    with e.store.commit(b) as tx:
        for rec in records:
            _erase(e, tx, b.id, space, coll, rec)
        coll.count -= len(records)
        tx.put(space, VECTOR_COLLECTION, coll.name.encode("utf-8"), b"", coll.aux())
    return tx


@handler("vector_batch_delete")
def vector_batch_delete(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    keys = a["keys"]
    refused = {i: exc for i, key in enumerate(keys) if (exc := _key_error(key)) is not None}
    _unique_keys([key for i, key in enumerate(keys) if i not in refused])
    batch = Batch(e)
    gone = []
    for i, key in enumerate(keys):
        if i in refused:
            batch.fail(refused[i], {"vector_revision": None})
            continue
        rec = _live_record(e, view, space, coll, key)
        batch.add({"vector_revision": None}, effect=dict(EFFECT_NOT_FOUND if rec is None else EFFECT_DELETED))
        if rec is not None:
            gone.append(rec)
    if not gone:
        return batch.envelope("vector_batch_delete_results")
    tx = _delete_records(e, b, view, space, coll, gone)
    return batch.envelope("vector_batch_delete_results", e.receipt(tx, 0, len(gone)))


@handler("vector_history")
def vector_history(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    rows = e.store.history(view, space, VECTOR, tuple_key(coll.name, a["key"]))
    if not rows:
        return {"type": "vector_version_history", "data": None}
    items = []
    for entry in rows:
        commit = e.store.commit_of(entry.version)
        at = commit.committed_at if commit else None
        if entry.value is None:
            items.append({"key": a["key"], "version": entry.version, "timestamp": entry.version,
                          "tombstone": True, "committed_at": at})
        else:
            item = _record_json(decode_record(a["key"], entry.value, entry.aux, entry.version))
            items.append({**item, "tombstone": False, "committed_at": at})
    return {"type": "vector_version_history", "data": {"items": items}}


def _records(e: Engine, view: View, space: str, coll: Collection, start: str = "", *, after: bool = False,
             prefix: str = ""):
    base = tuple_key(coll.name)
    lower = base + start.encode("utf-8") if start >= prefix else base + prefix.encode("utf-8")
    if start < prefix:
        after = False
    upper = prefix_end(base + prefix.encode("utf-8")) if prefix else prefix_end(base)
    # Keys inside the collection sort by their text, so a key's raw bytes bound the scan;
    # the exact tuple key of ``start`` (its terminator included) is what "after" skips.
    if after:
        lower = tuple_key(coll.name, start)
    for entry in e.store.scan(view, space, VECTOR, lower, upper, after=after, batch=4096):
        yield decode_record(split_tuple_key(entry.key)[1], entry.value, entry.aux, entry.version)


@handler("vector_list_keys")
def vector_list_keys(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.read_view(b, a)
    coll = require_collection(e, view, space, a["collection"])
    cursor = a.get("cursor")
    if cursor is not None:
        check_vector_key(cursor)  # a cursor is a key, held to the same rules
    prefix = a.get("prefix") or ""
    recs = (r for r in _records(e, view, space, coll, cursor or "", after=cursor is not None, prefix=prefix)
            if r.key.startswith(prefix))
    rows, has_more = take(recs, a.get("limit"))
    keys = [r.key for r in rows]
    return {"type": "vector_key_page", "data": page(keys, has_more, keys[-1] if has_more else None)}


@handler("vector_scan")
def vector_scan(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    limit = a.get("limit")
    recs = _records(e, view, space, coll, a.get("start") or "")
    rows = list(recs) if limit is None else list(islice(recs, min(limit, sys.maxsize - 1) + 1))
    has_more = limit is not None and len(rows) > limit
    cursor = rows[limit].key if has_more else None
    items = [_record_json(r) for r in (rows[:limit] if has_more else rows)]
    return {"type": "vector_scan_result", "data": {"items": items, "has_more": has_more, "cursor": cursor}}


@handler("vector_sample")
def vector_sample(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    return sample_page("vector_sample_result", list(_records(e, view, space, coll)), a.get("count"), _record_json)


@handler("vector_collection_stats")
def vector_collection_stats(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    coll = require_collection(e, e.store.view(b), space, a["collection"])
    return {"type": "vector_collection_list", "data": {"items": [coll.listing()], "has_more": False, "cursor": None}}


def _not_updated(kind: str, coll: Collection, key: str) -> dict:
    return {"type": kind, "data": {"collection": coll.name, "key": key, "effect": dict(EFFECT_NOT_FOUND)}}


def _update(e: Engine, b, space: str, coll: Collection, rec: Record, kind: str, embedding: np.ndarray,
            metadata: Any) -> dict:
    with e.store.commit(b) as tx:
        _write(e, tx, b.id, space, coll, rec.key, embedding, metadata, rec.revision + 1)
    return {"type": kind, "data": {"collection": coll.name, "key": rec.key, "effect": effect(False),
                                   "commit": e.receipt(tx, 1), "vector_revision": rec.revision + 1}}


@handler("vector_update_metadata")
def vector_update_metadata(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    # The patch's own checks come next, before the scope and the collection lookup.
    patch = a["patch"]
    if not isinstance(patch, dict):
        raise StrataError("invalid_argument.engine.vector_metadata_patch", "vector metadata patch must be a JSON object")
    if not patch:
        raise StrataError("invalid_argument.engine.vector_metadata_patch",
                          "vector metadata patch must contain at least one field")
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    rec = _live_record(e, view, space, coll, a["key"])
    if rec is None:
        return _not_updated("vector_metadata_update_result", coll, a["key"])
    # A shallow merge: each patched field replaces the old value (null included).
    merged = json.loads(canonical({**(rec.metadata or {}), **patch}))
    return _update(e, b, space, coll, rec, "vector_metadata_update_result", rec.embedding, merged)


@handler("vector_update_embedding")
def vector_update_embedding(e: Engine, a: dict) -> dict:
    # The collection's name, then the key, before anything else, as the engine checks them.
    check_collection_name(a["collection"])
    check_vector_key(a["key"])
    values = _vector_input(a, "vector")
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    if values is None:
        raise _no_model(coll.name)
    embedding = _embedding(values, coll.dimension)
    rec = _live_record(e, view, space, coll, a["key"])
    if rec is None:
        return _not_updated("vector_embedding_update_result", coll, a["key"])
    return _update(e, b, space, coll, rec, "vector_embedding_update_result", embedding, rec.metadata)


def _bulk_delete(e: Engine, b, view: View, space: str, coll: Collection, records: list[Record]) -> dict:
    if not records:
        return {"type": "vector_bulk_delete_result", "data": {"collection": coll.name,
                                                               "effect": dict(EFFECT_NOT_FOUND)}}
    tx = _delete_records(e, b, view, space, coll, records)
    return {"type": "vector_bulk_delete_result", "data": {
        "collection": coll.name, "effect": {**EFFECT_DELETED, "affected_count": len(records)},
        "commit": e.receipt(tx, 0, len(records))}}


@handler("vector_delete_by_filter")
def vector_delete_by_filter(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    # An empty filter is refused once the branch is found, before the space and collection are.
    conditions = a["filter"]
    if not conditions:
        raise StrataError("invalid_argument.engine.vector_filter",
                          "vector metadata filter must not be empty for filtered delete")
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    records = [r for r in _records(e, view, space, coll) if _matches(r.metadata, conditions)]
    return _bulk_delete(e, b, view, space, coll, records)


@handler("vector_delete_all")
def vector_delete_all(e: Engine, a: dict) -> dict:
    b, space = e.scope(a)
    view = e.store.view(b)
    coll = require_collection(e, view, space, a["collection"])
    return _bulk_delete(e, b, view, space, coll, list(_records(e, view, space, coll)))


# What the engine's index planner reports; this server always searches exactly
# (every visible vector is scored), which is what the engine does below its
# exact threshold and, with no index manifest built, above it.
EXACT_THRESHOLD = 64
U64_MAX = 2**64 - 1


def _diagnostics(coll: Collection, k: int) -> dict:
    # With k 0 the engine plans no search: it reads no manifest and takes no candidates.
    if k == 0:
        return {**_diagnostics(coll, 1), "manifest_status": "not_checked", "source_candidate_limit": 0,
                "last_query_fallback_reason": "collection_below_exact_threshold"}
    return {
        "collection": coll.name, "manifest_status": "missing", "manifest_ref_count": 0,
        "manifest_inherited_ref_count": 0, "manifest_owned_ref_count": 0, "active_delta_count": 0,
        "policy_mode": "auto", "collection_exact_threshold": EXACT_THRESHOLD,
        "source_flat_threshold": EXACT_THRESHOLD, "source_hnsw_threshold": U64_MAX, "overfetch_factor": 4,
        "filtered_underfill_fallback": True, "active_delta_seal_threshold": 16,
        "hnsw_memory_budget_bytes": 64 * 1024 * 1024, "source_candidate_limit": U64_MAX,
        "resolved_index_kind_summary": "exact", "exact_fallback_count": 0, "hnsw_graph_builds": 0,
        "indexed_source_count": 0, "exact_source_count": 1, "flat_source_count": 0, "hnsw_source_count": 0,
        "active_delta_source_count": 0, "indexed_vector_count": 0, "derived_bytes": 0,
        "last_query_used_index": False,
        "last_query_fallback_reason": ("collection_below_exact_threshold" if coll.count < EXACT_THRESHOLD
                                       else "missing"),
        "artifact_sources": []}


@handler("vector_index_query")
def vector_index_query(e: Engine, a: dict) -> dict:
    # Its query is judged, then the filter's fields, before an as_of conflict and the scope.
    check_name(names.VECTOR_COLLECTION, a["collection"])
    values = a.get("query") or []
    _f32(values)
    if not 1 <= len(values) <= MAX_DIMENSION:
        raise StrataError("invalid_argument.engine.vector_embedding",
                          "vector embedding dimension is outside the supported range")
    check_filter_fields(a.get("filter"))
    matches = vector_query(e, {**a, "text": None})["data"]
    b, space = e.scope(a)
    coll = require_collection(e, e.read_view(b, a), space, a["collection"])
    return {"type": "vector_index_query", "data": {"matches": matches, "diagnostics": _diagnostics(coll, a["k"])}}
