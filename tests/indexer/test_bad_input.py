"""Bad input an index run must survive (issue 2's list, one test or more each).

Real files, real parses, real `memstrata` subprocesses; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from memstrata.indexer.watcher import Changes
from memstrata.indexer.worker import Skipped, process_file, read_bytes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import Store
from memstrata.storage import code_index as ci

from ..conftest import drop_dac_capabilities



def index(root: Path):
    """Index ``root`` in-process; returns (summary, workspace). Caller closes the workspace."""
    ws = Workspace.open(root, workers=1)
    return ws.index(), ws


def symbols(store, path: str) -> set[str]:
    return {r[0] for r in store.execute(
        "SELECT s.qualname FROM symbols s JOIN files f ON f.id = s.file_id WHERE f.path = ?", (path,))}


def file_row(store, path: str):
    rows = store.execute("SELECT status, error, encoding, lines FROM files WHERE path = ?", (path,))
    return rows[0] if rows else None


def skipped(store) -> dict[str, str]:
    return {p: r for p, r in store.execute("SELECT path, reason FROM skipped")}


@pytest.fixture
def proj(tmp_path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "ok.py").write_text("def fine():\n    return 1\n")
    return root


# -- syntax errors ---------------------------------------------------------------


def test_syntax_error_indexes_what_parses_and_marks_the_file(proj, run_cli):
    (proj / "bad.py").write_text(
        "def good_before():\n    return 1\n\n\n"
        "def broken(:\n    pass\n\n\n"
        "def good_after():\n    return good_before()\n"
    )
    summary, ws = index(proj)
    with ws:
        assert summary.syntax_errors == 1
        status, error, _, _ = file_row(ws.store, "bad.py")
        assert status == "syntax_error"
        assert "line 5" in error
        assert {"good_before", "good_after"} <= symbols(ws.store, "bad.py")
        assert ws.graph.callees("bad.py::good_after") == ["bad.py::good_before"]
        assert file_row(ws.store, "ok.py")[0] == "ok"
    status = json.loads(run_cli("status", str(proj), "--json").stdout)
    assert status["syntax_errors"] == 1
    assert status["files_indexed"] == 2
    assert status["status"] == "ready"


def test_a_file_name_that_is_not_utf8_is_reported_and_the_rest_indexed(proj, run_cli):
    # Bytes a Latin-1 system wrote in a name: the file and a directory so named are left out,
    # named in the skipped list with U+FFFD, and the run (and every later one) finishes.
    os.makedirs(os.fsencode(proj) + b"/lib\xe9", exist_ok=True)
    for name in (b"/bad\xffname.py", b"/lib\xe9/inner.py"):
        with open(os.fsencode(proj) + name, "wb") as fh:
            fh.write(b"def hidden():\n    return 1\n")
    (proj / "after.py").write_text("def also_fine():\n    return 2\n")
    for _ in range(2):
        summary, ws = index(proj)
        with ws:
            assert symbols(ws.store, "after.py") == {"also_fine"} and symbols(ws.store, "ok.py") == {"fine"}
            assert {p: r for p, r in skipped(ws.store).items() if r == "name_not_utf8"} == {
                "bad\ufffdname.py": "name_not_utf8", "lib\ufffd": "name_not_utf8"}
            # What the watcher hands over for such a file is set aside the same way.
            ws.apply_changes(Changes({os.fsdecode(b"bad\xffname.py"), "after.py"}, {os.fsdecode(b"lib\xe9")}))
            assert ws.store.get_meta("status") == "ready"
    shown = run_cli("status", str(proj), "--skipped")
    assert shown.returncode == 0 and "name_not_utf8" in shown.stdout


# -- encodings -------------------------------------------------------------------


def test_non_utf8_file_is_decoded_as_cp1252(proj):
    (proj / "latin.py").write_bytes(b"# caf\xe9\ndef f(): pass\n")
    _, ws = index(proj)
    with ws:
        assert symbols(ws.store, "latin.py") == {"f"}
        assert file_row(ws.store, "latin.py")[2] == "cp1252"
        assert ci.file_text(ws.store, "latin.py").startswith("# café\n")


def test_mixed_encoding_keeps_utf8_and_replaces_the_stray_byte(proj):
    data = "# café, naïve résumé, crème brûlée\n".encode() + b"# stray \xff byte\n" + b"def g():\n    return 'ok'\n"
    (proj / "mixed.py").write_bytes(data)
    _, ws = index(proj)
    with ws:
        assert symbols(ws.store, "mixed.py") == {"g"}
        assert file_row(ws.store, "mixed.py")[2] == "utf-8+replaced"
        text = ci.file_text(ws.store, "mixed.py")
        assert "crème brûlée" in text and "stray \ufffd byte" in text


def test_utf8_bom_is_accepted(proj):
    (proj / "bom.py").write_bytes(b"\xef\xbb\xbfdef with_bom():\n    pass\n")
    _, ws = index(proj)
    with ws:
        assert symbols(ws.store, "bom.py") == {"with_bom"}
        assert file_row(ws.store, "bom.py")[2] == "utf-8-sig"


# -- binary and empty files ------------------------------------------------------------


def test_binary_file_with_source_extension_is_skipped(proj):
    (proj / "blob.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8)
    (proj / "image.js").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00\xff" * 300)
    summary, ws = index(proj)
    with ws:
        assert ci.file_paths(ws.store) == ["ok.py"]
        assert skipped(ws.store)["blob.py"] == "binary"
        assert skipped(ws.store)["image.js"] == "binary"
        assert summary.skipped["binary"] == 2
        # A skipped file is accounted for: right after a run the index is not stale.
        st = ws.status()
        assert (st.status, st.message) == ("ready", None)


def test_empty_file_is_indexed_without_symbols(proj):
    (proj / "empty.py").write_bytes(b"")
    (proj / "pkg").mkdir()
    (proj / "pkg/__init__.py").write_bytes(b"")
    _, ws = index(proj)
    with ws:
        assert file_row(ws.store, "empty.py") == ("ok", None, "utf-8", 0)
        assert symbols(ws.store, "empty.py") == set()
        assert "pkg/__init__.py" in ci.file_paths(ws.store)
        assert ws.status().status == "ready"


# -- a 50 MB file -----------------------------------------------------------------


def test_fifty_megabyte_file_is_skipped_as_too_large(proj):
    big = proj / "huge.py"
    size = 50 * 1024 * 1024
    with open(big, "wb") as fh:  # sparse: a real 50 MB file that costs no disk or time
        fh.write(b"def huge():\n    pass\n")
        fh.seek(size - 1)
        fh.write(b"\n")
    assert big.stat().st_size == size
    summary, ws = index(proj)
    with ws:
        assert ws.store.execute("SELECT path, reason, size FROM skipped WHERE reason = 'too_large'") == [
            ("huge.py", "too_large", size)]
        assert summary.skipped["too_large"] == 1
        assert ci.file_paths(ws.store) == ["ok.py"]
        # The watcher's path for a single file applies the same cap.
        s = ws.indexer.update_paths(["huge.py"])
        assert s.parsed == 0 and "huge.py" not in ci.file_paths(ws.store)
        assert skipped(ws.store)["huge.py"] == "too_large"
    # Reading is capped too: at most cap + 1 bytes are read before giving up.
    assert read_bytes(str(big), "huge.py", 1024) == Skipped("huge.py", "too_large", None)


# -- symlinks ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_symlink_loops_do_not_hang(proj, tmp_path):
    (proj / "a").mkdir()
    (proj / "b").mkdir()
    (proj / "a/mod_a.py").write_text("def in_a(): pass\n")
    (proj / "b/mod_b.py").write_text("def in_b(): pass\n")
    os.symlink("../b", proj / "a/to_b")  # a -> b -> a
    os.symlink("../a", proj / "b/to_a")
    os.symlink(".", proj / "here")  # a directory linking to itself
    os.symlink("loop.py", proj / "loop.py")  # a file linking to itself
    os.symlink("missing.py", proj / "dangling.py")
    os.symlink("ok.py", proj / "alias.py")  # inside the project: indexed
    outside = tmp_path / "outside.py"
    outside.write_text("def outside(): pass\n")
    os.symlink(outside, proj / "escape.py")
    os.symlink(tmp_path, proj / "escape_dir")  # a folder outside: reported as such, not as a language
    summary, ws = index(proj)
    with ws:
        assert ci.file_paths(ws.store) == ["a/mod_a.py", "alias.py", "b/mod_b.py", "ok.py"]
        reasons = skipped(ws.store)
        assert reasons["loop.py"] == "unreadable"
        assert reasons["dangling.py"] == "unreadable"
        assert reasons["escape.py"] == "symlink_outside_project"
        assert reasons["escape_dir/"] == "symlink_outside_project"
        os.symlink(tmp_path, proj / "late_dir")  # made while a watcher runs: listed the same way
        ws.apply_changes(Changes({"late_dir"}, set()))
        assert skipped(ws.store)["late_dir/"] == "symlink_outside_project"
        assert not any(p.startswith(("here", "a/to_b", "b/to_a")) for p in reasons)  # links inside: their targets are walked
        assert symbols(ws.store, "alias.py") == {"fine"}
        again = ws.index()
        assert again.parsed == 0 and again.unchanged == 4



@pytest.mark.timeout(60)
def test_a_fifo_named_like_source_is_listed_and_never_opened(proj):
    """A FIFO is never opened (a read would wait for a writer forever); the full scan and the
    watcher's path list it as not a regular file, and forget it once it is gone."""
    os.mkfifo(proj / "pipe.py")
    summary, ws = index(proj)
    with ws:
        assert "pipe.py" not in ci.file_paths(ws.store)
        assert skipped(ws.store)["pipe.py"] == "not_a_regular_file"
        os.mkfifo(proj / "late.py")
        ws.apply_changes(Changes({"late.py"}, set()))
        assert skipped(ws.store)["late.py"] == "not_a_regular_file"
        (proj / "late.py").unlink()
        ws.apply_changes(Changes({"late.py"}, set()))
        assert "late.py" not in skipped(ws.store)
        (proj / "pkg").mkdir()
        os.symlink("pkg", proj / "pkg_link")  # a folder link inside: walked under its real path, never listed
        ws.apply_changes(Changes({"pkg_link"}, set()))
        assert not any(p.startswith("pkg_link") for p in skipped(ws.store))


