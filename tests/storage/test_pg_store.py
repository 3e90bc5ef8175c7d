"""PgStore itself: named locks held by a connection (gone with its process,
taken again when a dropped connection is replaced), SQL translation, the
postings under edits and cold loads, and a reader's cached postings."""

from __future__ import annotations

from urllib.parse import urlsplit

from memstrata.storage.postgres import PgStore


def test_a_lock_survives_a_dropped_connection(pg_cluster, pg_url):
    holder = PgStore(pg_url, "proj")
    other = PgStore(pg_url, "proj")
    try:
        assert holder.try_lock("ledger-session-1")
        assert other.locked_elsewhere("ledger-session-1")
        assert not other.try_lock("ledger-session-1")
        # The server drops every connection (a restart, a failover, an idle timeout).
        pg_cluster.kill_backends(urlsplit(pg_url).path.lstrip("/"))
        # The holder's next statement reconnects and takes its lock again ...
        assert holder.get_meta("code_generation")
        # ... so another process still sees it held.
        assert other.locked_elsewhere("ledger-session-1")
        holder.unlock("ledger-session-1")
        assert not other.locked_elsewhere("ledger-session-1")
        assert other.try_lock("ledger-session-1")
    finally:
        holder.close()
        other.close()


def test_locks_are_counted_and_closing_releases_them(pg_url):
    a, b = PgStore(pg_url, "proj"), PgStore(pg_url, "proj")
    try:
        assert a.try_lock("index-run") and a.try_lock("index-run")
        a.unlock("index-run")
        assert b.locked_elsewhere("index-run")  # still held once
        a.close()
        assert not b.locked_elsewhere("index-run")
    finally:
        a.close()
        b.close()


def test_percent_signs_survive_translation(pg_url):
    store = PgStore(pg_url, "proj")
    try:
        assert store.execute("SELECT 'a%b', '?'")[0] == ("a%b", "?")
        assert store.execute("SELECT 'a%b', ?", (1,))[0] == ("a%b", 1)
        assert store.execute("SELECT count(*) FROM meta WHERE key LIKE 'code%'")[0][0] == 1
    finally:
        store.close()


def test_postings_and_corpus_figures_follow_edits_and_deletions(pg_url, project_copy):
    from memstrata.indexer.project import StoreChoice
    from memstrata.indexer.workspace import Workspace

    root = project_copy("python_project")
    with Workspace.open(root, store=StoreChoice(pg_url, "proj")) as ws:
        ws.index()
        victim = next(p for p in root.rglob("*.py") if p.stat().st_size > 200)
        victim.unlink()
        edited = next(p for p in root.rglob("*.py") if p.stat().st_size > 200)
        edited.write_text(edited.read_text() + "\n\ndef brand_new_helper(x):\n    return x\n")
        ws.index()
        store = ws.store
        orphans = store.execute(
            "SELECT count(*) FROM symbol_terms t WHERE NOT EXISTS (SELECT 1 FROM symbols s WHERE s.id = t.symbol_id)")
        assert orphans[0][0] == 0
        nrow, ntok = store.execute("SELECT nrow, ntok FROM fts_totals")[0]
        assert (nrow, ntok) == tuple(store.execute("SELECT count(*), sum(fts_tokens) FROM symbols")[0])
        assert store.execute("SELECT count(*) FROM symbol_terms WHERE term = 'brand'")[0][0] == 1


def _term_indexes(store) -> set[str]:
    return {r[0] for r in store.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = ? AND tablename = 'symbol_terms'", (store.schema_name,))}


def test_a_cold_run_builds_the_postings_indexes_at_its_end(pg_url, project_copy):
    from memstrata.indexer.project import StoreChoice
    from memstrata.indexer.workspace import Workspace
    from memstrata.storage import code_index as ci

    root = project_copy("python_project")
    with Workspace.open(root, store=StoreChoice(pg_url, "proj")) as ws:
        ws.index()
        assert _term_indexes(ws.store) == {"symbol_terms_term", "symbol_terms_file"}
        # A cold run killed half-way leaves them dropped: the next run builds them first.
        with ws.store.write() as conn:
            ci.drop_term_indexes(conn)
        assert _term_indexes(ws.store) == set()
        ws.index()
        assert _term_indexes(ws.store) == {"symbol_terms_term", "symbol_terms_file"}


def test_a_readers_cached_postings_follow_the_writer(pg_url, project_copy):
    from memstrata.indexer.project import StoreChoice
    from memstrata.indexer.workspace import Workspace
    from memstrata.storage import code_index as ci

    root = project_copy("python_project")
    choice = StoreChoice(pg_url, "proj")
    with Workspace.open(root, store=choice) as writer:
        writer.index()
        reader = Workspace.open_shared(choice)
        try:
            assert ci.search_symbols(reader.store, ["zebrafish"]) == []
            before = ci.search_symbols(reader.store, ["login"])
            assert before
            target = next(p for p in root.rglob("*.py") if p.stat().st_size > 200)
            target.write_text(target.read_text() + "\n\ndef zebrafish_login(x):\n    return x\n")
            writer.index()
            found = ci.search_symbols(reader.store, ["zebrafish"])
            assert len(found) == 1
            names = {r[0] for r in reader.store.execute(
                "SELECT name FROM symbols WHERE id = ANY(?)", ([i for i, _ in found],))}
            assert names == {"zebrafish_login"}
            # The same question on a fresh SQLite index of the edited tree ranks
            # alike, scores included (ids differ: the reader's were renumbered by the edit).
            def named(store, hits):
                rows = dict(store.execute(
                    "SELECT s.id, f.path || '::' || s.qualname FROM symbols s JOIN files f ON f.id = s.file_id"))
                return [(rows[i], score) for i, score in hits]

            with Workspace.open(root) as local:
                local.index()
                terms = ["login", "zebrafish"]
                assert named(local.store, ci.search_symbols(local.store, terms)) == \
                    named(reader.store, ci.search_symbols(reader.store, terms))
        finally:
            reader.close()


def test_a_full_postings_copy_starts_afresh_without_losing_a_question(pg_url, project_copy, monkeypatch):
    from memstrata.indexer.project import StoreChoice
    from memstrata.indexer.workspace import Workspace
    from memstrata.storage import code_index as ci
    from memstrata.storage import pg_index

    root = project_copy("python_project")
    choice = StoreChoice(pg_url, "proj")
    with Workspace.open(root, store=choice) as writer:
        writer.index()
    with Workspace.open(root) as local:
        local.index()
        reader = Workspace.open_shared(choice)
        try:
            monkeypatch.setattr(pg_index._Postings, "MAX_ROWS", 3)  # every question overflows it
            for terms in (["login", "user"], ["user", "session"], ["login", "session", "user"], ["user"]):
                # Same index content on both sides, built the same way: ids and scores alike.
                assert ci.search_symbols(reader.store, terms) == ci.search_symbols(local.store, terms)
        finally:
            reader.close()
