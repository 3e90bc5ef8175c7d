"""Fixtures shared by every test package.

Keep this small and generic: other test packages build on these names, so
add new helpers rather than renaming or changing the ones here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memstrata.indexer.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
# The console script installed beside the interpreter running the tests.
MEMSTRATA = str(Path(sys.executable).parent / "memstrata")


@pytest.fixture(autouse=True, scope="session")
def _cli_answers_in_process():
    """``memstrata query`` in a test answers in-process unless the test asks for the
    resident query process (tests/harness/test_daemon.py does): otherwise each
    test project would leave a daemon running for its idle timeout."""
    saved = os.environ.get("MEMSTRATA_DAEMON")
    os.environ["MEMSTRATA_DAEMON"] = "off"
    yield
    if saved is None:
        os.environ.pop("MEMSTRATA_DAEMON", None)
    else:
        os.environ["MEMSTRATA_DAEMON"] = saved


@pytest.fixture
def project_copy(tmp_path) -> Callable[[str], Path]:
    """``project_copy("python_project")`` -> a fresh copy of fixtures/<name> under tmp_path.

    Each call makes a new copy (a second copy of the same fixture gets a
    numbered folder), so tests can change files freely.
    """

    def copy(name: str) -> Path:
        src = FIXTURES / name
        if not src.is_dir():
            raise ValueError(f"no fixture project {name!r} in {FIXTURES}")
        dest = tmp_path / name
        n = 1
        while dest.exists():
            n += 1
            dest = tmp_path / f"{name}_{n}"
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
        return dest

    return copy


@pytest.fixture
def cli_env(tmp_path) -> dict[str, str]:
    """Environment for ``memstrata`` subprocesses: a private MEMSTRATA_HOME."""
    env = dict(os.environ)
    env["MEMSTRATA_HOME"] = str(tmp_path / "memstrata_home")
    env.pop("PYTHONSTARTUP", None)
    return env


@pytest.fixture
def run_cli(cli_env) -> Callable[..., subprocess.CompletedProcess]:
    """``run_cli("index", str(path), "--json")`` runs the real console script.

    Returns the CompletedProcess (text mode); ``check=True`` (the default)
    fails the test with the command's stderr when it exits non-zero.
    """

    def run(*args: str, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("env", cli_env)
        proc = subprocess.run([MEMSTRATA, *args], capture_output=True, text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            pytest.fail(f"memstrata {' '.join(args)} exited {proc.returncode}\n"
                        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    return run


def _wait_until(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.02,
               message: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds.

    A bounded wait, not a timing assertion: the deadline is generous and only
    there so a broken build fails instead of hanging.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # e.g. the file being read is mid-write
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            pytest.fail(f"timed out after {timeout}s waiting for {message}{detail}")
        time.sleep(interval)


@pytest.fixture
def wait_until() -> Callable[..., object]:
    """``wait_until(lambda: cond, timeout=10, message="...")``: bounded polling (see _wait_until)."""
    return _wait_until


@pytest.fixture
def memstrata_exe() -> str:
    """Path of the ``memstrata`` console script, for tests that need Popen."""
    return MEMSTRATA


@pytest.fixture(scope="module")
def python_ws(tmp_path_factory):
    """A workspace over an indexed copy of fixtures/python_project, shared by
    the tests of one module (they must not modify the project)."""
    root = tmp_path_factory.mktemp("python_ws") / "python_project"
    shutil.copytree(FIXTURES / "python_project", root)
    ws = Workspace.open(root)
    ws.index()
    yield ws
    ws.close()


def terminal_output(argv: list[str], env: dict, cwd=None, timeout: float = 120) -> tuple[int, bytes]:
    """Runs ``argv`` with a pseudo-terminal as its stdout and stderr: (exit code, the bytes it wrote)."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        out += chunk
    code = proc.wait(timeout=timeout)
    os.close(leader)
    return code, out


def write_files(root: Path, files: dict[str, str]) -> Path:
    """A project at ``root`` holding ``files`` (relative path -> text); ``root`` itself."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def indexed_workspace(root: Path, files: dict[str, str]) -> Workspace:
    """An open, indexed workspace over a small project of ``files`` (the caller closes it)."""
    w = Workspace.open(write_files(root, files))
    w.index()
    return w


def many_small_files(root: Path, packages: int, files: int = 100, functions: int = 40) -> Path:
    """A project of ``packages * files`` small Python modules: a first index of it takes seconds,
    long enough to stop one midway."""
    for d in range(packages):
        pkg = root / f"pkg{d}"
        pkg.mkdir(parents=True)
        for i in range(files):
            (pkg / f"mod{i}.py").write_text("".join(
                f"def f{d}_{i}_{k}(x):\n    return x + {k}\n\n\n" for k in range(functions)))
    return root


_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


@contextlib.contextmanager
def index_run_elsewhere(root: Path) -> Iterator[None]:
    """Another process holding the project's writer lock with the index marked in progress, as a
    cold index run does, for as long as the block runs."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from memstrata.indexer.project import WriterLock, open_store
        root = Path({str(root)!r})
        store = open_store(root)
        lock = WriterLock(root)
        lock.acquire()
        store.set_meta("status", "indexing")
        print("held", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def drop_dac_capabilities() -> None:
    """preexec_fn: root keeps its uid but loses the right to ignore file modes.

    Removing CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH from the bounding set
    before exec makes root honour a chmod the way any user does (dropping to
    nobody would fail where the interpreter lives under a 0700 /root).
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


@pytest.fixture
def honour_modes(tmp_path) -> Callable[..., object] | None:
    """The preexec_fn that makes a subprocess obey file modes (None when not root); skips the
    test where a read-only file stays writable even so."""
    preexec = drop_dac_capabilities if os.geteuid() == 0 else None
    probe = tmp_path / "mode_probe"
    probe.write_text("")
    probe.chmod(0o444)
    try:
        res = subprocess.run(["sh", "-c", f"echo x >> '{probe}'"], preexec_fn=preexec, capture_output=True)
    finally:
        probe.chmod(0o644)
        probe.unlink()
    if res.returncode == 0:
        pytest.skip("file modes do not stop writes here (cannot drop root's DAC override)")
    return preexec


@pytest.fixture(scope="session")
def pg_cluster(request):
    """A private PostgreSQL server (tests/pg_cluster.PgCluster) for the whole session.

    Started on first request only, so sessions without PostgreSQL tests pay
    nothing; stopped and deleted at session end, Ctrl-C included (a killed run's
    server shuts itself down and the next session deletes its folder).  Skips
    with the reason and the install command where the server or psycopg is missing.
    """
    from tests.pg_cluster import PgCluster, find_binaries, psycopg_missing

    binaries, missing = find_binaries()
    reasons = [r for r in (missing, psycopg_missing()) if r]
    if reasons:
        pytest.skip("PostgreSQL tests cannot run: " + "; ".join(reasons))
    cluster = PgCluster(binaries)
    request.addfinalizer(cluster.stop)
    return cluster.start()


@pytest.fixture
def pg_url(pg_cluster) -> Iterator[str]:
    """A libpq URL (TCP, with the password) to a fresh empty database, dropped afterwards."""
    pg_cluster.ensure_running()
    name = pg_cluster.create_database()
    yield pg_cluster.url(name)
    # A test that stopped the server must not break the ones after it.
    pg_cluster.ensure_running()
    pg_cluster.drop_database(name)