def test_a_file_link_leading_outside_made_while_watching_is_never_indexed(proj, tmp_path):
    """What the watcher hands over is judged as the full scan judges it: a new symlink to a file
    outside the project, or an indexed file replaced by one, is not read (its code would be served)."""
    secret = tmp_path / "secret.py"
    secret.write_text("def outside_leak():\n    return 'SECRET'\n")
    (proj / "swapped.py").write_text("def was_here(): pass\n")
    summary, ws = index(proj)
    with ws:
        assert "swapped.py" in ci.file_paths(ws.store)
        os.symlink(secret, proj / "late_link.py")
        (proj / "swapped.py").unlink()
        os.symlink(secret, proj / "swapped.py")
        os.symlink(tmp_path, proj / "late_dir")
        ws.apply_changes(Changes({"late_link.py", "swapped.py", "late_dir/secret.py"}, set()))
        paths = ci.file_paths(ws.store)
        assert not {"late_link.py", "swapped.py", "late_dir/secret.py"} & set(paths)
        reasons = skipped(ws.store)
        assert reasons["late_link.py"] == reasons["swapped.py"] == "symlink_outside_project"
        assert all("SECRET" not in (ci.file_text(ws.store, p) or "") for p in paths)


# -- permission denied -----------------------------------------------------------------------

