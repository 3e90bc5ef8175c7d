"""A full disk during a cold or an incremental index, and a read-only index (issue 15 item 8):
one ``memstrata:`` line, a non-zero exit, and the index as it was.

The disk is a small tmpfs mounted for the test (root only); where the machine
cannot mount one the tests are skipped with the reason.
"""

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from memstrata.storage import Store

from .serve_helpers import copy_project


def _mount(path: Path, options: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir(parents=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command on this machine: cannot make a small disk")
    res = _mount(path, f"size={size},mode=0755")
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {res.stderr.strip()[:200]}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(disk: Path, leave: int) -> Path:
    """Write a filler file until only about ``leave`` bytes stay free."""
    filler = disk / "filler.bin"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f:
        remaining = max(free - leave, 0)
        block = b"\0" * (1 << 16)
        with contextlib.suppress(OSError):
            while remaining > 0:
                remaining -= f.write(block[:min(len(block), remaining)])
    return filler


def big_project(root: Path, files: int = 120, functions: int = 25) -> Path:
    copy_project(root)
    gen = root / "gen"
    gen.mkdir()
    for i in range(files):
        body = "\n\n".join(
            f"def handler_{i}_{j}(request, limit={j}):\n"
            f"    \"\"\"Handle request kind {j} of module {i}.\"\"\"\n"
            f"    total = sum(range(limit))\n    return request.respond(total + {i})"
            for j in range(functions))
        (gen / f"module_{i}.py").write_text(body + "\n")
    return root


def run(memstrata_exe, env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([memstrata_exe, *args], capture_output=True, text=True, env=env, timeout=300)


def one_message(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode != 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("memstrata:")]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], lines[0]


def files_table(db: Path) -> list[tuple]:
    with Store(db) as store:
        assert store.integrity_ok()
        return sorted(tuple(r) for r in store.execute("SELECT path, hash, size FROM files"))


def test_disk_full_during_a_cold_index(tmp_path, cli_env, memstrata_exe):
    with tmpfs(tmp_path / "disk", "8m") as disk:
        project = big_project(disk / "proj")
        filler = fill(disk, leave=96 * 1024)
        res = run(memstrata_exe, cli_env, "index", "--json", str(project))
        one_message(res, "disk is full")
        assert str(tmp_path) not in res.stderr  # no path outside the project
        filler.unlink()
        # nothing half-written got in the way: the next run finishes the job
        done = run(memstrata_exe, cli_env, "index", "--json", str(project))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["files"] == 130
        assert len(files_table(project / ".memstrata" / "index.db")) == 130


def test_disk_full_during_an_incremental_index(tmp_path, cli_env, memstrata_exe):
    with tmpfs(tmp_path / "disk", "8m") as disk:
        project = big_project(disk / "proj", files=40)
        assert run(memstrata_exe, cli_env, "index", "--json", str(project)).returncode == 0
        db = project / ".memstrata" / "index.db"
        before = files_table(db)
        for i in range(40):  # every generated module grows: one batch of re-parses
            p = project / "gen" / f"module_{i}.py"
            p.write_text(p.read_text() + "".join(
                f"\n\ndef added_{i}_{k}(x):\n    return x * {k} + {i}  # {'pad ' * 40}\n" for k in range(60)))
        filler = fill(disk, leave=32 * 1024)
        res = run(memstrata_exe, cli_env, "index", "--json", str(project))
        one_message(res, "disk is full")
        filler.unlink()
        assert files_table(db) == before  # the index is as it was
        st = json.loads(run(memstrata_exe, cli_env, "status", "--json", str(project)).stdout)
        assert st["status"] != "ready"  # and says it is behind
        assert run(memstrata_exe, cli_env, "index", "--json", str(project)).returncode == 0
        assert files_table(db) != before


def _exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] == "Z"  # a zombie has closed its files
    except OSError:
        return True


def test_read_only_index(tmp_path, cli_env, memstrata_exe):
    with tmpfs(tmp_path / "disk", "16m") as disk:
        project = copy_project(disk / "proj")
        assert run(memstrata_exe, cli_env, "index", str(project)).returncode == 0
        # A daemon ran and left (its lock file stays behind, as it does).
        assert run(memstrata_exe, cli_env, "daemon", "start", str(project)).returncode == 0
        stopped = run(memstrata_exe, cli_env, "daemon", "stop", str(project))
        assert stopped.returncode == 0 and "stopped (pid " in stopped.stdout, stopped.stdout + stopped.stderr
        pid = int(stopped.stdout.split("stopped (pid ", 1)[1].split(")", 1)[0])
        for _ in range(300):  # gone, with every file it had open on this disk
            if _exited(pid):
                break
            time.sleep(0.1)
        db = project / ".memstrata" / "index.db"
        digest = hashlib.sha256(db.read_bytes()).hexdigest()
        (project / "app" / "extra.py").write_text("def extra():\n    return 1\n")
        for _ in range(100):  # the stopped daemon may hold its log open for a moment longer
            res = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
            if res.returncode == 0 or "busy" not in res.stderr:
                break
            time.sleep(0.1)
        if res.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {res.stderr.strip()[:200]}")
        res = run(memstrata_exe, cli_env, "index", str(project))
        one_message(res, "read-only")
        assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
        # the read-only commands still answer from it
        st = run(memstrata_exe, cli_env, "status", "--json", str(project))
        assert st.returncode == 0, st.stderr
        assert json.loads(st.stdout)["files_indexed"] == 10
        q = run(memstrata_exe, cli_env, "query", "AuthService.login", str(project), "--json")
        assert q.returncode == 0 and "app/auth/service.py" in json.loads(q.stdout)["sources"], q.stderr
        assert run(memstrata_exe, cli_env, "savings", str(project)).returncode == 0
        # No daemon runs, and the read-only folder does not make one seem to be starting.
        st = run(memstrata_exe, cli_env, "daemon", "status", str(project))
        assert st.returncode == 0 and st.stdout.startswith("not running"), st.stdout + st.stderr
        stop = run(memstrata_exe, cli_env, "daemon", "stop", str(project))
        assert stop.returncode == 0 and stop.stdout.startswith("not running"), stop.stdout + stop.stderr


def _wait_for(check, seconds: float = 60.0) -> bool:
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def _grow(project: Path, files: int, name: str) -> None:
    for i in range(files):
        p = project / "gen" / f"module_{i}.py"
        p.write_text(p.read_text() + "".join(
            f"\n\ndef {name}_{i}_{k}(x):\n    return x * {k} + {i}  # {'pad ' * 40}\n" for k in range(60)))


def test_a_watcher_keeps_what_a_full_disk_refused_and_takes_it_once_there_is_room(tmp_path, monkeypatch):
    """The batch is not dropped: the index answers (stale, saying why) and takes the changes
    by itself once space is freed, with no edit or restart."""
    from memstrata.compressor import context_query
    from memstrata.indexer import watcher
    from memstrata.indexer.workspace import Workspace

    monkeypatch.setattr(watcher, "RETRY_FIRST_S", 0.2)
    with tmpfs(tmp_path / "disk", "8m") as disk:
        project = big_project(disk / "proj", files=40)
        with Workspace.open(project, workers=1) as ws:
            ws.index()
            ws.start_watching()
            filler = fill(disk, leave=700 * 1024)  # room for the edits (~480 KB), not for indexing them
            _grow(project, 40, "added")
            assert _wait_for(lambda: ws.quick_status() == "stale")
            st = ws.status()
            assert st.status == "stale" and "disk is full" in st.message
            r = context_query(ws, "handler_3_4", 1000)  # answered from the index as it was
            assert "def handler_3_4" in r.context
            filler.unlink()
            assert _wait_for(lambda: ws.quick_status() == "ready" and "gen/module_7.py::added_7_59" in ws.graph)
            assert ws.status().status == "ready"


def test_a_catch_up_a_full_disk_stopped_is_tried_again_by_the_watcher(tmp_path, monkeypatch):
    from memstrata.indexer import watcher
    from memstrata.indexer.workspace import Workspace
    from memstrata.storage import StoreFull

    monkeypatch.setattr(watcher, "RETRY_FIRST_S", 0.2)
    with tmpfs(tmp_path / "disk", "8m") as disk:
        project = big_project(disk / "proj", files=40)
        with Workspace.open(project, workers=1) as ws:
            ws.index()
        _grow(project, 40, "offline")  # edits while nothing watched
        filler = fill(disk, leave=32 * 1024)
        with Workspace.open(project, workers=1) as ws:
            ws.start_watching()  # as `memstrata mcp` starts: watch, then catch up
            with pytest.raises(StoreFull):
                ws.index()
            assert ws.quick_status() == "stale" and "disk is full" in ws.status().message
            filler.unlink()
            assert _wait_for(lambda: ws.quick_status() == "ready" and "gen/module_5.py::offline_5_0" in ws.graph)
