"""The Strata command catalog: every wire command type the engine knows.

Names and families as the stratadb 1.2.7 catalog lists them, in the order
the engine's deserializer names them ("expected one of ..."). Which of them
this server runs is :data:`memstrata.strata.commands.HANDLERS`.
"""

WIRE_TYPES: tuple[str, ...] = (
    "ping", "info", "health", "metrics", "storage", "describe", "config_get", "ipc_status",
    "ipc_stop", "remote_get", "hub_clone", "hub_info", "hub_list_datasets", "hub_get_dataset",
    "hub_list_refs", "hub_list_yanked", "configure_get_key", "space_list", "space_create",
    "space_exists", "space_delete", "branch_list", "branch_get", "branch_diff", "branch_create",
    "branch_fork_current", "branch_fork_at_version", "branch_fork_at_timestamp", "branch_delete",
    "branch_merge", "branch_preview", "kv_put", "kv_get", "kv_delete", "kv_list", "kv_scan",
    "kv_batch_put", "kv_batch_get", "kv_batch_delete", "kv_batch_exists", "kv_exists", "kv_history",
    "kv_count", "kv_sample", "json_set", "json_get", "json_delete", "json_history", "json_exists",
    "json_batch_exists", "json_batch_set", "json_batch_get", "json_batch_delete", "json_list",
    "json_scan", "json_count", "json_sample", "json_create_index", "json_drop_index",
    "json_list_indexes", "vector_create_collection", "vector_delete_collection",
    "vector_list_collections", "vector_collection_stats", "vector_set_embedding_model",
    "vector_count", "vector_sample", "vector_upsert", "vector_get", "vector_history",
    "vector_exists", "vector_batch_exists", "vector_list_keys", "vector_scan",
    "vector_update_metadata", "vector_update_embedding", "vector_delete", "vector_delete_by_filter",
    "vector_delete_all", "vector_query", "vector_index_query", "vector_batch_upsert",
    "vector_batch_get", "vector_batch_delete", "event_batch_append", "event_append", "event_get",
    "event_exists", "event_count", "event_range", "event_range_by_time", "event_list_types",
    "event_list", "event_verify_chain", "graph_create", "graph_delete", "graph_list",
    "graph_get_meta", "graph_add_node", "graph_get_node", "graph_remove_node", "graph_list_nodes",
    "graph_sample", "graph_add_edge", "graph_get_edge", "graph_remove_edge", "graph_neighbors",
    "graph_bindings_for_entity", "graph_batch_write", "graph_define_object_type",
    "graph_define_link_type", "graph_delete_object_type", "graph_delete_link_type",
    "graph_freeze_ontology", "graph_get_ontology", "graph_ontology_summary", "graph_nodes_by_type",
    "graph_wcc", "graph_lcc", "graph_sssp", "graph_pagerank", "graph_cdlp", "graph_bfs",
    "graph_bulk_insert", "graph_apply_delete_policy", "arrow_import", "arrow_export",
    "inference_models_list", "inference_models_local", "inference_models_pull",
    "inference_model_capability", "inference_generate", "inference_tokenize",
    "inference_detokenize", "inference_embed", "inference_rank", "inference_unload",
    "inference_cache_status", "inference_status",
)

FAMILY: dict[str, str] = {
    **dict.fromkeys((
        "ping", "info", "health", "metrics", "storage", "describe", "config_get", "ipc_status",
        "ipc_stop", "remote_get", "hub_clone", "configure_get_key",
    ), "admin"),
    **dict.fromkeys((
        "arrow_import", "arrow_export",
    ), "arrow"),
    **dict.fromkeys((
        "branch_list", "branch_get", "branch_diff", "branch_create", "branch_fork_current",
        "branch_fork_at_version", "branch_fork_at_timestamp", "branch_delete", "branch_merge",
        "branch_preview",
    ), "branch"),
    **dict.fromkeys((
        "event_batch_append", "event_append", "event_get", "event_exists", "event_count",
        "event_range", "event_range_by_time", "event_list_types", "event_list",
        "event_verify_chain",
    ), "event"),
    **dict.fromkeys((
        "graph_create", "graph_delete", "graph_list", "graph_get_meta", "graph_add_node",
        "graph_get_node", "graph_remove_node", "graph_list_nodes", "graph_sample", "graph_add_edge",
        "graph_get_edge", "graph_remove_edge", "graph_neighbors", "graph_bindings_for_entity",
        "graph_batch_write", "graph_define_object_type", "graph_define_link_type",
        "graph_delete_object_type", "graph_delete_link_type", "graph_freeze_ontology",
        "graph_get_ontology", "graph_ontology_summary", "graph_nodes_by_type", "graph_wcc",
        "graph_lcc", "graph_sssp", "graph_pagerank", "graph_cdlp", "graph_bfs", "graph_bulk_insert",
        "graph_apply_delete_policy",
    ), "graph"),
    **dict.fromkeys((
        "hub_info", "hub_list_datasets", "hub_get_dataset", "hub_list_refs", "hub_list_yanked",
    ), "hub"),
    **dict.fromkeys((
        "inference_models_list", "inference_models_local", "inference_models_pull",
        "inference_model_capability", "inference_generate", "inference_tokenize",
        "inference_detokenize", "inference_embed", "inference_rank", "inference_unload",
        "inference_cache_status", "inference_status",
    ), "inference"),
    **dict.fromkeys((
        "json_set", "json_get", "json_delete", "json_history", "json_exists", "json_batch_exists",
        "json_batch_set", "json_batch_get", "json_batch_delete", "json_list", "json_scan",
        "json_count", "json_sample", "json_create_index", "json_drop_index", "json_list_indexes",
    ), "json"),
    **dict.fromkeys((
        "kv_put", "kv_get", "kv_delete", "kv_list", "kv_scan", "kv_batch_put", "kv_batch_get",
        "kv_batch_delete", "kv_batch_exists", "kv_exists", "kv_history", "kv_count", "kv_sample",
    ), "kv"),
    **dict.fromkeys((
        "space_list", "space_create", "space_exists", "space_delete",
    ), "space"),
    **dict.fromkeys((
        "vector_create_collection", "vector_delete_collection", "vector_list_collections",
        "vector_collection_stats", "vector_set_embedding_model", "vector_count", "vector_sample",
        "vector_upsert", "vector_get", "vector_history", "vector_exists", "vector_batch_exists",
        "vector_list_keys", "vector_scan", "vector_update_metadata", "vector_update_embedding",
        "vector_delete", "vector_delete_by_filter", "vector_delete_all", "vector_query",
        "vector_index_query", "vector_batch_upsert", "vector_batch_get", "vector_batch_delete",
    ), "vector"),
}
