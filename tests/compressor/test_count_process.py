"""Whole-file token counts made by a child process (a server's first minutes on a fresh index):
saved exact, the same answers whoever counted, nothing broken or left behind when the child is
killed, and the child never outliving the process that started it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from memstrata.compressor import context_query, count_process, count_tokens, file_counts
from memstrata.compressor.file_counts import count_missing, start_counting
from memstrata.indexer.watcher import Changes
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

from ..conftest import write_files


@contextlib.contextmanager
def _uncounted(root: Path):
    """An indexed workspace over ``root`` whose files have no token counts yet."""
    with Workspace.open(root) as ws:
        ws.index()
        with ws.store.write() as conn:
            conn.execute("UPDATE files SET tokens = NULL")
        yield ws


def _counts(ws: Workspace) -> dict[str, int | None]:
    return dict(ws.store.execute("SELECT path, tokens FROM files"))


def _exact(ws: Workspace) -> bool:
    rows = ws.store.execute("SELECT f.tokens, t.text FROM files f JOIN file_text t ON t.file_id = f.id")
    return bool(rows) and all(tokens == count_tokens(text) for tokens, text in rows)


def _finish(counting: file_counts.Counting) -> None:
    assert counting.thread is not None
    counting.thread.join(60)
    assert not counting.thread.is_alive()


def _project(root: Path, files: int = 3) -> Path:
    return write_files(root, {f"pkg/mod{i}.py": "".join(f"def f{i}_{k}(x):\n    return x * {k}\n\n\n"
                                                          for k in range(20 + i)) for i in range(files)})


def test_counts_made_by_a_child_process_are_saved_exact(project_copy):
    with _uncounted(project_copy("python_project")) as ws:
        counting = start_counting(ws, in_child=True)
        _finish(counting)
        assert counting.child is not None and counting.child.returncode == 0  # the child counted them
        assert _exact(ws)
        assert ci.uncounted_files(ws.store) == []
        assert count_missing(ws) == 0  # nothing was left for this process


def test_a_question_answers_alike_whoever_counted_the_files(project_copy):
    question = "how is a user authenticated"
    answers = []
    for how in ("child", "thread", "the question itself"):
        with _uncounted(project_copy("python_project")) as ws:
            if how == "child":
                _finish(start_counting(ws, in_child=True))
            elif how == "thread":
                count_missing(ws)
            answers.append(context_query(ws, question, max_tokens=2000).api_fields())
    assert answers[0]["baseline_tokens"] > 0
    assert answers[0] == answers[1] == answers[2]


def test_a_child_killed_before_it_counted_leaves_a_whole_index_counted_by_the_server(project_copy, monkeypatch):
    spawn = count_process.spawn

    def spawn_and_kill(*args):
        child = spawn(*args)
        child.kill()
        return child

    monkeypatch.setattr(count_process, "spawn", spawn_and_kill)
    with _uncounted(project_copy("python_project")) as ws:
        counting = start_counting(ws, in_child=True)
        _finish(counting)
        assert counting.child.returncode == -signal.SIGKILL
        assert ws.store.execute("PRAGMA integrity_check")[0][0] == "ok"
        assert _exact(ws)  # what the child did not send, this process counted


def test_a_child_killed_midway_leaves_only_right_counts(tmp_path, monkeypatch):
    """Killed after its first batch: what was saved is exact, and the rest is counted here."""
    monkeypatch.setattr(file_counts, "BATCH", 1)  # this process's own counting, after the child
    root = _project(tmp_path / "p", files=80)  # three of the child's batches
    save, spawn = file_counts._save, count_process.spawn
    children, killed = [], []

    def save_then_kill(store, rows, stop):
        ok = save(store, rows, stop)
        if children and not killed:
            children[0].kill()
            killed.append(len(rows))
        return ok

    monkeypatch.setattr(file_counts, "_save", save_then_kill)
    monkeypatch.setattr(count_process, "spawn", lambda *a: children.append(spawn(*a)) or children[0])
    with _uncounted(root) as ws:
        counting = start_counting(ws, in_child=True)
        _finish(counting)
        assert killed and ws.store.execute("PRAGMA integrity_check")[0][0] == "ok"
        assert _exact(ws) and ci.uncounted_files(ws.store) == []


def test_a_count_for_a_file_rewritten_meanwhile_is_not_saved(tmp_path, monkeypatch):
    root = _project(tmp_path / "p")
    save = file_counts._save
    rewritten = []

    def rewrite_then_save(store, rows, stop):
        if not rewritten:  # between the child's reading of the texts and their counts' saving
            (root / "pkg/mod0.py").write_text("def changed():\n    return 'a text of another size'\n")
            ws.apply_changes(Changes(files={"pkg/mod0.py"}, dirs=set()))
            rewritten.append(rows)
        return save(store, rows, stop)

    monkeypatch.setattr(file_counts, "_save", rewrite_then_save)
    with _uncounted(root) as ws:
        _finish(start_counting(ws, in_child=True))
        assert rewritten and "pkg/mod0.py" in {path for _, path, _ in rewritten[0]}
        assert _exact(ws)  # the new text's count, made here, not the old text's from the child


def test_a_child_never_outlives_the_process_that_started_it(tmp_path):
    """Even when a process forked from its parent holds the pipes open (a parse worker), the child
    sees its parent gone and ends; and it leaves nothing in the project folder."""
    root = _project(tmp_path / "p", files=40)
    with _uncounted(root):
        pass
    before = _outside_the_index(root)
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(root / ".memstrata" / "index.db")],
                              stdout=subprocess.PIPE, text=True)
    child, forked = (int(x) for x in parent.stdout.readline().split())
    try:
        assert _alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 3 * count_process.PARENT_CHECK_S + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        for pid in (child, forked):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert _outside_the_index(root) == before
    # In the index's folder, only the database's own files (a reader's WAL companions).
    assert {p.name for p in (root / ".memstrata").iterdir()} <= {
        ".gitignore", "index.db", "index.db-wal", "index.db-shm", "index.lock"}


# The parent: starts the child and holds it as while a question is answered, forks a process that
# keeps every pipe open (and so keeps the child's stdin from reaching its end), says both pids and
# waits.
_PARENT = """
import os, sys, time
from pathlib import Path
from memstrata.compressor import count_process
child = count_process.spawn(Path(sys.argv[1]), 32000)
os.write(child.stdin.fileno(), count_process.HOLD)  # held: it would wait for its go for ever
forked = os.fork()
if forked == 0:
    time.sleep(60)
    os._exit(0)
print(child.pid, forked, flush=True)
time.sleep(60)
"""


def _outside_the_index(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".memstrata" not in p.parts)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_child_finding_no_index_makes_none(tmp_path):
    root = _project(tmp_path / "p")
    with _uncounted(root) as ws:
        path = ws.store.path
    for f in path.parent.iterdir():
        f.unlink()
    path.parent.rmdir()
    # Its stdin stays open (as a server's does): the child ends on its own, having found no index.
    child = subprocess.Popen([sys.executable, "-P", "-m", "memstrata.compressor.count_process", str(path), "32000",
                              str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.read() == b"" and child.wait(60) == 1
    finally:
        child.stdin.close()
    assert not path.parent.exists()


def test_no_child_is_started_when_every_file_is_counted(project_copy, monkeypatch):
    spawned = []
    spawn = count_process.spawn
    monkeypatch.setattr(count_process, "spawn", lambda *a: spawned.append(a) or spawn(*a))
    with _uncounted(project_copy("python_project")) as ws:
        count_missing(ws)
        counting = start_counting(ws, in_child=True)
        _finish(counting)
        assert spawned == [] and counting.child is None
