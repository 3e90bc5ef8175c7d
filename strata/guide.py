"""The markdown usage guide ``strata_guide`` returns, generated from what this server runs."""

from __future__ import annotations

from functools import lru_cache

from memstrata import __version__

from .catalog import FAMILY, WIRE_TYPES
from .errors import known_codes
from .wire import SPECS

SUMMARIES = {
    "ping": "check the database answers (data.version is the engine version it answers as, as in info)",
    "kv_put": "store a value under a key", "kv_get": "read a key (now or as_of)",
    "kv_delete": "delete a key", "kv_exists": "whether a key is live", "kv_history": "every retained version of a key",
    "kv_list": "keys in byte order, optionally under a prefix, paged by cursor (the last key returned)",
    "kv_count": "how many keys (under a prefix)",
    "kv_scan": "keys with values from `start` (inclusive); the cursor is the next key to read",
    "json_set": "set the value at a path, creating the document", "json_get": "read the value at a path",
    "json_delete": "delete the value at a path (`$`: the document)", "json_exists": "whether a document exists",
    "json_list": "document ids, paged", "json_count": "how many documents", "json_history": "every retained revision",
    "vector_create_collection": "create a collection (dimension 1..32768; cosine, euclidean, dot_product)",
    "vector_upsert": "insert or replace a vector", "vector_query": "the k most similar vectors, with a metadata filter",
    "vector_get": "read one vector", "vector_delete": "delete one vector", "vector_exists": "whether a vector is live",
    "vector_count": "how many vectors", "vector_list_collections": "the collections with their counts",
    "vector_delete_collection": "delete a collection (force: even when it holds vectors)",
    "event_append": "append an event", "event_list": "events in order (cursor: the last sequence returned)",
    "event_get": "one event by sequence", "event_count": "how many events",
    "event_verify_chain": "recompute the hash chain",
    "graph_create": "create a graph", "graph_delete": "delete a graph (force: even when it holds nodes)",
    "graph_list": "graph names", "graph_get_meta": "counts and versions of a graph",
    "graph_add_node": "add or replace a node", "graph_get_node": "read a node",
    "graph_remove_node": "remove a node and its edges", "graph_add_edge": "add or replace an edge",
    "graph_get_edge": "read an edge", "graph_remove_edge": "remove an edge",
    "graph_neighbors": "a node's neighbours with their edges, paged",
    "branch_list": "the active branches", "branch_get": "one branch", "branch_create": "a new empty branch",
    "branch_delete": "delete a branch (not `default`)", "branch_fork_current": "fork at the source's head",
    "branch_fork_at_version": "fork at a retained commit version",
    "branch_fork_at_timestamp": "fork at the newest commit at or before a commit timestamp",
    "space_list": "the spaces of a branch", "space_exists": "whether a space exists",
    "space_create": "create a space (spaces are also created by their first write)",
}

SUMMARIES.update({
    "info": "what this database is: target, durability, branch and space counts, memory budget",
    "health": "whether the catalog and registry answer", "metrics": "target, durability and counts",
    "storage": "the storage footprint of a durable database (audit: the full accounting)",
    "describe": "branches, spaces and what a branch and space hold", "config_get": "the open configuration",
    "space_delete": "delete a space (force: even when it holds data; not `default`)",
    "kv_batch_put": "put many keys in one commit (itemwise results)", "kv_batch_get": "read many keys",
    "kv_batch_delete": "delete many keys in one commit", "kv_batch_exists": "whether each key is live",
    "kv_sample": "`count` (10) keys spread evenly over the keyspace, with the total",
    "json_batch_set": "set many paths in one commit (path type errors refuse the batch)",
    "json_batch_get": "read many paths (now or as_of)", "json_batch_delete": "delete many paths in one commit",
    "json_batch_exists": "whether each document exists",
    "json_scan": "documents with values from `start` (inclusive); the cursor is the next id",
    "json_sample": "`count` (10) documents spread evenly, with the total",
    "json_create_index": "define a numeric, tag or text index on a field path",
    "json_drop_index": "drop an index definition", "json_list_indexes": "the index definitions of a space",
    "vector_collection_stats": "one collection with its count", "vector_sample": "`count` (10) vectors spread evenly",
    "vector_history": "every retained version of a vector", "vector_batch_exists": "whether each vector is live",
    "vector_list_keys": "vector keys, paged (cursor: the last key returned)",
    "vector_scan": "vectors from `start` (inclusive); the cursor is the next key",
    "vector_update_metadata": "merge fields into a vector's metadata", "vector_update_embedding": "replace an embedding",
    "vector_delete_by_filter": "delete the vectors a metadata filter matches",
    "vector_delete_all": "delete every vector of a collection", "vector_index_query": "vector_query with planner diagnostics",
    "vector_batch_upsert": "upsert many vectors in one commit", "vector_batch_get": "read many vectors",
    "vector_batch_delete": "delete many vectors in one commit",
    "event_batch_append": "append many events in one commit", "event_exists": "whether a sequence exists",
    "event_range": "events in [start_seq, end_seq), forward or reverse",
    "event_range_by_time": "events in [start_ts, end_ts) by event time", "event_list_types": "the event types used",
})

