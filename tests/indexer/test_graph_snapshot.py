"""The saved graph: a reader that loads it sees exactly the graph built from
rows, never a stale or damaged one, and the store's generation follows every
change the graph is built from."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memstrata.compressor import context_query
from memstrata.indexer import graph_snapshot
from memstrata.indexer.graph import CodeGraph
from memstrata.indexer.graph_snapshot import SnapshotGraph
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

QUESTIONS = {
    "python_project": ["AuthService.login and its callers", "how are passwords hashed and compared",
                       "where are sessions stored", "report generation", "routes"],
    "javascript_project": ["how is a request routed", "render the template", "config loading"],
    "rust_workspace": ["parse the config", "how are errors reported", "main entry point"],
}


def _snapshot_file(ws: Workspace):
    return ws.store.path.parent / graph_snapshot.SNAPSHOT_FILE


@pytest.mark.parametrize("fixture", sorted(QUESTIONS))
def test_a_snapshot_reader_sees_the_graph_built_from_rows(project_copy, fixture):
    root = project_copy(fixture)
    with Workspace.open(root) as built:
        built.index()
        full = built.graph
        assert type(full) is CodeGraph
        assert _snapshot_file(built).is_file()
        with Workspace.open(root) as reader:
            snap = reader.graph
            assert isinstance(snap, SnapshotGraph)
            assert snap.generation == full.generation is not None

            nodes = full.nodes()
            assert nodes, "the fixture has a graph"
            assert snap.nodes() == nodes
            for n in nodes:
                assert n in snap
                assert snap.node(n) == full.node(n)
                assert snap.file_of(n) == full.file_of(n)
                assert snap.adjacency(n) == full.adjacency(n)
                for direction in ("in", "out", "both"):
                    assert list(snap.neighbors(n, direction=direction)) == list(full.neighbors(n, direction=direction))
                assert snap.callers(n) == full.callers(n) and snap.callees(n) == full.callees(n)
                if "::" in n:
                    db_id = full.node(n)["db_id"]
                    assert snap.node_for_db_id(db_id) == full.node_for_db_id(db_id) == n
            assert "no/such.py::thing" not in snap
            assert list(snap.names()) == list(full.names())
            for name in full.names():
                assert snap.definitions(name) == full.definitions(name)
            assert snap.files() == full.files()
            for path in full.files():
                assert snap.symbols_in_file(path) == full.symbols_in_file(path)
                assert snap.importers(path) == full.importers(path)
            assert snap.test_files == full.test_files
            assert snap.stats() == full.stats()

            for q in QUESTIONS[fixture]:
                a, b = context_query(built, q, max_tokens=1500), context_query(reader, q, max_tokens=1500)
                assert (a.context, a.tokens, a.baseline_tokens, a.sources) == \
                       (b.context, b.tokens, b.baseline_tokens, b.sources), q


def test_a_stale_snapshot_is_never_used(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        ws.graph  # built, and saved
    saved = _snapshot_file(ws).read_bytes()
    (root / "app" / "billing.py").write_text("def charge_card_now(amount):\n    return amount * 2\n")
    with Workspace.open(root) as ws:
        ws.index()  # this process never loads a graph: the snapshot stays as it was
    assert _snapshot_file(ws).read_bytes() == saved
    with Workspace.open(root) as ws:
        g = ws.graph
        assert type(g) is CodeGraph  # rebuilt from rows: the snapshot predates the new file
        assert g.definitions("charge_card_now") == ["app/billing.py::charge_card_now"]
    with Workspace.open(root) as ws:  # and saved again for the next reader
        g = ws.graph
        assert isinstance(g, SnapshotGraph)
        assert g.definitions("charge_card_now") == ["app/billing.py::charge_card_now"]


def test_a_reader_holding_a_snapshot_follows_later_changes(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        ws.graph
    with Workspace.open(root) as reader, Workspace.open(root) as writer:
        assert isinstance(reader.graph, SnapshotGraph)
        (root / "app" / "fresh.py").write_text("def brand_new_helper():\n    return 1\n")
        writer.index()
        g = reader.graph  # another process wrote: the read-only snapshot gives way to a full graph
        assert type(g) is CodeGraph
        assert g.definitions("brand_new_helper") == ["app/fresh.py::brand_new_helper"]
        (root / "app" / "fresh.py").unlink()
        writer.index()
        assert reader.graph.definitions("brand_new_helper") == []


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty"])
def test_a_damaged_snapshot_is_rebuilt(project_copy, damage):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        expected = context_query(ws, "AuthService.login and its callers", max_tokens=1500).context
    path = _snapshot_file(ws)
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a snapshot at all" * 50)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:])
    else:
        path.write_bytes(b"")
    with Workspace.open(root) as ws:
        assert type(ws.graph) is CodeGraph
        assert context_query(ws, "AuthService.login and its callers", max_tokens=1500).context == expected
    with Workspace.open(root) as ws:
        assert isinstance(ws.graph, SnapshotGraph)  # written afresh


def test_generation_follows_what_the_graph_is_built_from(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        first = ci.code_generation(ws.store)
        assert first
        ws.index()  # nothing changed
        assert ci.code_generation(ws.store) == first
        target = root / "app" / "routes.py"
        os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
        ws.index()  # only the modification time moved: the rows are the same
        assert ci.code_generation(ws.store) == first
        target.write_text(target.read_text() + "\n\ndef another_route():\n    return None\n")
        ws.index()
        second = ci.code_generation(ws.store)
        assert second != first
        target.unlink()
        ws.index()
        third = ci.code_generation(ws.store)
        assert third not in (first, second)
        with ws.store.write() as conn:
            (iid, old), = conn.execute("SELECT id, target_path FROM imports LIMIT 1").fetchall()
            ci.set_import_targets(conn, [(None if old else "app/models.py", iid)])
        assert ci.code_generation(ws.store) not in (first, second, third)


def test_a_read_only_index_is_served_without_a_snapshot(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        expected = context_query(ws, "how are passwords hashed and compared", max_tokens=1500).context
    _snapshot_file(ws).unlink()
    from memstrata.indexer.project import open_store

    store = open_store(root, readonly=True)
    with Workspace(root, store) as ro:
        assert type(ro.graph) is CodeGraph
        assert context_query(ro, "how are passwords hashed and compared", max_tokens=1500).context == expected
    assert not _snapshot_file(ws).exists()


def test_whole_file_token_counts_are_saved_and_dropped_with_a_rewrite(project_copy):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        r = context_query(ws, "AuthService.login and its callers", max_tokens=1500)
    with Workspace.open(root) as ws:  # the counts were saved after the answer, before exit
        counts = {p: row[2] for p, row in ci.file_texts_counted(ws.store, r.sources).items()}
        assert all(isinstance(n, int) and n > 0 for n in counts.values()), counts
        assert sum(counts.values()) == r.baseline_tokens
        again = context_query(ws, "AuthService.login and its callers", max_tokens=1500)
        assert again.baseline_tokens == r.baseline_tokens
        path = r.sources[0]
        (root / path).write_text((root / path).read_text() + "\n# one more line\n")
        ws.index()
        assert ci.file_texts_counted(ws.store, [path])[path][2] is None


def test_one_shot_cli_queries_agree_with_and_without_a_snapshot(project_copy, run_cli):
    root = project_copy("python_project")
    run_cli("index", str(root))
    first = run_cli("query", "AuthService.login and its callers", str(root), "--json").stdout
    assert (root / ".memstrata" / graph_snapshot.SNAPSHOT_FILE).is_file()
    second = run_cli("query", "AuthService.login and its callers", str(root), "--json").stdout
    assert first == second


def test_the_tokenizer_cache_counts_like_the_packaged_ranks(tmp_path):
    code = (
        "from memstrata.compressor import tokens\n"
        "import tiktoken, sys\n"
        "enc = tokens.encoding()\n"
        "ref = tiktoken.get_encoding(tokens.ENCODING_NAME)\n"
        "text = open(sys.argv[1], encoding='utf-8').read() + ' <|endoftext|> naïve 日本語 \\t\\n'\n"
        "assert enc.encode(text, disallowed_special=()) == ref.encode(text, disallowed_special=())\n"
        "assert enc.encode('<|endoftext|>', allowed_special='all') == [100257]\n"
        "print(len(enc.encode(text, disallowed_special=())))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    sample = graph_snapshot.__file__
    run = lambda: subprocess.run([sys.executable, "-c", code, sample], env=env, capture_output=True,  # noqa: E731
                                 text=True, timeout=120)
    first = run()
    assert first.returncode == 0, first.stderr
    cache = tmp_path / "cache" / "memstrata" / "cl100k_base.ranks"
    assert cache.is_file()
    second = run()  # from the cache
    assert second.returncode == 0 and second.stdout == first.stdout, second.stderr
    cache.write_bytes(cache.read_bytes()[:1000])  # damaged: the packaged ranks are used
    third = run()
    assert third.returncode == 0 and third.stdout == first.stdout, third.stderr


def test_a_query_never_waits_for_another_writer_to_save_its_counts(project_copy):
    import sqlite3

    from memstrata.storage import StoreBusy

    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        ws.graph
    other = sqlite3.connect(root / ".memstrata" / "index.db", isolation_level=None)
    try:
        with Workspace.open(root) as ws:
            ws.graph
            other.execute("BEGIN IMMEDIATE")  # another process mid-write
            with pytest.raises(StoreBusy):
                with ws.store.write(wait=False):
                    pass
            r = context_query(ws, "report generation", max_tokens=1500)
            assert r.sources and r.baseline_tokens > 0
            other.execute("ROLLBACK")
            rows = ci.file_texts_counted(ws.store, r.sources)
            assert all(row[2] is None for row in rows.values())  # skipped, not waited for
            with ws.store.write(wait=False):  # and the connection waits normally again
                pass
            assert context_query(ws, "report generation", max_tokens=1500).baseline_tokens == r.baseline_tokens
            rows = ci.file_texts_counted(ws.store, r.sources)
            assert sum(row[2] for row in rows.values()) == r.baseline_tokens
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


def test_a_watching_process_builds_the_full_graph_for_the_first_change(project_copy, wait_until):
    root = project_copy("python_project")
    with Workspace.open(root) as ws:
        ws.index()
        ws.graph
    with Workspace.open(root) as ws:
        assert isinstance(ws.graph, SnapshotGraph)  # answers at once
        ws.start_watching()
        wait_until(lambda: ws._standby is not None, message="the full graph built in the background")
        full = ws._standby
        assert isinstance(ws.graph, SnapshotGraph)  # ... and the snapshot answers until a change comes
        (root / "app" / "watched.py").write_text("def seen_by_the_watcher():\n    return 2\n")
        wait_until(lambda: ws.graph.definitions("seen_by_the_watcher"), message="the watcher's refresh")
        assert ws.graph is full  # the standby, refreshed in place: nothing was built again