def test_permission_denied_file_is_skipped_as_unreadable(proj, cli_env, memstrata_exe):
    secret = proj / "secret.py"
    secret.write_text("def hidden(): pass\n")
    secret.chmod(0)
    locked_dir = proj / "locked"
    locked_dir.mkdir()
    (locked_dir / "inner.py").write_text("def inner(): pass\n")
    locked_dir.chmod(0)
    preexec = drop_dac_capabilities if os.geteuid() == 0 else None
    try:
        probe = subprocess.run(
            ["cat", str(secret)], preexec_fn=preexec, capture_output=True)
        if probe.returncode == 0:
            pytest.skip("chmod 000 does not deny reads here (cannot drop root's DAC override)")
        proc = subprocess.run([memstrata_exe, "index", str(proj), "--json"], preexec_fn=preexec,
                              capture_output=True, text=True, timeout=120, env=cli_env)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["files"] == 1
        assert out["skipped"].get("unreadable") == 2
        status = subprocess.run([memstrata_exe, "status", str(proj), "--json"], preexec_fn=preexec,
                                capture_output=True, text=True, timeout=120, env=cli_env)
        assert status.returncode == 0, status.stderr
        st = json.loads(status.stdout)
        assert st["status"] == "ready", st
        assert st["skipped"]["unreadable"] == 2
    finally:
        secret.chmod(0o644)
        locked_dir.chmod(0o755)
    with Store(proj / ".memstrata/index.db", readonly=True) as store:
        assert ci.file_paths(store) == ["ok.py"]
        assert skipped(store)["secret.py"] == "unreadable"
        assert skipped(store)["locked"] == "unreadable"


