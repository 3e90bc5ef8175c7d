"""The resident query process (issue 24): real `memstrata` processes, a real daemon, real signals.

Every answer through the daemon is compared byte for byte with the same
command run in-process (``MEMSTRATA_DAEMON=off``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, MEMSTRATA, REPO

QUERIES = [
    ("query", "AuthService.login and its callers"),
    ("query", "how are passwords hashed", "--json"),
    ("query", "session handling", "--max-tokens", "200"),
    ("query", "login", "--include-tests", "--json"),
    ("query", "zzzz nothing matches qqqq"),
    ("query", "login", "--max-tokens", "0"),  # refused: exit 2 and one sentence
    ("symbol", "AuthService.login", "--body"),
    ("symbol", "Auth*", "--json"),
    ("symbol", "no_such_name_anywhere"),  # refused with near names
    ("refs", "hash_password", "--json"),
    ("outline", "app/auth/service.py"),
]


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "python_project", root)
    return root


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    e = dict(os.environ)
    e["MEMSTRATA_HOME"] = str(tmp_path / "home")
    e["MEMSTRATA_DAEMON"] = "on"
    e["MEMSTRATA_DAEMON_IDLE"] = "120"  # a test that fails leaves no process behind for long
    e.pop("PYTHONSTARTUP", None)
    return e


def run(env, *args, cwd=None, daemon=True, timeout=120) -> subprocess.CompletedProcess:
    e = dict(env, MEMSTRATA_DAEMON="on" if daemon else "off")
    return subprocess.run([MEMSTRATA, *args], capture_output=True, env=e, cwd=cwd, timeout=timeout)


def answer(proc: subprocess.CompletedProcess) -> tuple[int, bytes, bytes]:
    return proc.returncode, proc.stdout, proc.stderr


def status(env, root: Path) -> dict:
    proc = run(env, "daemon", "status", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def wait_for(condition, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what() if callable(what) else what}")


def serving(env, root: Path) -> dict:
    """Wait until a daemon of this build answers for ``root``; its status."""
    log = root / ".memstrata" / "daemon.log"

    def ready():
        st = status(env, root)
        if st["same_build"] and st.get("served") is not None:
            return st
        if st["pid"] and not st["same_build"]:
            # The sources changed since it started (someone edited the tree):
            # the next call replaces it, as it would an older release.
            run(env, "query", "login", str(root))
        return None

    return wait_for(ready, what=lambda: f"a daemon serving the project; status {status(env, root)}, "
                                        f"daemon.log: {log.read_text() if log.exists() else None!r}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (the daemon is nobody's child here but init's).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def socket_file(root: Path) -> Path:
    return root / ".memstrata" / "daemon.sock"


def socket_is_live_or_gone(root: Path) -> bool:
    path = socket_file(root)
    if not path.exists():
        return True
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


@pytest.fixture
def indexed(project, env):
    assert run(env, "index", str(project)).returncode == 0
    yield project
    run(env, "daemon", "stop", str(project))


def test_answers_through_the_daemon_are_the_in_process_answers(indexed, env):
    root = indexed
    first = run(env, *QUERIES[0], str(root))
    assert answer(first) == answer(run(env, *QUERIES[0], str(root), daemon=False))  # started one, answered here
    before = serving(env, root)
    for q in QUERIES:
        expected = answer(run(env, *q, str(root), daemon=False))
        assert answer(run(env, *q, str(root))) == expected, q
    # Named from a folder inside the project (the nearest parent with an index), relative paths.
    sub = root / "app" / "auth"
    for q in QUERIES[:2]:
        assert answer(run(env, *q, cwd=sub)) == answer(run(env, *q, cwd=sub, daemon=False))
        assert answer(run(env, *q, "../..", cwd=sub)) == answer(run(env, *q, "../..", cwd=sub, daemon=False))
    after = status(env, root)
    assert after["pid"] == before["pid"]
    assert after["served"] >= before["served"] + len(QUERIES) + 4  # the daemon really answered them

    # Another process changes the index: the daemon's next answers follow it.
    service = root / "app" / "auth" / "service.py"
    service.write_text(service.read_text() + "\n\ndef rotate_login_keys(keys):\n    return sorted(keys)\n")
    assert run(env, "index", str(root)).returncode == 0
    q = ("query", "rotate_login_keys", "--json")
    got = run(env, *q, str(root))
    assert answer(got) == answer(run(env, *q, str(root), daemon=False))
    assert b"rotate_login_keys" in got.stdout
    assert status(env, root)["pid"] == before["pid"]


def test_socket_is_private_and_status_and_stop(indexed, env):
    root = indexed
    assert "not running" in run(env, "daemon", "status", str(root)).stdout.decode()
    started = run(env, "daemon", "start", str(root))
    assert started.returncode == 0 and b"started" in started.stdout, started.stderr
    st = os.lstat(socket_file(root))
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    text = run(env, "daemon", "status", str(root)).stdout.decode()
    assert text.startswith("running: pid ")
    pid = status(env, root)["pid"]
    stopped = run(env, "daemon", "stop", str(root))
    assert stopped.returncode == 0 and f"stopped (pid {pid})".encode() in stopped.stdout
    wait_for(lambda: not alive(pid), what="the daemon to exit")
    assert not socket_file(root).exists()
    assert "not running" in run(env, "daemon", "stop", str(root)).stdout.decode()


def test_idle_daemon_leaves_and_removes_its_socket(indexed, env):
    root = indexed
    env = dict(env, MEMSTRATA_DAEMON_IDLE="1")
    run(env, *QUERIES[0], str(root))  # answered in-process; starts a daemon that leaves after 1 s idle
    # Followed in its log rather than by asking it: a question is not idleness, and one asked by a
    # new `memstrata` process each time can come later than its second on a loaded machine.
    log = root / ".memstrata" / "daemon.log"

    def left() -> str | None:
        text = log.read_text() if log.exists() else ""
        return text if "stopped after" in text else None  # its last line, once the socket is removed

    text = wait_for(left, what=lambda: f"the daemon to serve, then leave; daemon.log: "
                                       f"{log.read_text() if log.exists() else None!r}")
    serving_line = re.search(r"serving .* \(pid (\d+), build \S+, idle timeout 1 s\)", text)
    assert serving_line and "leaving: idle for 1 s" in text, text
    wait_for(lambda: not alive(int(serving_line.group(1))), timeout=30, what="the idle daemon to exit")
    assert not socket_file(root).exists()


def _answer_of(root: Path) -> dict | None:
    """What the daemon listening at the project's socket answers to a status question (a client
    of any build gets an answer: a refusal naming the daemon's pid); None when nothing does."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(str(socket_file(root)))
            s.sendall(b'{"op": "status", "build": "a test"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    return None
                data += chunk
    except OSError:
        return None
    return json.loads(data)


def _has_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == str(path):
                    return True
    return False


def test_a_daemon_slow_to_get_going_waits_its_idle_time_for_a_first_question(indexed, env):
    """The idle time counts from when the daemon listens: getting going took longer than it here
    (a daemon being replaced held the lock; a loaded machine or a large graph does the same), and
    the daemon must still answer a question asked at once, not leave before anyone could ask."""
    root = indexed
    lock = root / ".memstrata" / "daemon.lock"
    held = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.lockf(held, fcntl.LOCK_EX)  # the daemon it replaces, not gone yet
    proc = subprocess.Popen([sys.executable, "-m", "memstrata", "daemon", "run", "--project", str(root),
                             "--idle-timeout", "3", "--lock-wait", "120", "--replacing"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=str(root))
    try:
        try:
            wait_for(lambda: _has_open(proc.pid, lock) or proc.poll() is not None,
                     what="the daemon to wait for the lock")
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(4)  # longer than its idle timeout goes by before it can start
        finally:
            os.close(held)  # lets go of the lock
        wait_for(lambda: socket_file(root).exists() or proc.poll() is not None, what="the daemon to listen")
        reply = _answer_of(root)
        assert reply is not None and reply["pid"] == proc.pid, (reply, proc.poll())
        _, err = proc.communicate(timeout=60)  # it leaves after 3 s without a question of its own build
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and b"leaving: idle for 3 s" in err, err
    assert not socket_file(root).exists()


def test_stale_socket_of_a_killed_daemon_is_replaced(indexed, env):
    root = indexed
    run(env, *QUERIES[0], str(root))
    pid = serving(env, root)["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), what="the daemon to die")
    assert socket_file(root).exists()  # what a SIGKILL leaves
    assert "a killed daemon's socket is left" in run(env, "daemon", "status", str(root)).stdout.decode()
    expected = answer(run(env, *QUERIES[1], str(root), daemon=False))
    assert answer(run(env, *QUERIES[1], str(root))) == expected
    new = serving(env, root)
    assert new["pid"] != pid
    assert answer(run(env, *QUERIES[1], str(root))) == expected


def test_a_stopped_daemon_is_not_waited_for_and_is_replaced(indexed, env):
    """A daemon that cannot answer (SIGSTOP: job control, a debugger) acknowledges nothing: the
    query answers in-process at once instead of waiting out the answer timeout (300 s, far
    beyond this run's 60 s limit), and the stopped daemon is replaced."""
    root = indexed
    run(env, *QUERIES[0], str(root))
    pid = serving(env, root)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        st = status(env, root)
        assert st["pid"] == pid and st["stopped"] and not st["answering"]
        assert "stopped" in run(env, "daemon", "status", str(root)).stdout.decode()
        expected = answer(run(env, *QUERIES[1], str(root), daemon=False))
        assert answer(run(env, *QUERIES[1], str(root), timeout=60)) == expected
        wait_for(lambda: not alive(pid), what="the stopped daemon to leave")
        new = serving(env, root)
        assert new["pid"] != pid
        assert answer(run(env, *QUERIES[1], str(root), timeout=60)) == expected
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_a_busy_daemon_is_not_replaced(indexed, env):
    """One that takes a while to acknowledge (answering another call) is left running: the
    query answers in-process, and the daemon goes on serving."""
    root = indexed
    run(env, *QUERIES[0], str(root))
    before = serving(env, root)
    pid = before["pid"]
    path = socket_file(root)
    expected = answer(run(env, *QUERIES[1], str(root), daemon=False))
    # Occupy the daemon (it takes one call at a time): a connection whose request never ends. It
    # trickles in, a blank at a time, so the daemon waits on it for as long as the query runs
    # (one that sent nothing would be dropped after REQUEST_TIMEOUT, 5 s, and a query slower than
    # that to start on a loaded machine would find the daemon free and be served by it).
    hog = socket.socket(socket.AF_UNIX)
    hog.connect(str(path))
    hog.sendall(b"{")
    done = threading.Event()

    def trickle() -> None:
        with contextlib.suppress(OSError):
            while not done.wait(0.5):
                hog.sendall(b" ")

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        assert answer(run(env, *QUERIES[1], str(root), timeout=60)) == expected
        assert alive(pid)
    finally:
        done.set()
        feeder.join()
        hog.close()
    after = serving(env, root)
    assert after["pid"] == pid
    # The query answered in-process was not also run by the daemon once it was free: it took
    # the request, found its client gone, and dropped it (a client that waited would have had it
    # served: one more served request).
    assert after["served"] == before["served"]


def test_a_start_asked_for_before_daemon_stop_does_not_start_after_it(indexed, env):
    """A command asks for a daemon, which is slow to get going (a loaded machine); the user runs
    `daemon stop` before it holds its lock. It must not start serving afterwards."""
    root = indexed
    folder = root / ".memstrata"
    argv = [sys.executable, "-m", "memstrata", "daemon", "run", "--project", str(root),
            "--requested-at", str(time.time_ns())]
    late = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, cwd=str(root))
    try:
        os.kill(late.pid, signal.SIGSTOP)  # still in the interpreter's start-up: no lock taken
        stopped = run(env, "daemon", "stop", str(root))
        assert stopped.returncode == 0 and stopped.stdout == b"not running\n", stopped
    finally:
        os.kill(late.pid, signal.SIGCONT)
    try:
        _, err = late.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        late.kill()
        late.communicate()
        pytest.fail("the daemon started after `daemon stop` and is serving")
    assert late.returncode == 0, err
    assert b"not starting" in err
    assert not socket_file(root).exists()
    assert not status(env, root)["running"]
    # A start asked for after the stop starts as usual.
    assert run(env, "daemon", "start", str(root)).returncode == 0
    assert serving(env, root)["pid"]
    run(env, "daemon", "stop", str(root))


# A start queued behind a daemon: it takes the lock the instant it is let go, and (asked for
# before `daemon stop`) gives up and lets go.  Here it holds on longer, as on a loaded machine,
# in the moment before it writes its pid into the lock file.
_QUEUED_START = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.lockf(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_stop_is_not_fooled_by_a_queued_start_holding_the_lock_for_an_instant(indexed, env):
    """`daemon stop` reported "did not stop" when, right as it looked, a start queued behind the
    daemon held the lock on its way out: stop now waits until it holds the lock itself."""
    root = indexed
    assert run(env, "daemon", "start", str(root)).returncode == 0
    pid = serving(env, root)["pid"]
    stopped = run(env, "daemon", "stop", str(root))
    assert stopped.returncode == 0 and f"stopped (pid {pid})".encode() in stopped.stdout, stopped
    wait_for(lambda: not alive(pid), what="the daemon to exit")
    # The daemon is gone; the queued start holds the lock for a moment, then leaves.
    queued = subprocess.Popen([sys.executable, "-c", _QUEUED_START, str(root / ".memstrata" / "daemon.lock"),
                               "1.5"], stdout=subprocess.PIPE)
    try:
        assert queued.stdout.readline() == b"held\n"
        again = run(env, "daemon", "stop", str(root))
        assert again.returncode == 0 and again.stdout == b"not running\n", again
        assert queued.wait(timeout=30) == 0
    finally:
        if queued.poll() is None:
            queued.kill()
            queued.wait()
    assert not status(env, root)["running"]


def test_sigkill_mid_query_twenty_times(indexed, env):
    """Every call answers (in-process or through a new daemon), and no stale socket is left."""
    root = indexed
    q = ("-v", *QUERIES[1])
    expected = run(env, *QUERIES[1], str(root), daemon=False)
    assert expected.returncode == 0
    run(env, *QUERIES[0], str(root))
    mid_query = 0
    last_err = b""
    for round_no in range(20):
        print(f"round {round_no}; the last client said {last_err.decode(errors='replace')[-600:]}")
        if not status(env, root)["running"]:
            # The last kill landed after its client had its answer: nobody has
            # seen the socket go stale yet, and the next call replaces it.
            assert answer(run(env, *QUERIES[1], str(root))) == answer(expected)
        pid = serving(env, root)["pid"]
        # Stopped, the daemon cannot answer before the kill lands: the client
        # is surely waiting mid-question when it dies.
        stop_first = round_no % 4 != 0  # the last round is one: its client saw the daemon die
        if stop_first:
            os.kill(pid, signal.SIGSTOP)
        client = subprocess.Popen([MEMSTRATA, *q, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env)
        if stop_first:
            line = b""
            while b"request sent" not in line:
                line = client.stderr.readline()
                assert line, "the client never reached the daemon"
            mid_query += 1
        else:
            time.sleep(0.05 * (round_no % 7))  # anywhere in the client's life
        os.kill(pid, signal.SIGKILL)
        out, err = client.communicate(timeout=120)
        assert client.returncode == 0, err
        last_err = err
        assert out == expected.stdout, f"round {round_no}"
        wait_for(lambda: not alive(pid), what="the killed daemon to go")
    assert mid_query == 15
    # The last client saw the daemon die and started a new one (maybe still
    # coming up): the socket file is a live daemon's, never a dead one's.
    wait_for(lambda: socket_is_live_or_gone(root), what="no stale socket")
    st = serving(env, root)
    assert answer(run(env, *QUERIES[1], str(root))) == answer(expected)
    run(env, "daemon", "stop", str(root))
    wait_for(lambda: not alive(st["pid"]), what="the last daemon to stop")
    assert not socket_file(root).exists()


def _listener(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen(4)
    s.setblocking(False)
    return s


def _was_connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("fault", ["foreign uid", "mode 0666"])
def test_a_socket_that_is_not_the_users_own_is_never_used(indexed, env, fault):
    root = indexed
    if fault == "foreign uid" and os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    path = socket_file(root)
    listener = _listener(path)
    try:
        if fault == "foreign uid":
            os.chmod(path, 0o600)
            os.chown(path, 65534, 65534)
        else:
            os.chmod(path, 0o666)
        expected = run(env, *QUERIES[1], str(root), daemon=False)
        got = run(env, *QUERIES[1], str(root))
        assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout)
        warning = "belongs to uid 65534" if fault == "foreign uid" else "has mode 0666 instead of 0600"
        assert warning.encode() in got.stderr
        assert b"Traceback" not in got.stderr
        assert not _was_connected(listener)
        time.sleep(0.5)
        assert os.lstat(path).st_ino == os.fstat(listener.fileno()).st_ino or path.exists()
        assert "not used" in run(env, "daemon", "status", str(root)).stdout.decode()
    finally:
        listener.close()


@pytest.mark.parametrize("left", ["file", "folder", "socket of mode 0755"])
def test_what_is_left_where_the_socket_goes_is_explained_and_stop_clears_it(indexed, env, left):
    root = indexed
    path = socket_file(root)
    if left == "file":
        path.write_text("junk")
    elif left == "folder":
        path.mkdir()
    else:
        _listener(path).close()  # a socket nothing listens on any more
        os.chmod(path, 0o755)
    expected = run(env, *QUERIES[1], str(root), daemon=False)
    got = run(env, *QUERIES[1], str(root))
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout)
    assert b"memstrata daemon stop" in got.stderr and b"Traceback" not in got.stderr
    start = run(env, "daemon", "start", str(root))
    assert start.returncode == 2 and b"memstrata daemon stop" in start.stderr
    stop = run(env, "daemon", "stop", str(root))
    assert stop.returncode == 0 and b"removed the" in stop.stdout, stop.stdout
    assert not path.exists() and not path.is_symlink()
    assert run(env, "daemon", "start", str(root)).returncode == 0
    assert serving(env, root)["pid"]


def test_a_folder_with_files_where_the_socket_goes_is_kept_and_stop_says_so(indexed, env):
    """Stop never deletes a user's files: a folder holding some at the socket's path stays, and
    stop fails saying what is there, instead of reporting "not running" as if all were well."""
    path = socket_file(indexed)
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    stop = run(env, "daemon", "stop", str(indexed))
    assert stop.returncode == 2, stop
    assert b"is a folder, not a socket: not removed" in stop.stderr and b"Traceback" not in stop.stderr
    assert (path / "notes.txt").read_text() == "mine"


def _older_memstrata(dest: Path) -> Path:
    """A second installation of this code claiming another release: what a daemon
    left running across an upgrade is."""
    site = dest / "site"
    pkg = site / "memstrata"
    shutil.copytree(REPO / "memstrata", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for layer in ("storage", "indexer", "compressor", "mcp_server", "harness"):
        shutil.copytree(REPO / layer, pkg / layer, ignore=shutil.ignore_patterns("__pycache__"))
    init = pkg / "__init__.py"
    text = init.read_text()
    assert '__version__ = "' in text
    init.write_text(text.replace('__version__ = "', '__version__ = "0.0.1.old-', 1))
    return site


@pytest.mark.parametrize("name", ["python", "python3"])
def test_an_interpreter_path_with_dot_dot_is_the_same_build(indexed, env, name):
    # `../../venv/bin/python -m memstrata`: the same interpreter and code as the console script
    # (whichever of the venv's names for it the script's first line uses).
    dotted = os.path.relpath(Path(MEMSTRATA).parent / name, indexed)  # relative: kept as written
    assert dotted.startswith("..")
    started = subprocess.run([dotted, "-m", "memstrata", "daemon", "start", str(indexed)], capture_output=True,
                             env=env, timeout=120, cwd=indexed)
    assert started.returncode == 0 and b"started" in started.stdout, started.stderr
    st = status(env, indexed)  # asked through the console script
    assert st["same_build"], st
    pid = st["pid"]
    assert run(env, "query", "login", str(indexed)).returncode == 0
    assert status(env, indexed)["pid"] == pid  # served, not replaced


def test_a_daemon_of_another_version_is_refused_and_replaced(indexed, env, tmp_path):
    root = indexed
    site = _older_memstrata(tmp_path / "old")
    old_env = dict(env, PYTHONPATH=str(site))
    old = subprocess.Popen([sys.executable, "-m", "memstrata", "daemon", "run", "--project", str(root)],
                           env=old_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(tmp_path))
    try:
        st = wait_for(lambda: (lambda s: s if s["pid"] else None)(status(env, root)), what="the old daemon")
        assert st["pid"] == old.pid and not st["same_build"] and st["build"].startswith("0.0.1.old-")
        expected = run(env, *QUERIES[1], str(root), daemon=False)
        got = run(env, *QUERIES[1], str(root))
        assert answer(got) == answer(expected)
        assert old.wait(timeout=30) == 0  # it was told to go, and went
        new = serving(env, root)
        assert new["pid"] != old.pid and new["same_build"]
        assert answer(run(env, *QUERIES[1], str(root))) == answer(expected)
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()


def test_a_project_deeper_than_a_socket_address_allows(tmp_path, env):
    deep = tmp_path
    while len(str(deep)) < 140:
        deep = deep / "a_rather_long_folder_name"
    root = deep / "proj"
    shutil.copytree(FIXTURES / "python_project", root)
    assert run(env, "index", str(root)).returncode == 0
    try:
        expected = answer(run(env, *QUERIES[0], str(root), daemon=False))
        assert answer(run(env, *QUERIES[0], str(root))) == expected
        before = serving(env, root)["served"]
        assert answer(run(env, *QUERIES[0], str(root))) == expected
        assert status(env, root)["served"] == before + 1
    finally:
        run(env, "daemon", "stop", str(root))


def test_off_switch_and_unindexed_projects_start_nothing(project, env):
    proc = run(env, "query", "login", str(project))
    assert proc.returncode == 2 and b"not indexed yet" in proc.stderr
    assert not (project / ".memstrata").exists()
    assert run(env, "index", str(project)).returncode == 0
    off = dict(env, MEMSTRATA_DAEMON="off")
    subprocess.run([MEMSTRATA, "query", "login", str(project)], env=off, capture_output=True, check=True)
    time.sleep(1.0)
    assert not socket_file(project).exists()
    assert not status(env, project)["running"]


def test_a_project_file_named_like_a_standard_module_is_never_run(project, env, tmp_path):
    """The daemon runs in the project folder: a project's own `logging.py` or `selectors.py`
    must not stand in for the standard library's (it would run the project's code on a
    `memstrata query`, and the daemon would fail to start).  Nor for `python -m memstrata`."""
    marker = tmp_path / "ran"
    for name in ("logging", "selectors", "socket"):
        (project / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n"
                                            "raise ImportError('a project file, not the standard library')\n")
    assert run(env, "index", str(project)).returncode == 0
    try:
        assert run(env, "query", "login", str(project)).returncode == 0
        serving(env, project)
        e = dict(env, MEMSTRATA_DAEMON="off")
        by_module = subprocess.run([sys.executable, "-m", "memstrata", "query", "login"], cwd=project, env=e,
                                   capture_output=True, timeout=120)
        assert by_module.returncode == 0 and b"login" in by_module.stdout, by_module.stderr
        assert not marker.exists(), marker.read_text()
    finally:
        run(env, "daemon", "stop", str(project))
