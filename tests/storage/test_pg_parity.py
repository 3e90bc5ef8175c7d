"""The PostgreSQL backend answers exactly as the SQLite one (issue 25's parity test).

Every fixture project is indexed from one checkout into its own SQLite file
and into a PostgreSQL database; the SQLite side is read as a local project,
the PostgreSQL side as a team reader does (detached, no disk).  The tools'
answers are compared as the bytes an MCP client receives.
"""

from __future__ import annotations

import json
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memstrata.indexer.graph_snapshot import SnapshotGraph
from memstrata.indexer.project import StoreChoice
from memstrata.indexer.workspace import Workspace
from memstrata.mcp_server.tools import MemStrataTools
from memstrata.storage import code_index as ci

from ..shared_store_helpers import (
    FIXTURE_NAMES,
    copy_fixture,
    index_into_both,
    symbol_keys,
)

BUDGETS = (512, 2048, 4096)
ENGLISH = (
    "how does this project work",
    "where is the configuration read and checked",
    "what happens when a request fails with an error",
    "tests of the main entry point",
    "the a of to and",  # nothing but common words
)
STATUS_COUNTS = ("files_indexed", "symbols", "syntax_errors", "languages", "skipped", "status")


class Pair:
    """One fixture's two indexes and their tool faces."""

    def __init__(self, root, url, name):
        self.root = root
        self.sqlite = Workspace.open(root)
        self.pg = Workspace.open_shared(StoreChoice(url, name), root)
        self.tools = (MemStrataTools(self.sqlite), MemStrataTools(self.pg))

    def close(self):
        self.sqlite.close()
        self.pg.close()

    def both(self, tool: str, **args) -> tuple[str, str]:
        """The tool's answer on each backend as the client sees it: error flag and text."""
        out = []
        for tools in self.tools:
            r = getattr(tools, tool)(**args)
            out.append(json.dumps({"error": bool(r.is_error), "text": r.content[0].text}, ensure_ascii=False))
        return out[0], out[1]


@pytest.fixture(scope="module")
def pairs(pg_cluster, tmp_path_factory):
    pg_cluster.ensure_running()
    db = pg_cluster.create_database()
    url = pg_cluster.url(db)
    parent = tmp_path_factory.mktemp("parity")
    made = {}
    try:
        for name in FIXTURE_NAMES:
            root = copy_fixture(name, parent)
            index_into_both(root, url, name)
            made[name] = Pair(root, url, name)
        yield made
    finally:
        for pair in made.values():
            pair.close()
        pg_cluster.ensure_running()
        pg_cluster.drop_database(db)


def sample_symbols(store, n: int = 4) -> list[tuple[str, str, str]]:
    """(name, qualname, path) of ``n`` symbols spread over the project, deterministically."""
    rows = sorted({(r[0], r[1], r[2]) for r in store.execute(
        "SELECT s.name, s.qualname, f.path FROM symbols s JOIN files f ON f.id = s.file_id")},
        key=lambda r: (r[2], r[1]))
    if len(rows) <= n:
        return rows
    step = len(rows) / n
    return [rows[int(i * step)] for i in range(n)]


def questions(store) -> list[str]:
    out = list(ENGLISH)
    for name, qual, path in sample_symbols(store):
        out += [name, f"{qual} and its callers", f"{path}::{qual}"]
    return out


def test_both_sides_are_what_they_claim(pairs):
    """The comparison means something only if one side really is PostgreSQL, read detached."""
    pair = pairs["python_project"]
    assert pair.sqlite.store.dialect == "sqlite"
    assert pair.pg.store.dialect == "postgresql" and pair.pg.detached
    # The reader starts from the snapshot the writer stored beside the rows.
    assert isinstance(pair.pg.graph, SnapshotGraph)
    assert pair.pg.store.execute("SELECT count(*) FROM symbol_terms")[0][0] > 0


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_symbol_ids_and_rows_match(pairs, name):
    pair = pairs[name]
    keys = symbol_keys(pair.sqlite.store)
    assert keys, f"{name} indexed no symbol"
    assert symbol_keys(pair.pg.store) == keys


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_context_query_is_byte_identical(pairs, name):
    pair = pairs[name]
    asked = 0
    for q in questions(pair.sqlite.store):
        for budget in BUDGETS:
            for include_tests in (False, True):
                sqlite_answer, pg_answer = pair.both("context_query", query=q, max_tokens=budget,
                                                     include_tests=include_tests)
                assert pg_answer == sqlite_answer, (q, budget, include_tests)
                asked += not json.loads(sqlite_answer)["error"]
    assert asked, "every question was refused: nothing was compared"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_navigation_answers_are_identical(pairs, name):
    pair = pairs[name]
    found = 0
    for sym_name, qual, path in sample_symbols(pair.sqlite.store, n=6):
        for designator in (sym_name, qual, f"{path}::{qual}", sym_name[:2] + "*"):
            s, p = pair.both("find_symbol", name=designator, include_body=True)
            assert p == s, ("find_symbol", designator)
            answer = json.loads(s)
            found += not answer["error"] and "body" in json.loads(answer["text"])["symbols"][0]
            s, p = pair.both("find_references", symbol=designator)
            assert p == s, ("find_references", designator)
        for depth in (1, 2):
            s, p = pair.both("file_outline", path=path, depth=depth)
            assert p == s, ("file_outline", path, depth)
            assert not json.loads(s)["error"], s
    assert found, "no find_symbol answer carried a body"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_index_status_counts_match(pairs, name):
    pair = pairs[name]
    sqlite_status, pg_status = pair.sqlite.status(check_disk=True).as_dict(), pair.pg.status().as_dict()
    assert sqlite_status["status"] == "ready"
    assert {k: pg_status[k] for k in STATUS_COUNTS} == {k: sqlite_status[k] for k in STATUS_COUNTS}
    assert pg_status["last_indexed"] and pg_status["index_size_mb"] > 0


