"""`memstrata mcp` on an index fresh from `memstrata index` (no file's tokens counted yet): a child
process counts them from the server's start, the answers are those of a counted index, and the
child is gone when the server is (stopped, or killed)."""

from __future__ import annotations

import os
import signal
import time

from memstrata.compressor import context_query, count_process
from memstrata.compressor.file_counts import count_missing
from memstrata.indexer.workspace import Workspace

from .raw_jsonrpc import INIT, INITIALIZED, RawServer, call


def _uncounted(root):
    with Workspace.open(root) as ws:
        ws.index()
        with ws.store.write() as conn:
            conn.execute("UPDATE files SET tokens = NULL")


def _counting_children(root) -> list[int]:
    """The counting children of any process that read this project's index."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"memstrata.compressor.count_process" in args and str(root).encode() in b" ".join(args):
                out.append(int(pid))
    return out


def _gone(pids: list[int], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                        alive.append(pid)
            except OSError:
                pass
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _server(memstrata_exe, root, tmp_path) -> RawServer:
    return RawServer([memstrata_exe, "mcp", "--project", str(root), "--no-watch"], env=dict(os.environ),
                     stderr=tmp_path / "mcp.stderr")


def test_a_server_on_an_uncounted_index_counts_it_in_a_child_it_outlives(project_copy, tmp_path, memstrata_exe,
                                                                          wait_until):
    root = project_copy("python_project")
    _uncounted(root)
    question = "how is a user authenticated"
    server = _server(memstrata_exe, root, tmp_path)
    try:
        children = []
        # The child is started before the server has even answered initialize.
        wait_until(lambda: children.extend(_counting_children(root)) or children, timeout=30,
                   message="a counting child")
        server.send(INIT, INITIALIZED, call(1, "context_query", {"query": question, "max_tokens": 2000}))
        answer = server.replies_until(1)[-1]["result"]["structuredContent"]
        with Workspace.open(root) as ws:
            wait_until(lambda: ws.store.execute("SELECT count(*) FROM files WHERE tokens IS NULL")[0][0] == 0,
                       timeout=30, message="every file counted")
            assert context_query(ws, question, max_tokens=2000).api_fields() == answer
        server.close_and_collect()
        assert _gone(children)
    finally:
        server.stop()


def test_a_killed_server_takes_its_counting_child_with_it(project_copy, tmp_path, memstrata_exe, wait_until):
    root = project_copy("python_project")
    _uncounted(root)
    server = _server(memstrata_exe, root, tmp_path)
    try:
        children = []
        wait_until(lambda: children.extend(_counting_children(root)) or children, timeout=30,
                   message="a counting child")
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=30)
        assert _gone(children)
    finally:
        server.stop()


def test_a_child_is_started_only_for_an_index_with_files_left_to_count(project_copy):
    """A server on an index a first server already counted starts none (half a second of a core)."""
    root = project_copy("python_project")
    path = root / ".memstrata" / "index.db"
    assert not count_process.needed(path)  # no index yet
    _uncounted(root)
    assert count_process.needed(path)
    with Workspace.open(root) as ws:
        count_missing(ws)
    assert not count_process.needed(path)
    assert not count_process.needed(root / ".memstrata" / "elsewhere.db")
    assert not (root / ".memstrata" / "elsewhere.db").exists()  # looking made no file
