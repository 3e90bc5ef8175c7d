"""A detached reader whose connection the server drops answers its next
question on a new connection, whichever read comes first."""

from __future__ import annotations

import pytest
from memstrata.compressor import context_query, navigation
from memstrata.indexer.project import StoreChoice
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

from ..shared_store_helpers import dbname

NAME = "reconnecting"
LOGIN = "AuthService.login and its callers"

FIRST_READS = {
    "context_query": lambda ws: context_query(ws, LOGIN, max_tokens=1024).api_fields(),
    "status": lambda ws: ws.status().as_dict(),
    "search_symbols": lambda ws: ci.search_symbols(ws.store, ["login", "password"]),
    "find_symbol": lambda ws: navigation.find_symbol(ws, "login", include_body=True),
    "file_outline": lambda ws: navigation.file_outline(ws, "app/auth/service.py"),
    "files_indexed": lambda ws: ws.files_indexed(),
}


@pytest.fixture
def indexed(project_copy, pg_url):
    root = project_copy("python_project")
    with Workspace.open(root, workers=1, store=StoreChoice(pg_url, NAME)) as ws:
        ws.index()
    return root


@pytest.mark.parametrize("first", sorted(FIRST_READS))
def test_reader_reconnects_after_the_server_drops_it(indexed, pg_url, pg_cluster, first):
    with Workspace.open_shared(StoreChoice(pg_url, NAME), indexed) as ws:
        expected = {name: read(ws) for name, read in FIRST_READS.items()}
        assert expected["files_indexed"] == 10 and expected["search_symbols"]
        assert pg_cluster.kill_backends(dbname(pg_url)) == 1
        assert FIRST_READS[first](ws) == expected[first]
        assert {name: read(ws) for name, read in FIRST_READS.items()} == expected


def test_reader_survives_a_server_restart(indexed, pg_url, pg_cluster):
    with Workspace.open_shared(StoreChoice(pg_url, NAME), indexed) as ws:
        before = context_query(ws, LOGIN).api_fields()
        pg_cluster.restart("fast")
        assert context_query(ws, LOGIN).api_fields() == before
