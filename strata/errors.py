"""Strata's error model: typed failures and the status object clients read.

A failure carries a ``code`` (``<class>.<area>.<detail>``) and a message; the
rest of the status (retry policy, commit outcome, the per-code suggested fix,
the docs link, a per-database reference id) follows from the code, as the
real engine's statuses do.  Codes the real engine has keep its texts; the
codes this server adds are under the ``server`` area (see docs/strata.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DOCS = "https://stratadb.org/e/"

_FIX_BRANCH = "Use a non-empty branch name that does not use reserved prefixes or invalid characters."
_FIX_SPACE = "Use an existing non-reserved space, or delete/move contained data before deleting the space."
_FIX_JSON_PATH = "Use a valid JSON path that points to an existing value of the expected type."
_FIX_JSON_DOC = "Use a valid JSON document id and a JSON value within the configured size and depth limits."
_FIX_VECTOR = "Use the collection dimension, valid vector keys, and metadata/filter values supported by the collection."
_FIX_GRAPH = "Use valid graph, node, edge, and binding identifiers and keep graph properties within limits."
_FIX_EVENT = "Use a valid event type, payload, and metadata within the documented event limits."
_FIX_JSON_INDEX = "Use a non-reserved JSON index name and definition compatible with the indexed field."
_FIX_FIELD = "Correct the invalid field named by the error message and retry the operation."

# code -> (retry_policy, commit_outcome, suggested_fix)
_CODES: dict[str, tuple[str, str, str]] = {
    "invalid_argument.engine.kv_key": (
        "never", "not_started", "Use non-empty KV keys and keep batch structure within the documented limits."),
    "invalid_argument.engine.persistence": ("never", "not_started", _FIX_FIELD),
    "history_unavailable.engine.persistence_history": (
        "after_state_change", "not_applicable", "Request history inside the retained window."),
    "not_found.engine.branch": (
        "never", "not_applicable", "List branches or use the default branch, then retry with an existing branch name."),
    "already_exists.engine.branch": (
        "never", "not_started", "Choose a different branch name or delete the existing branch first."),
    "invalid_argument.engine.branch_name": ("never", "not_started", _FIX_BRANCH),
    "invalid_argument.engine.branch_name_reserved": ("never", "not_started", _FIX_BRANCH),
    "invalid_argument.engine.branch_delete": ("never", "not_started", _FIX_FIELD),
    "invalid_argument.engine.product_space": ("never", "not_started", _FIX_SPACE),
    "invalid_argument.engine.product_space_reserved": ("never", "not_started", _FIX_SPACE),
    "invalid_argument.engine.json_document_id": ("never", "not_started", _FIX_JSON_DOC),
    "invalid_argument.engine.json_document_too_deep": ("never", "not_started", _FIX_JSON_DOC),
    "invalid_argument.engine.json_document_too_large": ("never", "not_started", _FIX_JSON_DOC),
    # the engine's fix for an oversized array is its generic one, not the JSON document one
    "invalid_argument.engine.json_array_too_large": ("never", "not_started", _FIX_FIELD),
    "invalid_argument.engine.event_payload_too_large": ("never", "not_started", _FIX_EVENT),
    "invalid_argument.engine.vector_metadata_too_large": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.graph_properties_too_large": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.json_path": ("never", "not_started", _FIX_JSON_PATH),
    "invalid_argument.engine.json_path_type": ("never", "not_started", _FIX_JSON_PATH),
    "invalid_argument.engine.json_path_not_found": ("never", "not_started", _FIX_JSON_PATH),
    "invalid_argument.executor.json_number": (
        "never", "not_started", "Use an integer within the i64/u64 range, or encode the value as a string."),
    "invalid_argument.executor.as_of_conflict": (
        "never", "not_started",
        "Pass a commit timestamp (as_of) or a wall-clock instant (as_of_time), not both."),
    "already_exists.engine.vector_collection": (
        "never", "not_started", "Use the existing collection, or choose a different collection name."),
    "invalid_argument.engine.vector_dimension": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_collection": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_key": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_collection_reserved": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_metadata": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_embedding": ("never", "not_started", _FIX_VECTOR),
    "failed_precondition.engine.vector_collection_not_empty": ("never", "not_started", _FIX_VECTOR),
    "not_found.engine.vector_collection": (
        "never", "not_applicable",
        "List vector collections or create the collection before issuing vector operations."),
    "invalid_argument.executor.vector_input": (
        "never", "not_started",
        "Pass exactly one: an explicit vector, or a text to embed with the collection's recorded model."),
    "failed_precondition.engine.embedding_model_missing": (
        "never", "not_started",
        "Declare the collection's model with `vector collection set-embedding-model <collection> <model>`, "
        "or pass a vector instead of text."),
    "invalid_argument.engine.event_payload": ("never", "not_started", _FIX_EVENT),
    "invalid_argument.engine.event_type": ("never", "not_started", _FIX_EVENT),
    "already_exists.engine.graph": (
        "never", "not_started", "Choose a different graph name or delete the existing graph first."),
    "invalid_argument.engine.graph_name": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.graph_name_reserved": ("never", "not_started", _FIX_GRAPH),
    "not_found.engine.graph": ("never", "not_applicable", "List graphs, then retry with an existing graph name."),
    "invalid_argument.engine.graph_node_id": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.graph_properties": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.graph_edge_endpoint": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.graph_edge_type": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.graph_cursor": ("never", "not_started", _FIX_GRAPH),
    "failed_precondition.engine.graph_not_empty": ("never", "not_started", _FIX_GRAPH),
    # The batch, index, space-deletion and admin commands (issue 23).
    "invalid_argument.executor.kv_batch_duplicate_key": (
        "never", "not_started", "Remove duplicate keys so each KV batch item targets a unique key."),
    "invalid_argument.executor.json_batch_duplicate_key": (
        "never", "not_started", "Remove duplicates so each JSON batch item targets a unique document and path."),
    "invalid_argument.executor.vector_batch_duplicate_key": (
        "never", "not_started", "Remove duplicate keys so each vector batch item targets a unique key."),
    "invalid_argument.executor.vector_dimension": (
        "never", "not_started", "Use embeddings whose length matches the vector collection dimension."),
    "invalid_argument.engine.vector_metadata_patch": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_filter": ("never", "not_started", _FIX_VECTOR),
    "invalid_argument.engine.vector_metadata_field": ("never", "not_started", _FIX_VECTOR),
    "already_exists.engine.json_index": (
        "never", "not_started", "Drop the existing index or choose a different index name."),
    "invalid_argument.engine.json_index_name": ("never", "not_started", _FIX_JSON_INDEX),
    "invalid_argument.engine.json_index_name_reserved": ("never", "not_started", _FIX_JSON_INDEX),
    "invalid_argument.engine.space_delete_default": ("never", "not_started", _FIX_SPACE),
    "failed_precondition.engine.space_not_empty": ("never", "not_started", _FIX_SPACE),
    "unsupported.engine.persistence_capability": (
        "after_state_change", "not_applicable",
        "Open the database with a backend that supports the requested persistence capability."),
    # Codes of this server (not in the real engine's registry).
    "unsupported.server.command": (
        "never", "not_started",
        "Use one of the commands this server supports (strata_guide lists them), or the real Strata engine."),
    "unsupported.server.argument": (
        "never", "not_started", "Leave the argument out; this server does not implement it."),
    "internal.server.storage": (
        "after_state_change", "unknown",
        "Check the database folder (free disk space, permissions) and retry; nothing was applied "
        "unless a later read shows it."),
}

# The graph analytics, ontology, graph batch and merge commands (issue 23).
_CODES.update({
    "not_found.engine.graph_node": (
        "never", "not_applicable", "List the graph's nodes, then retry with an existing node id."),
    "resource_exhausted.engine.graph_analytics_budget": (
        "after_state_change", "not_applicable",
        "Lower the graph analytics workload (fewer nodes, lower iteration count) or raise the configured analytics budget."),
    "invalid_argument.engine.graph_pagerank_options": ("never", "not_started", _FIX_GRAPH),
    "invalid_argument.engine.graph_personalization": ("never", "not_started", _FIX_GRAPH),
    "failed_precondition.engine.graph_negative_weight": ("never", "not_started", _FIX_GRAPH),
})

# Graph ontologies and entity bindings, and branch promotion (issue 23).
_CODES.update({
    "unsupported.engine.graph_binding_cross_branch": (
        "never", "not_applicable",
        "Bind graph relationships to targets on the node's own branch; cross-branch bindings are not supported in V1."),
    **{code: ("never", "not_started", _FIX_GRAPH) for code in (
        "invalid_argument.engine.graph_binding", "invalid_argument.engine.graph_type_name",
        "invalid_argument.engine.graph_type_name_reserved", "invalid_argument.engine.graph_property_name",
        "invalid_argument.engine.graph_edge_type_reserved",
        "invalid_argument.engine.graph_type_hint", "failed_precondition.engine.graph_ontology_freeze",
        "failed_precondition.engine.graph_ontology_frozen", "failed_precondition.engine.graph_ontology_node_type",
        "failed_precondition.engine.graph_ontology_required_property",
        "failed_precondition.engine.graph_ontology_edge_type",
        "failed_precondition.engine.graph_ontology_endpoint_type")},
    "invalid_argument.engine.branch_point": ("never", "not_started", _FIX_FIELD),
    "conflict.engine.promotion": (
        "after_state_change", "not_started",
        "Reload current state and retry against the latest branch, space, or collection version."),
})

NON_RETRYABLE = ("never", "unknown")
# Codes of this server point at its own documentation (docs/strata.md in MemStrata), not at stratadb.org.
SERVER_DOCS = "docs/strata.md#errors"


@dataclass(slots=True)
class StrataError(Exception):
    """A domain failure: the engine's ``{"error": status}`` answer."""

    code: str
    message: str
    details: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def status(self, reference_id: str) -> dict:
        retry_policy, commit_outcome, fix = _CODES[self.code]
        status = {
            "class": self.code.split(".", 1)[0],
            "code": self.code,
            "retry_policy": retry_policy,
            "retryable": retry_policy not in NON_RETRYABLE,
            "commit_outcome": commit_outcome,
            "message": self.message,
            "suggested_fix": fix,
            "docs_url": SERVER_DOCS if ".server." in self.code else DOCS + self.code,
            "reference_id": reference_id,
        }
        if self.details:
            status["details"] = [{"key": k, "value": v} for k, v in self.details]
        return status


# The engine's length limits on names and ids (its own words and details; names.py holds its rules).


def check_length(code: str, what: str, text: str, limit: int, verb: str = "exceeds the maximum length") -> None:
    """``code`` when ``text`` is longer than ``limit`` bytes: "<what> <verb> (N bytes; the limit is L)"."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise StrataError(code, f"{what} {verb} ({size} bytes; the limit is {limit})",
                          [("actual_bytes", str(size)), ("limit_bytes", str(limit))])


def known_codes() -> list[str]:
    return sorted(_CODES)


# -- constructors for the failures several commands share ------------------------------


def history(reason: str) -> StrataError:
    return StrataError("history_unavailable.engine.persistence_history",
                       "requested persistence history is unavailable", [("reason", reason)])


def branch_missing(name: str, *, source: bool = False) -> StrataError:
    prefix = "source branch" if source else "branch"
    return StrataError("not_found.engine.branch", f"{prefix} `{name}` does not exist")


def unsupported_command(wire: str) -> StrataError:
    return StrataError("unsupported.server.command",
                       f"`{wire}` is a Strata command this server does not implement")
