"""Lexical ranking, match reasons, the word budget, and that pruning common clauses changes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memstrata.stormbuffer.core import Core, View
from memstrata.stormbuffer.retrieval import fts_clauses, query_terms
from memstrata.stormbuffer.stores import init_store
from memstrata.stormbuffer import index_db as sb

from .helpers import hand_written

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def core(sbuf):
    view = View.resolve("project", cwd=sbuf.project, env=sbuf.env)
    init_store(view.selected, shared=False)
    c = Core(view)
    yield c
    c.close()


def context(core, query, **fields):
    envelope = core.invoke("context", {"version": 1, "query": query, **fields})
    assert envelope["ok"], envelope
    return envelope["result"]


def test_terms_and_expression():
    assert query_terms("Release-constraint, v2_api!") == ["release", "constraint", "v2_api"]
    assert [c.expr for c in fts_clauses(["deploy"])] == ['"deploy"*']
    assert [c.expr for c in fts_clauses(["a", "b"])] == ['"a b"', '"a"*', '"b"*']
    assert fts_clauses(["v2_api"])[0].floor_token == "v2"


def test_match_reasons_and_boosts(core, sbuf):
    recs = sbuf.records
    title = hand_written(recs, title="Deploy window", body="unrelated words here\n")
    alias = hand_written(recs, title="Other", body="nothing to see\n", aliases=["deploy window"])
    phrase = hand_written(recs, title="Third", body="we open the deploy window at noon\n")
    prefix = hand_written(recs, title="Fourth", body="deployment of windows\n")
    named = hand_written(recs, title="Fifth", body="plain text\n", name="deploy window.md")
    blocks = context(core, "Deploy window")["blocks"]
    reasons = {b["record_id"]: b["ranking_reasons"][0] for b in blocks}
    assert reasons == {title: "lexical:exact_title", alias: "lexical:exact_alias", phrase: "lexical:phrase",
                       prefix: "lexical:prefix", named: "lexical:term"}
    assert [b["record_id"] for b in blocks[:2]] == [title, alias]
    for b in blocks:
        boost = {"exact_title": 3.0, "exact_alias": 2.0, "phrase": 1.0, "prefix": 0.5,
                 "term": 0.0}[b["ranking_reasons"][0].split(":")[1]]
        assert 0 < b["score"] - boost <= 1.0
    file_hit = context(core, f"{named}.md")["blocks"]
    assert file_hit == [] or file_hit[0]["ranking_reasons"] != ["lexical:exact_filename"]
    assert context(core, "deploy window.md")["blocks"][0]["ranking_reasons"] == ["lexical:exact_filename"]


def test_budget_assembly(core, sbuf):
    long = hand_written(sbuf.records, title="Long", body=" ".join(f"budget{i}" for i in range(150)) + "\n")
    short = hand_written(sbuf.records, title="Short", body="budget word\n")
    result = context(core, "budget", budget=10)
    blocks, receipt = result["blocks"], result["receipt"]
    assert [b["record_id"] for b in blocks] == [short, long]
    assert blocks[0]["text"] == "budget word" and blocks[0]["token_count"] == 2
    assert blocks[1]["text"] == " ".join(f"budget{i}" for i in range(8)) and blocks[1]["token_count"] == 8
    assert receipt["used_tokens"] == 10 and receipt["truncated"] is True and receipt["omitted_results"] == 0
    one = context(core, "budget", budget=2)
    assert len(one["blocks"]) == 1 and one["receipt"]["omitted_results"] == 1 and one["receipt"]["truncated"]
    assert len(context(core, "budget", limit=1)["blocks"]) == 1


def test_blocks_are_capped_at_64_kib(core, sbuf):
    hand_written(sbuf.records, title="Wide", body=("é" * 40_000) + " wide\n")
    (block,) = context(core, "wide")["blocks"]
    assert len(block["text"].encode()) <= 65_536 and context(core, "wide")["receipt"]["truncated"] is True


def test_the_result_is_deterministic_apart_from_the_receipt_id_and_time(core, sbuf):
    for n in range(5):
        hand_written(sbuf.records, title=f"Cache {n}", body=f"cache entries expire after {n} minutes\n")
    first, second = context(core, "cache expire"), context(core, "cache expire")
    for r in (first, second):
        del r["receipt"]["receipt_id"], r["receipt"]["retrieved_at"]
    assert first == second


def _paragraphs() -> list[str]:
    """Real prose: the paragraphs of this repository's own documentation."""
    out = []
    for path in sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]:
        for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            if len(para.split()) >= 8 and not para.lstrip().startswith(("```", "|")):
                out.append(para.strip() + "\n")
    return out


def test_pruning_near_universal_clauses_keeps_the_ranking(core, sbuf):
    paras = _paragraphs()
    assert len(paras) > 80
    for n, text in enumerate(paras):
        hand_written(sbuf.records, title=f"Doc paragraph {n}", body=text,
                     status="archived" if n % 7 == 0 else "active")
    proj = core.view.projection(core.view.selected)
    proj.sync()
    store = proj.store()
    rows = store.execute("SELECT count(*) FROM sbuf_chunks")[0][0]
    pruned_any = False
    for query in ("the index of the project", "a the of to", "what does the proxy do with a request",
                  "paragraph", "the", "tokens and the budget"):
        clauses = fts_clauses(query_terms(query))
        common = [c for c in clauses if c.floor_token and 2 * sb._doc_count(store._conn, c.floor_token) >= rows]
        pruned_any |= bool(common)
        for limit in (5, 40, 200):
            filters = dict(statuses=["active"], accesses=["agent"], scopes=["project:demo-project"])
            fast = sb.search(store, clauses, limit=limit, **filters)
            params: list = []
            where = (sb._in("r.status", ["active"], params) + sb._in("r.access", ["agent"], params)
                     + sb._in("r.scope", ["project:demo-project"], params))
            sql = (f"SELECT {sb._HIT_COLUMNS}, bm25(sbuf_fts) AS score FROM sbuf_fts"
                   " JOIN sbuf_chunks c ON c.id = sbuf_fts.rowid JOIN sbuf_records r ON r.file_id = c.file_id"
                   f" JOIN sbuf_files f ON f.id = c.file_id WHERE sbuf_fts MATCH ?{where}"
                   " ORDER BY score, r.id, c.ordinal LIMIT ?")
            every = [sb._hit(row[:-1], row[-1]) for row in
                     store.execute(sql, (" OR ".join(c.expr for c in clauses), *params, 100_000))]
            exact = every[:limit]
            score = {(h.record.id, h.ordinal): h.bm25 for h in every}
            assert len(fast) == len(exact), (query, limit)
            selective = [h for h in exact if h.bm25 < -1e-4]
            # Position by position the fast list holds rows of the same exact score, to within the
            # millionths a pruned clause can add (rows that close may trade places); only the order
            # among rows that matched nothing but near-universal words is left open.
            for f, e in zip(fast, selective):
                assert abs(score[(f.record.id, f.ordinal)] - e.bm25) < 1e-5, (query, limit)
                assert abs(f.bm25 - score[(f.record.id, f.ordinal)]) < 1e-5
    assert pruned_any  # the corpus really has words in at least half of all chunks
