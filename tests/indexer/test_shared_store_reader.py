"""A shared index is read without its checkout: the file texts and the graph
snapshot are in the store, so deleting the checkout changes no answer."""

from __future__ import annotations

import json
import shutil

import pytest
from memstrata.indexer import graph_snapshot
from memstrata.indexer.graph_snapshot import SnapshotGraph
from memstrata.indexer.project import StoreChoice
from memstrata.indexer.workspace import Workspace

from ..shared_store_helpers import dbname, derived_names, pg_cli_env

NAME = "team_python"
READS = (
    ("query", "AuthService.login and its callers", "--max-tokens", "2048"),
    ("query", "how are passwords hashed", "--max-tokens", "512", "--include-tests"),
    ("status",),
    ("symbol", "login", "--body"),
    ("symbol", "app/auth/service.py::AuthService.login", "--body"),
    ("refs", "AuthService.login"),
    ("outline", "app/auth/service.py"),
)


def read_all(run_cli, url: str, cwd, environment) -> dict[tuple, str]:
    out = {}
    for args in READS:
        proc = run_cli(*args, "--store", url, "--project-name", NAME, "--json", cwd=cwd, env=environment)
        assert proc.stdout.strip(), args
        out[args] = proc.stdout
    return out


def test_cli_reads_the_same_answers_after_the_checkout_is_deleted(project_copy, run_cli, pg_url, pg_cluster,
                                                                  tmp_path, cli_env):
    environment = pg_cli_env(cli_env)
    root = project_copy("python_project")
    run_cli("index", str(root), "--store", pg_url, "--project-name", NAME, env=environment)
    assert not (root / ".memstrata").exists(), "a shared-store run must not write a local index"
    # The writer stored the graph snapshot beside the rows, for readers that cannot build and save one.
    assert graph_snapshot.SNAPSHOT_FILE in derived_names(pg_cluster, dbname(pg_url), NAME)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = read_all(run_cli, pg_url, elsewhere, environment)
    assert "def login" in json.loads(before[READS[0]])["context"]
    assert json.loads(before[("status",)])["status"] == "ready"
    assert json.loads(before[READS[5]])["references"], "refs found no use of AuthService.login"

    shutil.rmtree(root)
    after = read_all(run_cli, pg_url, elsewhere, environment)
    assert after == before
    assert not root.exists()


def test_reader_starts_from_the_stored_snapshot(project_copy, run_cli, pg_url, tmp_path, cli_env):
    root = project_copy("python_project")
    run_cli("index", str(root), "--store", pg_url, "--project-name", NAME, env=pg_cli_env(cli_env))
    shutil.rmtree(root)
    with Workspace.open_shared(StoreChoice(pg_url, NAME), tmp_path) as ws:
        assert ws.detached and ws.store.readonly
        assert isinstance(ws.graph, SnapshotGraph)
        assert ws.status().status == "ready"
        # Detached: nothing to index or watch, and the disk is never looked at.
        with pytest.raises(RuntimeError):
            ws.index()
        with pytest.raises(RuntimeError):
            ws.start_watching()
