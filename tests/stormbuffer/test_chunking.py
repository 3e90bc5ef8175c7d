"""Chunking of record bodies and the retrieval text of each chunk."""

from __future__ import annotations

from memstrata.stormbuffer.chunking import MAX_CHUNK_WORDS, chunk_body, retrieval_text, sections


def texts(body: str) -> list[str]:
    return [c.text for c in chunk_body(body)]


def test_paragraphs_under_one_heading_merge():
    assert texts("one two\n\nthree four\n") == ["one two\n\nthree four"]


def test_headings_split_and_are_not_chunk_text():
    chunks = chunk_body("# Deploy\nfirst part\n\n## Rollback\nsecond part\n\n# Other\nthird\n")
    assert [(c.heading, c.text) for c in chunks] == [
        ("Deploy", "first part"), ("Deploy / Rollback", "second part"), ("Other", "third")]
    assert [c.ordinal for c in chunks] == [0, 1, 2]


def test_only_headings_gives_no_chunks():
    assert chunk_body("# A\n## B\n") == []


def test_fenced_blocks_are_atomic_whatever_their_length():
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(200)) + "\n```"
    body = f"intro\n{code}\nafter\n"
    out = texts(body)
    assert out == ["intro", code, "after"]
    assert len(out[1].split()) > MAX_CHUNK_WORDS
    assert texts("~~~\nunclosed\n\nstill code") == ["~~~\nunclosed\n\nstill code"]


def test_list_runs_are_atomic_to_the_next_blank_line():
    body = "Steps:\n1. build\n2. test\n- ship it\n\ntail words\n"
    assert texts(body) == ["Steps:", "1. build\n2. test\n- ship it", "tail words"]
    # A first word ending in '.' starts a list run too (e.g. "e.g."), as in Stormbuffer.
    assert [s.atomic for s in sections("plain\ne.g. this line\n")] == [False, True]


def test_long_paragraphs_split_into_160_word_pieces():
    words = [f"w{i}" for i in range(400)]
    out = texts(" ".join(words))
    assert [len(t.split()) for t in out] == [160, 160, 80]
    assert out[0] == " ".join(words[:160])


def test_packing_stops_at_160_words_counting_the_separator():
    a, b = " ".join(["a"] * 100), " ".join(["b"] * 59)
    assert texts(f"{a}\n\n{b}") == [f"{a}\n\n{b}"]          # 100 + 1 + 59 = 160
    b60 = " ".join(["b"] * 60)
    assert texts(f"{a}\n\n{b60}") == [a, b60]               # 161 would not fit


def test_retrieval_text_layout():
    assert retrieval_text("T", "A / B", ["x", "y"], ["t"], "id.md", "body") == "T\nA / B\nx y\nt\nid.md\nbody"