# Branch comparison and promotion, graph pages, analytics and ontologies.
SUMMARIES.update({
    "branch_diff": "the entities that differ from `branch_a` to `branch_b` (every primitive; at_timestamp)",
    "branch_preview": "the conflicts promoting `source` into `target` would hit (changes nothing)",
    "branch_merge": "promote `source`'s changes since the branch point into `target` in one commit "
                    "(strategy `strict` refuses conflicts, `source_wins` takes the source's side)",
    "graph_list_nodes": "nodes in id order with their payloads, paged (prefix filter; limit 100)",
    "graph_sample": "`count` (10) nodes spread evenly over the ids, with the total",
    "graph_bindings_for_entity": "the nodes of every graph bound to an entity (primitive, space, key), paged",
    "graph_batch_write": "node and edge writes and removals in one atomic commit (all checked first)",
    "graph_bulk_insert": "load nodes then edges, one commit per `chunk_size` (512) rows",
    "graph_define_object_type": "define or replace an object type while the ontology is a draft",
    "graph_define_link_type": "define or replace a link type (source and target object types) while a draft",
    "graph_delete_object_type": "delete a draft object type", "graph_delete_link_type": "delete a draft link type",
    "graph_freeze_ontology": "freeze the ontology: node and edge writes are then checked against it",
    "graph_get_ontology": "the ontology's status and type definitions",
    "graph_ontology_summary": "the ontology with how many nodes and edges use each type",
    "graph_nodes_by_type": "nodes declaring an object type, paged",
    "graph_apply_delete_policy": "apply `cascade`, `detach` or `keep_dangling` to the nodes bound to an entity",
    "graph_bfs": "breadth-first traversal from `start` (max_depth 100, max_nodes 10,000)",
    "graph_sssp": "shortest-path distances from `source` (Dijkstra; negative weights refused)",
    "graph_wcc": "weakly connected components (named by their smallest node id)",
    "graph_lcc": "local clustering coefficient of each node",
    "graph_pagerank": "PageRank scores (damping 0.85, 20 iterations, tolerance 1e-6; personalization)",
    "graph_cdlp": "communities by label propagation (10 iterations, both directions)",
})

_INTRO = """\
# Strata (MemStrata {version}): agent usage guide

This server speaks Strata's MCP surface on MemStrata's embedded store: KV
pairs, JSON documents, vectors, events and graphs, on branches with time
travel. Tools answer with the same JSON envelopes and error codes as
Strata's own engine.

## Targeting a database

- `strata ./my-db mcp serve` or `strata --db ./my-db mcp serve`: a durable
  database in the folder `./my-db` (created when missing).
- `STRATA_DB=./my-db strata mcp serve`: the same, path from the environment.
- `strata --cache mcp serve`: an in-memory database, gone when the server exits.
- `--branch NAME` before `mcp serve`: tools that name no branch use `NAME` (it must exist).

Several servers may serve one durable database at once (two agent hosts
configured with the same path): one commit clock, each sees the others'
commits on its next command, and commands take turns.

## Scope

Data tools take optional `branch` (default: the session branch, `default`
unless the server was started with `--branch NAME`) and `space` (default
`default`). A space is created by its first write; spaces are fully
isolated. Names starting with `_` are reserved.

## Output contract

A tool result is one text item holding a JSON envelope:

- success: `{{"type": ..., "data": ...}}`, `isError: false`;
- an engine failure: `{{"error": {{"class", "code", "retry_policy", "retryable",
  "commit_outcome", "message", "suggested_fix", "docs_url", "reference_id"}}}}`,
  `isError: true`;
- arguments the command decoder refuses: the sentence
  ``invalid arguments for `TOOL`: <reason>``, `isError: true`.

Every write answers with a commit receipt `data.commit`: `version` and
`timestamp` (the same commit-clock value), `committed_at` (UTC µs),
`durability`, `put_count`, `delete_count`. Reads take `as_of` (a commit
timestamp from a receipt) and read the state right after that commit.
A no-op delete answers `effect.kind: "not_found"` and no receipt. A miss
answers `{{"found": false, "value": null}}`.

Byte fields are base64 on the wire: KV keys, values and the `strata_kv_list`
cursor. The `strata_kv_*` tools take text and encode it for you.

## Defaults

`strata_vector_create_collection` metric `cosine`, `strata_vector_query` k
`10`, `strata_graph_neighbors` direction `outgoing` (limit 100).

## Errors

Codes this server produces:

{codes}

`history_unavailable` means the `as_of` or fork anchor is outside what the
branch retains (0, or beyond its latest commit). Codes under `server` are
this server's own: `unsupported.server.command` for a cataloged command it
does not run, `unsupported.server.argument` for an argument it does not
implement, `internal.server.storage` when the disk refused a commit or
another server held the database for over 30 s (nothing applied).

## Command catalog (strata_command)

Supported commands, with their fields (`*` required):

{supported}

Cataloged but not supported here (answered with `unsupported.server.command`):

{unsupported}
"""


def _fields(wire: str) -> str:
    fields = SPECS[wire].fields
    return ", ".join(f"`{f.name}`{'*' if f.required else ''}" for f in fields) or "no fields"


@lru_cache(maxsize=1)
def guide_markdown() -> str:
    supported, unsupported = [], []
    families: dict[str, list[str]] = {}
    for wire in WIRE_TYPES:
        families.setdefault(FAMILY[wire], []).append(wire)
    for family, wires in families.items():
        ours = [w for w in wires if w in SPECS]
        if ours:
            supported.append(f"### {family}\n")
            supported += [f"- `{w}` ({_fields(w)}): {SUMMARIES.get(w, FAMILY[w] + ' command')}" for w in ours]
            supported.append("")
        rest = [w for w in wires if w not in SPECS]
        if rest:
            unsupported.append(f"- {family}: " + ", ".join(f"`{w}`" for w in rest))
    return _INTRO.format(
        version=__version__,
        codes="\n".join(f"- `{c}`" for c in known_codes()),
        supported="\n".join(supported).rstrip(),
        unsupported="\n".join(unsupported),
    )