# -- files that vanish between listing and reading ---------------------------------------------


def test_file_deleted_before_reading_is_skipped_as_vanished(proj):
    outcome = process_file(str(proj), "gone.py", "python", 1024 * 1024)
    assert outcome == Skipped("gone.py", "vanished", None)
    (proj / "doomed.py").write_text("def doomed(): pass\n")
    _, ws = index(proj)
    with ws:
        assert "doomed.py" in ci.file_paths(ws.store)
        (proj / "doomed.py").unlink()
        # The watcher hands over a path that no longer exists.
        summary = ws.indexer.update_paths(["doomed.py", "never-existed.py"])
        assert summary.removed_paths == ["doomed.py"]
        assert ci.file_paths(ws.store) == ["ok.py"]
        assert ws.store.execute("SELECT count(*) FROM symbols WHERE name = 'doomed'") == [(0,)]


# -- SIGKILL in the middle of a cold index -------------------------------------------------------

_FUNCS = "".join(
    f"\n\ndef helper_{{i}}_{j}(value, other=None):\n    \"\"\"Helper {j}.\"\"\"\n"
    f"    return helper_{{i}}_{(j + 1) % 30}(value) + len(str(other))\n"
    for j in range(30)
)


def make_project(root: Path, n: int) -> None:
    """``n`` small Python modules of 30 functions each, 100 per package."""
    for i in range(n):
        d = root / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f'"""Module {i}."""\n' + _FUNCS.format(i=i))


def committed_files(db: Path) -> int:
    with Store(db, readonly=True) as store:
        return store.execute("SELECT count(*) FROM files")[0][0]


def meta_status(db: Path) -> str | None:
    with Store(db, readonly=True) as store:
        return store.get_meta("status")


@pytest.mark.timeout(180)
def test_sigkill_mid_cold_index_then_next_run_finishes(tmp_path, run_cli, cli_env, wait_until, memstrata_exe):
    n = 2000
    root = tmp_path / "many"
    make_project(root, n)
    db = root / ".memstrata/index.db"
    proc = subprocess.Popen([memstrata_exe, "index", str(root), "--json"], env=cli_env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: db.exists() and committed_files(db) > 0, timeout=60,
                   message="the first committed batch of the cold index")
        assert proc.poll() is None, "the index run finished before it could be killed; make the project larger"
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its parse workers, all at once
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    with Store(db, readonly=True) as store:
        assert store.integrity_ok()
        done = store.execute("SELECT count(*) FROM files")[0][0]
        assert store.get_meta("status") == "indexing"
    assert 0 < done < n

    status = json.loads(run_cli("status", str(root), "--json").stdout)
    assert status["status"] == "stale"
    assert status["message"] == (f"the first index run was interrupted after {done:,} files; "
                                 "run memstrata index to finish it")
    assert (status["files_indexed"], status["last_indexed"]) == (done, None)
    plain = run_cli("status", str(root)).stdout
    assert "last indexed:  no index run has finished yet" in plain and "never" not in plain, plain

    out = json.loads(run_cli("index", str(root), "--json").stdout)
    assert out["files"] == n
    # What the killed run committed is kept; the rest is parsed now.
    assert (out["unchanged"], out["parsed"]) == (done, n - done)
    status = json.loads(run_cli("status", str(root), "--json").stdout)
    assert (status["status"], status["files_indexed"]) == ("ready", n)
    assert status["symbols"] == 30 * n
    with Store(db, readonly=True) as store:
        assert store.integrity_ok()
    finished = status["last_indexed"]

    # A later run killed in its turn: the index keeps the last finished run's time and says so.
    for path in sorted(root.glob("pkg*/*.py")):
        path.write_text(path.read_text() + "\n\ndef added(value):\n    return value\n")
    proc = subprocess.Popen([memstrata_exe, "index", str(root)], env=cli_env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: meta_status(db) == "indexing", timeout=60,
                   message="the second run under way")
        assert proc.poll() is None, "the second run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    status = json.loads(run_cli("status", str(root), "--json").stdout)
    assert (status["status"], status["last_indexed"]) == ("stale", finished)
    assert status["message"].startswith("the last index run (started ")
    assert status["message"].endswith(f"was interrupted; {n:,} files indexed, some may be out of date; "
                                      "run memstrata index to finish it")


