"""The code index's batch writer (storage/code_index.write_files): a batch of
files gets the rows and ids a file-at-a-time writer gives, and its search
rows reach FTS5 as one segment rather than one per file."""

from __future__ import annotations

from memstrata.storage import Store
from memstrata.storage import code_index as ci
from tests.index_rows import TABLES, index_rows

def item(path: str, version: int, n_symbols: int, n_refs: int, n_imports: int) -> tuple:
    """A file's rows as the indexer hands them over; ``version`` changes the content."""
    rec = ci.FileRecord(path, "python", 100 + version, 1_000 + version, f"{path}-{version}", "ok", None,
                        "utf-8", 10, False, 1.5)
    stem = path.replace("/", "_").removesuffix(".py")
    symbols = [(f"f{k}", f"{stem}.f{k}", "function", None, k * 10, k * 10 + 9, k + 1, k + 1,
                f"def f{k}(x{version})", None) for k in range(n_symbols)]
    refs = [(f"{stem}.f0", f"g{k}", "call", None, k + 1, 1) for k in range(n_refs)]
    imports = [(f"mod{k}", None, None, k + 1, None) for k in range(n_imports)]
    search = [(f"{stem} f{k}", f"def f{k}(x{version})", "", f"return word{version}x{k} {stem}")
              for k in range(n_symbols)]
    return rec, f"text of {path} v{version}\n", symbols, refs, imports, search


def test_a_batch_numbers_rows_as_writes_one_file_at_a_time(tmp_path):
    first = [item("a.py", 0, 3, 4, 1), item("b.py", 0, 2, 5, 2), item("c.py", 0, 4, 3, 0),
             item("d.py", 0, 1, 2, 1)]
    # Rewrites of the file holding the highest ids first (d), then of low (a)
    # and middle ones (b), with new files between them: a file rewritten
    # takes the largest id left after its old rows went, plus one.
    second = [item("d.py", 1, 5, 2, 2), item("a.py", 1, 2, 6, 1), item("e.py", 0, 3, 1, 1),
              item("b.py", 1, 0, 0, 3), item("f.py", 0, 2, 2, 0)]
    batched, single = Store(tmp_path / "batch.db"), Store(tmp_path / "single.db")
    for store in (batched, single):
        with store.write() as conn:
            ci.set_skipped(conn, "e.py", "binary", 10)
        with store.write() as conn:
            ci.write_files(conn, first)
        with store.write() as conn:
            ci.set_skipped(conn, "c.py", "too_large", 10**7)
    with batched.write() as conn:
        ids = ci.write_files(conn, second)
    with single.write() as conn:
        single_ids = [ci.write_file(conn, *f) for f in second]
    assert ids == single_ids
    got, want = index_rows(batched), index_rows(single)
    assert got == want
    # c became a skipped file and d's old rows went first: the new d is
    # numbered right after b, below where it was.
    assert ids == [3, 4, 5, 6, 7]
    assert got["skipped"] == [("c.py", "too_large", 10**7)]
    # Every search row belongs to its symbol, ids and text alike.
    assert [r[0] for r in got["search"]] == [r[0] for r in got["symbols"]]


def test_a_batch_of_search_rows_is_one_segment(tmp_path):
    files = [item(f"pkg/m{i}.py", 0, 3, 1, 0) for i in range(60)]
    batched = Store(tmp_path / "batch.db")
    with batched.write() as conn:
        ci.write_files(conn, files)
    # The same search rows in one statement of their own: one flush, one segment.
    reference = Store(tmp_path / "ref.db")
    with reference.write() as conn:
        conn.executemany("INSERT INTO symbols_fts(rowid, name, signature, doc, body) VALUES (?,?,?,?,?)",
                         [(sid, *row) for sid, row in enumerate((r for f in files for r in f[5]), 1)])
    count = "SELECT count(*) FROM symbols_fts_data"
    assert batched.execute(count) == reference.execute(count)
    assert index_rows(batched)["search"] == reference.execute(TABLES["search"])
    assert ci.search_symbols(batched, ["word0x2"], limit=5)[0][0] == 3
