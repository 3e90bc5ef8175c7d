"""Keyword search and search_rag validation on real stores (no daemon)."""

from __future__ import annotations

import pytest

from memstrata.kura.indexing import sync_folder, update_paths
from memstrata.kura.library import Library
from memstrata.kura.registry import Entry, Home
from memstrata.kura.chunking import DocumentFilter
from memstrata.kura.search import KuraSearch, parse_limit
from memstrata.kura.store import KuraDatabase
from memstrata.kura import store as kura_store


@pytest.fixture
def store(tmp_path):
    s = KuraDatabase(tmp_path / "db" / "data.db")
    yield s
    s.close()


def put(store, path, *chunks):
    rec = kura_store.SourceRecord(path, 1, 1, path, "prose", 0.0)
    with store.write() as conn:
        kura_store.replace_source(conn, rec, list(chunks))


def ranked(store, q, limit=10):
    return [(h.source, h.chunk) for h in kura_store.search(store, q, limit)]


def fts_ok(store):
    with store.write() as conn:
        conn.execute("INSERT INTO kura_fts(kura_fts, rank) VALUES ('integrity-check', 1)")


def test_identifiers_match_by_their_parts(store):
    put(store, "a.py", "class AuthService: pass", "def parse_args(argv): ...")
    put(store, "b.md", "The auth service logs users in.")
    assert ranked(store, "AuthService")[0] == ("a.py", 1)
    assert set(ranked(store, "auth service")) == {("a.py", 1), ("b.md", 1)}
    assert ranked(store, "parse_args") == [("a.py", 2)]
    assert ranked(store, "args") == [("a.py", 2)]


def test_a_name_with_digits_is_not_a_search_for_its_number(store):
    put(store, "a.md", "Set the retry count to 2.", "The checksum uses 256 bits.", "Served over http2 or h3.")
    put(store, "b.py", "def http2Server(port): ...")
    for q in ("sha256", "quokka2", "x2", "v2"):
        assert ranked(store, q) == [], q
    assert set(ranked(store, "http2")) == {("a.md", 3), ("b.py", 1)}  # as a substring of the name too
    # Case humps still split: the parts of a camel-cased name find their words.
    assert ("b.py", 1) in ranked(store, "http2Server") and ("b.py", 1) in ranked(store, "server")


def test_phrase_and_exact_words_rank_above_scattered_and_prefix_matches(store):
    put(store, "scattered.md", "retry now. Later we talk about backoff policies.")
    put(store, "phrase.md", "Use retry backoff for flaky calls to the upstream service.")
    put(store, "prefix.md", "Retrying with backoffs.")
    assert ranked(store, "retry backoff")[0] == ("phrase.md", 1)
    assert ("prefix.md", 1) in ranked(store, "retry backoff")
    assert len(ranked(store, "retr")) == 3  # retry, retrying: prefix matches


def test_replace_and_delete_keep_the_index_consistent(store):
    put(store, "a.md", "alpha beta", "gamma")
    put(store, "a.md", "delta")
    assert ranked(store, "alpha") == [] and ranked(store, "delta") == [("a.md", 1)]
    with store.write() as conn:
        assert kura_store.delete_sources(conn, ["a.md", "missing.md"]) == 1
    assert ranked(store, "delta") == []
    fts_ok(store)


def test_awkward_queries(store):
    put(store, "a.md", 'quote " and star * and NEAR(x) AND OR NOT')
    for q in ['"', "*", "NEAR(", "AND OR", "-x", "^", "(((", "'; DROP TABLE kura_chunks; --"]:
        kura_store.search(store, q, 10)  # must not raise
    assert kura_store.search(store, "   !!! ", 10) == []
    huge = " ".join(f"word{i}" for i in range(2000)) + " star"  # ~ 15 KB
    assert len(huge) > 10_000
    kura_store.search(store, huge, 10)