# -- two processes at once --------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_two_index_processes_at_once(tmp_path, cli_env, memstrata_exe):
    n = 600
    root = tmp_path / "shared"
    make_project(root, n)
    cmd = [memstrata_exe, "index", str(root), "--json"]
    procs = [subprocess.Popen(cmd, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=150) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
    summaries = [json.loads(out) for out, _ in results]
    # One process writes; the other waits for the writer lock, then finds nothing to do.
    assert sorted(s["parsed"] for s in summaries) == [0, n]
    assert all(s["files"] == n for s in summaries)
    with Store(root / ".memstrata/index.db", readonly=True) as store:
        assert store.integrity_ok()
        assert store.execute("SELECT count(*), count(DISTINCT path) FROM files") == [(n, n)]
        assert store.execute(
            "SELECT count(*) FROM (SELECT file_id, qualname FROM symbols GROUP BY 1, 2 HAVING count(*) > 1)"
        ) == [(0,)]
        assert store.execute("SELECT count(*) FROM symbols") == [(30 * n,)]
        assert store.execute("SELECT count(*) FROM symbols_fts") == [(30 * n,)]
        assert store.get_meta("status") == "ready"


def test_reader_sees_a_consistent_index_while_another_process_writes(tmp_path, cli_env, wait_until, memstrata_exe):
    """A second process reading (status) during a write gets an answer, not an error."""
    root = tmp_path / "busy"
    make_project(root, 800)
    db = root / ".memstrata/index.db"
    proc = subprocess.Popen([memstrata_exe, "index", str(root), "--json"], env=cli_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: db.exists() and committed_files(db) > 0, timeout=60, message="a first commit")
        st = subprocess.run([memstrata_exe, "status", str(root), "--json"], env=cli_env,
                            capture_output=True, text=True, timeout=60)
        assert st.returncode == 0, st.stderr
        status = json.loads(st.stdout)
        if proc.poll() is None:
            assert status["status"] in ("indexing", "ready")
        assert status["files_indexed"] > 0
    finally:
        out, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, err
    assert json.loads(out)["files"] == 800


# -- a file the parser cannot finish in time ---------------------------------------------------


def _slow_python(lines: int) -> str:
    # Comment lines after an indented block: tree-sitter's Python parser takes time growing with
    # the square of their number (8,000 lines about a second, 40,000 about forty); the tests
    # below give it 50 ms.
    return "def big():\n    return 1\n" + "# pad\n" * lines


def test_a_parse_past_its_deadline_is_given_up_and_the_parser_works_on(monkeypatch):
    from memstrata.indexer import parse

    monkeypatch.setattr(parse, "GUARD_BYTES", 1024)
    monkeypatch.setattr(parse, "PARSE_SECONDS", 0.05)
    monkeypatch.setattr(parse, "PARSE_BYTES_PER_SECOND", 10**12)
    with pytest.raises(parse.ParseTimeout):
        parse.parse_rows("slow.py", "python", _slow_python(8_000).encode())
    assert parse.parse_definitions("slow.py", "python", _slow_python(8_000).encode()) == []
    # The same parser (one per language and process) parses the next input from its start, given
    # time enough for it on a loaded machine (the deadline above is for the input that must miss it).
    monkeypatch.setattr(parse, "PARSE_SECONDS", 60.0)
    result, _ = parse.parse_rows("ok.py", "python", ("def fine():\n    pass\n" * 5000).encode())
    assert [s.name for s in result.symbols][:1] == ["fine"] and len(result.symbols) == 5000


def test_a_file_the_parser_cannot_finish_in_time_is_skipped_as_such(proj, monkeypatch):
    from memstrata.indexer import parse

    monkeypatch.setattr(parse, "GUARD_BYTES", 1024)
    monkeypatch.setattr(parse, "PARSE_SECONDS", 0.05)
    monkeypatch.setattr(parse, "PARSE_BYTES_PER_SECOND", 10**12)
    (proj / "slow.py").write_text(_slow_python(8_000))
    summary, ws = index(proj)  # a few files: parsed in this process, with the deadline above
    with ws:
        assert "slow.py" not in ci.file_paths(ws.store)
        assert skipped(ws.store)["slow.py"] == "parse_timeout"
        assert "ok.py" in ci.file_paths(ws.store)
        # Not tried again until it changes: each try costs the whole deadline.
        monkeypatch.setattr(parse, "PARSE_SECONDS", 60.0)
        again = ws.index()
        assert again.parsed == 0 and skipped(ws.store)["slow.py"] == "parse_timeout"
        (proj / "slow.py").write_text("def quick():\n    return 2\n")
        ws.index()
        assert "slow.py" in ci.file_paths(ws.store) and "slow.py" not in skipped(ws.store)


def test_resolved_references_that_cannot_be_saved_are_said_in_one_line(proj, monkeypatch, caplog):
    # A full disk under a read-only command (query, refs): the answer stands, and the warning is a
    # sentence, not a traceback.
    import contextlib

    from memstrata.indexer.graph import CodeGraph
    from memstrata.storage import StoreFull

    summary, ws = index(proj)
    with ws:
        ws._graph = CodeGraph.load(ws.store)
        assert isinstance(ws._graph, CodeGraph)
        monkeypatch.setattr(CodeGraph, "take_resolved_targets", lambda self: [("ok.py", 1)])

        @contextlib.contextmanager
        def full():
            raise StoreFull("the disk is full")
            yield

        monkeypatch.setattr(ws.store, "write", full)
        with caplog.at_level("WARNING"):
            ws._persist_targets()
    [record] = [r for r in caplog.records if "resolved references" in r.getMessage()]
    assert record.exc_info is None and "the disk is full" in record.getMessage()


@pytest.mark.timeout(120)
def test_a_comment_of_many_blank_lines_is_indexed_in_time(tmp_path):
    # A definition's leading comment loses its marks line by line: a hostile comment of blank
    # lines no longer costs the square of its length.
    root = tmp_path / "p"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "a.js").write_text("/** Returns one." + "\n" * 100_000 + "*/\nfunction one() { return 1 }\n")
    with Workspace.open(root) as ws:
        ws.index()
        assert ws.store.execute("SELECT qualname, docstring FROM symbols") == [("one", "Returns one.")]