# -- the BM25 search itself -----------------------------------------------------------

def vocabulary(store) -> list[str]:
    """The words of the project's names, signatures and docstrings (what agents ask with)."""
    words: set[str] = set()
    for row in store.execute("SELECT name, qualname, signature, coalesce(docstring, '') FROM symbols"):
        for field in row:
            words.update(w for w in re.split(r"[\W_]+", field) if w)
            words.update(re.findall(r"\w+", field))  # snake_case whole: the search splits it again
    return sorted(words)


JUNK = st.one_of(
    st.sampled_from(["the", "a", "return", "self", "def", "function", "value", "data", "get", "set", "new"]),
    st.text(alphabet=string.punctuation, min_size=1, max_size=4),
    st.sampled_from(["snake_case_name", "dotted.name.path", "CamelCaseName", "x²", "naïve", "ﬁle", "Straße",
                     "日本語テキスト", "e\u0301t\u00e9", "İstanbul", "ǅungla", "a·b", "ⅫⅣ", "٣٤", "😀emoji",
                     "running", "runs", "ran", "connection's", "don't", "C++", "-1.5e3", "0x1F"]),
    st.text(min_size=1, max_size=8),
)


@pytest.fixture(scope="module")
def vocabularies(pairs):
    return {name: vocabulary(pair.sqlite.store) for name, pair in pairs.items()}


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_search_of_the_whole_vocabulary_is_identical(pairs, vocabularies, name):
    """Every project word alone and all of them at once: non-empty, same ids, same doubles."""
    pair = pairs[name]
    vocab = vocabularies[name]
    assert vocab
    hits = 0
    for word in vocab:
        s = ci.search_symbols(pair.sqlite.store, [word])
        assert ci.search_symbols(pair.pg.store, [word]) == s, word
        hits += bool(s)
    assert hits >= len(vocab) // 2, "most project words found nothing: the comparison is empty"
    for limit in (3, 50, 1000):
        s = ci.search_symbols(pair.sqlite.store, vocab, limit=limit)
        assert s and ci.search_symbols(pair.pg.store, vocab, limit=limit) == s


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_search_symbols_matches_on_random_token_lists(pairs, vocabularies, data):
    name = data.draw(st.sampled_from(FIXTURE_NAMES), label="fixture")
    vocab = vocabularies[name]
    tokens = data.draw(st.lists(st.one_of(st.sampled_from(vocab), st.sampled_from(vocab), JUNK),
                                min_size=1, max_size=12), label="tokens")
    limit = data.draw(st.sampled_from([1, 5, 50]), label="limit")
    pair = pairs[name]
    sqlite_hits = ci.search_symbols(pair.sqlite.store, tokens, limit=limit)
    pg_hits = ci.search_symbols(pair.pg.store, tokens, limit=limit)
    # Exact: the same ids in the same order with the same doubles (no approx).
    assert pg_hits == sqlite_hits
    assert all(type(score) is float for _, score in pg_hits)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_rows_read_a_page_at_a_time_are_the_rows_read_at_once(pairs, name, monkeypatch):
    """A server's background graph build reads the rows in pages (two rows each here, so
    that every table takes several), on either backend, and gets what one read gives."""
    monkeypatch.setattr(ci, "GRAPH_PAGE_ROWS", 2)
    pair = pairs[name]
    for store in (pair.sqlite.store, pair.pg.store):
        pauses = []
        generation, files, symbols, imports, refs = ci.load_graph_rows_in_pages(store, lambda: pauses.append(1))
        with store.read():
            at_once = (ci.code_generation(store), ci.load_files(store), ci.load_symbols(store),
                       ci.load_imports(store), ci.load_refs(store))
        assert generation == at_once[0], store.dialect
        for paged, whole in zip((files, symbols, imports, refs), at_once[1:]):
            assert sorted(map(tuple, paged), key=repr) == sorted(map(tuple, whole), key=repr), store.dialect
        assert len(pauses) >= 4, store.dialect