def test_a_nul_in_the_query_is_a_separator_not_a_broken_database(store):
    # Text pasted with a NUL (a C string, a binary dump): FTS5's parser stops at the NUL
    # inside the quoted phrase, which used to surface as "cannot be read: unterminated string".
    put(store, "a.md", "retry backoff for flaky calls")
    assert ranked(store, "retry \x00") == [("a.md", 1)]
    assert ranked(store, "retry\x00backoff flaky") == [("a.md", 1)]
    assert kura_store.search(store, "\x00 \x00", 10) == []


def test_common_words_past_the_budget_still_rank_the_rare_term_first(store):
    n = kura_store.SCORE_BUDGET + 500
    with store.write() as conn:
        for i in range(n // 100):
            rec = kura_store.SourceRecord(f"f{i}.md", 1, 1, "h", "prose", 0.0)
            kura_store.replace_source(conn, rec, [f"the common word and more {j}" for j in range(100)])
    put(store, "needle.md", "the common zanzibar word")
    assert ranked(store, "common zanzibar", 3)[0] == ("needle.md", 1)
    assert len(ranked(store, "common word", 10)) == 10  # all-common query: bounded, still answers
    # A word no chunk holds changes nothing: the rare term still ranks, the common words still answer.
    assert ranked(store, "common zanzibar xyzzy", 3)[0] == ("needle.md", 1)
    assert len(ranked(store, "common word xyzzy", 10)) == 10


def test_sync_and_update_follow_the_folder(tmp_path, store, docs):
    report = sync_folder(store, docs)
    assert report.added == 3 and not report.removed  # png by extension, blob.dat by NUL probe skipped
    assert {s for s, _ in ranked(store, "alice")} == {"people.csv"}
    assert ranked(store, "Osaka") == [("people.csv", 3)]
    assert sync_folder(store, docs).changed == 0
    (docs / "notes.md").write_text("Only bulkheads now.", encoding="utf-8")
    (docs / "people.csv").unlink()
    (docs / "new.txt").write_text("fresh kiwi", encoding="utf-8")
    flt = DocumentFilter(docs)
    r = update_paths(store, docs, ["notes.md", "people.csv", "new.txt", "nonexistent.md"], flt)
    assert (r.added, r.updated, r.removed) == (1, 1, 1)
    assert ranked(store, "backoff") == [] and ranked(store, "bulkheads") == [("notes.md", 1)]
    assert ranked(store, "alice") == [] and ranked(store, "kiwi") == [("new.txt", 1)]
    fts_ok(store)


@pytest.fixture
def library(tmp_path, docs):
    home = Home(tmp_path / "home")
    with KuraDatabase(home.db_path("notes")) as s:
        sync_folder(s, docs)
    home.db_dir("empty").mkdir()
    KuraDatabase(home.db_path("empty")).close()
    home.db_dir("broken").mkdir()
    home.db_path("broken").write_bytes(b"this is not a database" * 100)
    home.save_entries([Entry("notes", "2026-01-01T00:00:00Z"), Entry("empty", "2026-01-02T00:00:00Z"),
                       Entry("broken", "2026-01-03T00:00:00Z"), Entry("gone", "2026-01-04T00:00:00Z")])
    lib = Library(home, live=False)
    lib.reload()
    yield lib
    lib.close()


def test_list_rag_reports_loaded_and_registered(library):
    out = KuraSearch(library).list_rag()
    assert out["loaded"] == ["notes", "empty"]
    assert [r["db"] for r in out["registered"]] == ["notes", "empty", "broken", "gone"]
    assert set(library.problems()) == {"broken", "gone"}


def test_search_rag_shape_grouping_and_trimming(library):
    search = KuraSearch(library)
    out = search.search_rag("  notes ", "  AuthService login backoff ")
    sources = [g["source"] for g in out["keyword"]]
    assert sources[0] == "code/auth.py" and "notes.md" in sources
    assert len(sources) == len(set(sources))
    for group in out["keyword"]:
        assert all(set(m) == {"chunk", "content"} and m["chunk"] >= 1 for m in group["matches"])
    assert search.search_rag("notes", "nothingmatcheshere") == {}
    assert search.search_rag("empty", "anything") == {}


@pytest.mark.parametrize("raw,expected", [(None, 10), ("abc", 10), (0, 10), (500, 10), (-1, 10), ("7", 7),
                                          (1, 1), (100, 100), (101, 10), (True, 10), (3.0, 3), (2.5, 10),
                                          ("", 10), ([], 10)])
def test_limit_falls_back_to_ten(raw, expected):
    assert parse_limit(raw) == expected


def test_limit_caps_the_number_of_matches(library):
    search = KuraSearch(library)
    count = lambda out: sum(len(g["matches"]) for g in out.get("keyword", []))  # noqa: E731
    assert count(search.search_rag("notes", "alice bob name city Lisbon", 1)) == 1
    assert count(search.search_rag("notes", "alice bob name city Lisbon", "abc")) == 3


@pytest.mark.parametrize("args,message", [
    (("nope", "x"), 'invalid argument: "nope" not exist'),
    (("", "x"), "invalid argument: db is required"),
    ((None, "x"), "invalid argument: db is required"),
    (("notes", "   "), "invalid argument: q is required"),
    (("notes", None), "invalid argument: q is required"),
    ((5, "x"), "invalid argument: db must be a string"),
    ((None, " "), "invalid argument: db is required; q is required"),
    (("notes", "x", None, "semantic"), 'invalid argument: mode "semantic" not supported (only "keyword")'),
    (("notes", "x", None, 3), "invalid argument: mode must be a string"),
])
def test_bad_arguments(library, args, message):
    from memstrata.kura.search import InvalidArgument

    with pytest.raises(InvalidArgument) as exc:
        KuraSearch(library).search_rag(*args)
    assert str(exc.value) == message


def test_mode_is_case_insensitive_and_unloadable_databases_say_why(library):
    from memstrata.kura.search import InvalidArgument

    search = KuraSearch(library)
    assert search.search_rag("notes", "backoff", None, " KeyWord ")["keyword"]
    with pytest.raises(InvalidArgument, match='"broken" not loaded: cannot open its index') as exc:
        search.search_rag("broken", "x")
    assert str(library.home.root) not in str(exc.value)  # the Kura home is not a registered folder
    with pytest.raises(InvalidArgument, match='"gone" not loaded: .* is missing'):
        search.search_rag("gone", "x")


def test_a_store_cut_by_another_chunking_version_is_cut_again(store, tmp_path):
    # a change to how documents are cut reaches databases indexed before it, on
    # their next full sync, not only the files edited afterwards
    from memstrata.kura.chunking import CHUNKING_VERSION, MAX_PROSE_CHARS
    docs = tmp_path / "tables"
    docs.mkdir()
    cell = " ".join(f"cell{i}" for i in range(2000))
    (docs / "export.csv").write_text(f'id,doc\n1,"{cell} zanzibar"\n', encoding="utf-8")
    (docs / "note.md").write_text("A short note.", encoding="utf-8")
    sync_folder(store, docs)
    assert kura_store.get_chunking(store) == CHUNKING_VERSION
    # as an older version left it: the whole record one chunk, no version recorded
    state = kura_store.source_states(store)["export.csv"]
    old = kura_store.SourceRecord("export.csv", state.size, state.mtime_ns, state.hash, "table", 0.0)
    with store.write() as conn:
        kura_store.replace_source(conn, old, ["id,doc", f'1,"{cell} zanzibar"'])
    store.set_meta(kura_store.META_CHUNKING, None)
    assert kura_store.get_chunking(store) == 1
    report = sync_folder(store, docs)
    assert report.updated == 2 and not report.added and not report.removed
    hits = kura_store.search(store, "zanzibar", 5)
    assert len(hits) == 1 and len(hits[0].content) <= MAX_PROSE_CHARS
    assert kura_store.get_chunking(store) == CHUNKING_VERSION
    assert sync_folder(store, docs).changed == 0
    fts_ok(store)