def test_hostile_resolution_configs_are_read_in_time(tmp_path):
    # The configs an index run reads besides the sources: a one-line tsconfig whose strings never
    # close, and a Cargo.toml of many blank lines, once cost the square of their length to read.
    root = tmp_path / "p"
    (root / "src").mkdir(parents=True)
    (root / "tsconfig.json").write_text('{"compilerOptions": {"paths": {"x": "' + 'a\\"' * 90_000 + "\n")
    (root / "src" / "main.ts").write_text("export function main(): number { return 1 }\n")
    (root / "crate" / "src").mkdir(parents=True)
    (root / "crate" / "Cargo.toml").write_text('[package]\nname = "deep"\n[lib]\n' + "\n" * 600_000 + 'path = "src/lib.rs"\n')
    (root / "crate" / "src" / "lib.rs").write_text("pub fn deep() -> u8 { 1 }\n")
    (root / "crate" / "src" / "main.rs").write_text("use deep::deep;\nfn main() { deep(); }\n")
    with Workspace.open(root, workers=1) as ws:
        ws.index()
        assert {r[0] for r in ws.store.execute("SELECT qualname FROM symbols")} >= {"main", "deep"}
        # the crate's name still read beside the blank lines: `use deep::deep` finds its library
        assert ws.store.execute("SELECT i.target_path FROM imports i JOIN files f ON f.id = i.file_id"
                                " WHERE f.path = 'crate/src/main.rs'") == [("crate/src/lib.rs",)]
