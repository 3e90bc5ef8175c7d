"""How documents are found and cut into chunks (kura/chunking.py)."""

from __future__ import annotations

import os

import pytest

from memstrata.kura.chunking import (MAX_CODE_CHARS, MAX_PROSE_CHARS, SkipDocument, chunk_document,
                              decode_document, prose_chunks, table_chunks, walk_documents)


def test_paragraphs_split_on_blank_lines_and_headings_travel_with_their_text():
    text = "# Title\n\nFirst paragraph\nstill first.\n\n  \nSecond paragraph.\n\n## Tail\n"
    assert prose_chunks(text) == ["# Title\n\nFirst paragraph\nstill first.", "Second paragraph.", "## Tail"]


def test_fenced_code_is_not_cut_at_its_blank_lines():
    text = "Intro.\n\n```python\na = 1\n\nb = 2\n```\n\nAfter."
    assert prose_chunks(text) == ["Intro.", "```python\na = 1\n\nb = 2\n```", "After."]


def test_long_paragraph_is_cut_at_sentence_ends():
    sentence = "The quick brown fox jumps over the lazy dog. "
    chunks = prose_chunks(sentence * 100)
    assert len(chunks) > 1
    assert all(len(c) <= MAX_PROSE_CHARS for c in chunks)
    assert all(c.endswith(".") for c in chunks)
    assert "".join(c + " " for c in chunks).split() == (sentence * 100).split()


def test_csv_and_tsv_are_chunked_by_record():
    assert table_chunks('a,b\n1,"two\nlines"\n\n3,4\n', ",") == ["a,b", '1,"two\nlines"', "3,4"]


def test_a_table_record_is_bounded_like_a_paragraph():
    # a cell holding a whole document, and a line that is no CSV (an unterminated
    # quote): each is cut into pieces no longer than a long paragraph's
    cell = " ".join(f"word{i}" for i in range(3000))
    for text in (f'id,doc\n1,"{cell}"\n2,short\n', f'id,doc\n1,"{cell}\n'):
        chunks = table_chunks(text, ",")
        assert chunks[0] == "id,doc" and len(chunks) > 10
        assert max(len(c) for c in chunks) <= MAX_PROSE_CHARS
        assert " ".join(chunks[1:]).split() == text.split()[1:]  # nothing lost, in order

    assert chunk_document("t.tsv", "x\ty\n1\t2\n").chunks == ["x\ty", "1\t2"]
    assert chunk_document("t.csv", "x,y\n").kind == "table"


def test_code_is_cut_along_definitions():
    src = ("import os\n\n# helper for paths\ndef helper(p):\n    return os.path.join(p)\n\n\n"
           "class Service:\n    def run(self):\n        return helper('x')\n")
    chunked = chunk_document("pkg/mod.py", src)
    assert chunked.kind == "code:python"
    assert chunked.chunks == [
        "import os",
        "# helper for paths\ndef helper(p):\n    return os.path.join(p)",
        "class Service:\n    def run(self):\n        return helper('x')",
    ]


def test_a_class_too_long_for_one_chunk_is_cut_into_its_methods():
    methods = "".join(f"    def m{i}(self):\n" + "        x = 1\n" * 40 + "\n" for i in range(12))
    src = "class Big:\n    \"\"\"Doc.\"\"\"\n\n" + methods
    chunks = chunk_document("big.py", src).chunks
    assert chunks[0].startswith("class Big:")
    assert len(chunks) == 13
    assert all(c.lstrip().startswith("def m") for c in chunks[1:])
    assert all(len(c) <= MAX_CODE_CHARS for c in chunks)


def test_other_languages_use_their_grammar():
    src = "package main\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 2\n}\n"
    assert chunk_document("x.go", src).chunks == ["package main", "func A() int {\n\treturn 1\n}",
                                                  "func B() int {\n\treturn 2\n}"]


@pytest.mark.parametrize("data", [b"text\x00more", b"caf\xe9 au lait", b"\xff\xfe\x00h\x00i"])
def test_binary_probe_rejects_nul_and_invalid_utf8(data):
    with pytest.raises(SkipDocument):
        decode_document(data)


def test_invalid_utf8_after_the_probe_is_replaced_and_a_cut_character_is_fine():
    data = b"a" * 8191 + "é".encode() + b" tail \xff"
    text = decode_document(data)
    assert text.endswith(" tail \ufffd") and "é" in text
    assert decode_document(b"\xef\xbb\xbfhello") == "hello"


def test_walk_skips_hidden_ignored_binary_extensions(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("x")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "m.js").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "keep.txt").write_text("x")
    (tmp_path / "sub" / "skip.log").write_text("x")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / ".hidden.md").write_text("x")
    (tmp_path / "pic.JPG").write_bytes(b"x")
    (tmp_path / "notes.md").write_text("x")
    assert sorted(d.path for d in walk_documents(tmp_path)) == ["notes.md", "sub/keep.txt"]


def test_walk_reports_a_name_that_is_not_utf8_and_goes_on(tmp_path):
    base = os.fsencode(tmp_path)
    os.makedirs(base + b"/d\xe9", exist_ok=True)
    for name in (b"/bad\xff.md", b"/d\xe9/in.md"):
        with open(base + name, "wb") as fh:
            fh.write(b"text")
    (tmp_path / "notes.md").write_text("x")
    skipped = []
    found = [d.path for d in walk_documents(tmp_path, on_skip=lambda rel, reason: skipped.append((rel, reason)))]
    assert found == ["notes.md"]
    assert sorted(skipped) == [("bad\ufffd.md", "name_not_utf8"), ("d\ufffd", "name_not_utf8")]
