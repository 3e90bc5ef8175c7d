"""The versioned store under the Strata server: forks share history, reopen keeps everything."""

from __future__ import annotations

import json

from memstrata.strata.mcp import StrataServer
from memstrata.strata.engine import Engine
from memstrata.strata.schema import STRATA_SCHEMA
from memstrata.strata.store import StrataStore


def _rows(store: StrataStore) -> int:
    return store.store.execute("SELECT count(*) FROM strata_entries")[0][0]


def test_a_fork_copies_no_rows_and_reads_its_parents_history(tmp_path):
    store = StrataStore.open(tmp_path / "db")
    server = StrataServer(Engine(store))
    for i in range(500):
        server.call_tool("strata_kv_put", {"key": f"k{i}", "value": str(i)})
    server.call_tool("strata_vector_create_collection", {"collection": "c", "dimension": 2})
    server.call_tool("strata_vector_upsert", {"collection": "c", "key": "a", "vector": [1, 0]})
    before = _rows(store)
    text, _ = server.call_tool("strata_branch_fork", {"source": "default", "branch": "f"})
    assert json.loads(text)["data"]["parent"]["name"] == "default"
    assert _rows(store) == before  # nothing copied
    server.call_tool("strata_kv_put", {"key": "k1", "value": "changed", "branch": "f"})
    server.call_tool("strata_kv_delete", {"key": "k2", "branch": "f"})
    assert _rows(store) == before + 2
    listing = json.loads(server.call_tool("strata_kv_list", {"branch": "f"})[0])["data"]["items"]
    assert len(listing) == 499
    assert json.loads(server.call_tool("strata_kv_get", {"key": "k2"})[0])["data"]["found"] is True
    assert json.loads(server.call_tool("strata_vector_query", {"collection": "c", "query": [1, 0],
                                                               "branch": "f"})[0])["data"][0]["key"] == "a"
    store.close()


def test_reopen_keeps_commits_branches_and_the_clock(tmp_path):
    store = StrataStore.open(tmp_path / "db")
    server = StrataServer(Engine(store))
    server.call_tool("strata_kv_put", {"key": "k", "value": "v1"})
    server.call_tool("strata_branch_fork", {"source": "default", "branch": "f"})
    receipt = json.loads(server.call_tool("strata_kv_put", {"key": "k", "value": "v2"})[0])["data"]["commit"]
    store.close()

    store = StrataStore.open(tmp_path / "db")
    assert store.store.user_version == STRATA_SCHEMA.version
    server = StrataServer(Engine(store))
    assert json.loads(server.call_tool("strata_kv_get", {"key": "k", "branch": "f"})[0])["data"]["value"]["value"] == "djE="
    later = json.loads(server.call_tool("strata_kv_put", {"key": "k", "value": "v3"})[0])["data"]["commit"]
    assert later["version"] == receipt["version"] + 1 and later["committed_at"] > receipt["committed_at"]
    old = json.loads(server.call_tool("strata_kv_get", {"key": "k", "as_of": receipt["timestamp"]})[0])
    assert old["data"]["value"]["value"] == "djI="
    store.close()
