"""The naive-RAG arm (BM25 over 40-line chunks) on a real index of a fixture copy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from memstrata.compressor import QueryError, count_tokens
from memstrata.compressor.baseline import CHUNK_LINES, chunk_index, naive_rag, terms_of
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "python_project"
_HEADER = re.compile(r"^# (\S+):(\d+)-(\d+)$", re.M)


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root)
    w = Workspace.open(root)
    w.index()
    yield w
    w.close()


def test_terms_split_identifiers_and_drop_stop_words():
    terms = terms_of("The parseHTTPRequest and hash_password of users")
    assert "http" in terms and "request" in terms
    assert "hash" in terms and "password" in terms
    assert "the" not in terms and "and" not in terms and "of" not in terms
    # plural and singular meet
    assert terms_of("users") == terms_of("user")


def test_best_chunk_comes_first_and_headers_match_spans(ws):
    r = naive_rag(ws, "hash password with a fixed salt", max_tokens=4096)
    assert r.sources[0] == "app/util/crypto.py"
    headers = [(p, int(a), int(b)) for p, a, b in _HEADER.findall(r.context)]
    assert headers == r.spans
    for path, first, last in r.spans:
        assert 1 <= first <= last
        assert last - first + 1 <= CHUNK_LINES
    assert r.sources == list(dict.fromkeys(p for p, _, _ in r.spans))


def test_chunk_text_is_verbatim(ws):
    r = naive_rag(ws, "hash password", max_tokens=4096)
    text = ci.file_text(ws.store, "app/util/crypto.py")
    path, first, last = next(s for s in r.spans if s[0] == "app/util/crypto.py")
    body = "\n".join(text.split("\n")[first - 1 : last]).rstrip()
    assert f"# {path}:{first}-{last}\n{body}" in r.context


@pytest.mark.parametrize("budget", [1, 5, 20, 40, 80, 150, 250, 400, 700, 1200, 4096])
def test_budget_is_never_exceeded(ws, budget):
    for query in ("hash password", "login route session", "AuthService login and its callers", "report"):
        r = naive_rag(ws, query, max_tokens=budget)
        assert r.tokens == count_tokens(r.context)
        assert r.tokens <= budget
        assert r.max_tokens == budget


def test_a_chunk_that_does_not_fit_is_skipped_not_cut(ws):
    full = naive_rag(ws, "hash password login", max_tokens=100_000)
    assert len(full.spans) >= 2
    first_cost = count_tokens(full.context.split("\n\n# ")[0])
    # Room for less than the best chunk: it is skipped and smaller ones still come in.
    r = naive_rag(ws, "hash password login", max_tokens=first_cost - 5)
    assert full.spans[0] not in r.spans
    assert r.spans, "a smaller lower-ranked chunk should have been packed"
    assert all(s in full.spans for s in r.spans)


def test_baseline_tokens_are_whole_files_of_sources(ws):
    r = naive_rag(ws, "login session routes", max_tokens=4096)
    texts = ci.file_texts(ws.store, r.sources)
    assert r.baseline_tokens == sum(count_tokens(texts[p]) for p in r.sources)


def test_tests_only_when_asked(ws):
    plain = naive_rag(ws, "test login accepts right password", max_tokens=4096)
    assert not any(p.startswith("tests/") for p in plain.sources)
    with_tests = naive_rag(ws, "test login accepts right password", max_tokens=4096, include_tests=True)
    assert "tests/test_auth.py" in with_tests.sources


def test_index_is_cached_and_rebuilt_when_files_change(ws):
    first = chunk_index(ws.store)
    assert chunk_index(ws.store) is first
    (ws.root / "app" / "extra.py").write_text("def frobnicate_widgets():\n    return 42\n", encoding="utf-8")
    ws.index()
    second = chunk_index(ws.store)
    assert second is not first
    r = naive_rag(ws, "frobnicate widgets", max_tokens=4096)
    assert r.sources == ["app/extra.py"]


def test_nothing_matching_gives_an_empty_slice(ws):
    r = naive_rag(ws, "zyxxyqq", max_tokens=4096)
    assert (r.context, r.tokens, r.baseline_tokens, r.sources, r.spans) == ("", 0, 0, [], [])


@pytest.mark.parametrize("query,max_tokens", [("", 100), ("   ", 100), ("x", 0), ("x", -3), ("x", "many"), (None, 10)])
def test_bad_input_is_a_query_error(ws, query, max_tokens):
    with pytest.raises(QueryError):
        naive_rag(ws, query, max_tokens=max_tokens)
