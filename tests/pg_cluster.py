"""A private, throw-away PostgreSQL server for the tests.

``PgCluster().start()`` runs ``initdb`` in a fresh temporary folder and starts
the server on a Unix socket inside that folder plus 127.0.0.1 on a free port;
``stop()`` shuts it down and removes the folder.  Nothing of the machine's own
PostgreSQL set-up (its clusters, config files, service) is touched.

Authentication mirrors a real team server: the socket trusts local users (the
admin side of the tests), TCP asks for a SCRAM password, so a wrong password
really fails.

initdb and postgres refuse to run as root; under root the server binaries run
as the ``postgres`` account the Debian package creates (else ``nobody``).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self
from urllib.parse import quote

USER = "memstrata_test"
INSTALL_HINT = "install the server with `apt-get install postgresql`"
PSYCOPG_HINT = "install it with `pip install 'memstrata[postgres]'`"

DEBIAN_BINDIRS = "/usr/lib/postgresql/*/bin"
_FOLDER_PREFIX = "memstrata-pg-"
_OWNER_FILE = "owner"
# Unix socket paths are limited to 107 bytes; the socket file name adds ~17.
_MAX_SOCKDIR = 80
_SHM_MIN_FREE = 1 << 30
_READY_TIMEOUT = 90.0
_STOP_TIMEOUT = 60.0
_PR_SET_PDEATHSIG = 1


class ClusterError(RuntimeError):
    """The private server could not be set up or started (the message carries its log)."""


@dataclass(frozen=True)
class Binaries:
    initdb: Path
    postgres: Path


def _postgres_bindirs(pattern: str) -> list[Path]:
    """Debian's versioned server folders, newest major version first (9.6 < 10 < 15)."""
    def version(path: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", Path(path).parent.name)) or (0,)

    return [Path(d) for d in sorted(glob.glob(pattern), key=version, reverse=True)]


def find_binaries(search_path: str | None = None,
                  versioned: str = DEBIAN_BINDIRS) -> tuple[Binaries | None, str]:
    """The server binaries, or (None, a sentence naming what is missing and how to get it).

    PATH wins (a developer's own build or a symlinked server); Debian keeps the
    server binaries off PATH under /usr/lib/postgresql/<major>/bin.
    """
    names = ("initdb", "postgres")
    on_path = {n: shutil.which(n, path=search_path) for n in names}
    if all(on_path.values()):
        return Binaries(*(Path(on_path[n]) for n in names)), ""
    for bindir in _postgres_bindirs(versioned):
        found = [bindir / n for n in names]
        if all(os.access(p, os.X_OK) for p in found):
            return Binaries(*found), ""
    missing = " and ".join(n for n in names if not on_path[n])
    return None, (f"the PostgreSQL server binaries are missing ({missing} not on PATH nor in "
                  f"{versioned}); {INSTALL_HINT}")


def psycopg_missing() -> str:
    """'' when psycopg 3 imports, else a sentence saying how to install it."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return f"psycopg (3) is not importable; {PSYCOPG_HINT}"
    return ""


def _server_account() -> pwd.struct_passwd | None:
    """Whom the server runs as: None for ourselves, an unprivileged account under root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ClusterError("running as root and neither a 'postgres' nor a 'nobody' account exists "
                       "to run the PostgreSQL server as (it refuses to run as root)")


def _proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name ([] where /proc is absent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _proc_start_time(pid: int) -> str:
    """The kernel's start time of pid ('' where /proc is absent): a pid plus its start
    time names one process even after the pid is reused."""
    fields = _proc_stat(pid)
    return fields[19] if fields else ""


def _alive(pid: int, start_time: str = "") -> bool:
    """Whether pid runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _proc_stat(pid)
    if not fields:
        return True
    return fields[0] != "Z" and (not start_time or fields[19] == start_time)


def _base_dirs() -> list[Path]:
    """Where clusters may live, preferred first.

    A RAM-backed /dev/shm when it has room: on a VM's disk initdb alone takes
    several times longer (writing ~40 MB it never needs to keep).  Docker's
    default 64 MB /dev/shm does not qualify.
    """
    found = []
    with contextlib.suppress(OSError):
        shm = os.statvfs("/dev/shm")
        if shm.f_bavail * shm.f_frsize >= _SHM_MIN_FREE and os.access("/dev/shm", os.W_OK | os.X_OK):
            found.append(Path("/dev/shm"))
    found += [Path(tempfile.gettempdir()), Path("/tmp")]
    return list(dict.fromkeys(found))


def _usable(base: Path) -> bool:
    """Short enough for the socket path, and traversable by the server account."""
    if len(str(base)) > _MAX_SOCKDIR - 30 or not base.is_dir():
        return False
    if os.geteuid() == 0:
        return all(part.stat().st_mode & 0o001 for part in (base, *base.parents))
    return True


def _base_dir() -> Path:
    return next((b for b in _base_dirs() if _usable(b)), Path("/tmp"))


def reap_stale_clusters(base: Path | None = None) -> list[Path]:
    """Stop and remove clusters left by test runs that died without cleaning up.

    Each cluster's folder names the test process that owns it; a folder whose
    owner is gone is stale.  Live owners (another session running in parallel)
    are left alone.
    """
    bases = [base] if base else [b for b in _base_dirs() if b.is_dir()]
    reaped = []
    for folder in itertools.chain.from_iterable(b.glob(_FOLDER_PREFIX + "*") for b in bases):
        try:
            pid_text, _, start = (folder / _OWNER_FILE).read_text().strip().partition(" ")
            owner = int(pid_text)
        except (OSError, ValueError):
            continue
        if _alive(owner, start):
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            postmaster = int((folder / "data" / "postmaster.pid").read_text().split()[0])
            # Only a server of this folder: the pid may have been reused since.
            if _alive(postmaster) and str(folder).encode() in Path(f"/proc/{postmaster}/cmdline").read_bytes():
                os.kill(postmaster, signal.SIGQUIT)
                deadline = time.monotonic() + _STOP_TIMEOUT
                while _alive(postmaster) and time.monotonic() < deadline:
                    time.sleep(0.02)
        shutil.rmtree(folder, ignore_errors=True)
        reaped.append(folder)
    return reaped


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """preexec_fn: the server gets a fast-shutdown signal when the test process dies,
    however it dies (SIGKILL, a pytest-timeout exit), so no server outlives its run.
    Runs after the child switched accounts (which would clear the setting)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


def _on_main_thread() -> bool:
    # The parent-death signal fires when the spawning *thread* ends: a server
    # (re)started from a test's worker thread would die with that thread, so it
    # goes without the signal and relies on stop() alone.
    return threading.current_thread() is threading.main_thread()


_names = itertools.count(1)


class PgCluster:
    """One private PostgreSQL server: ``start()``, ``url()``, ``create_database()``, ``stop()``."""

    def __init__(self, binaries: Binaries | None = None) -> None:
        if binaries is None:
            binaries, why = find_binaries()
            if binaries is None:
                raise ClusterError(why)
        self.binaries = binaries
        self.user = USER
        self.password = secrets.token_hex(12)
        self.port: int | None = None
        self.folder: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._account = _server_account()

    # -- paths -------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._require_folder() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._require_folder() / "sock"

    @property
    def log_path(self) -> Path:
        return self._require_folder() / "server.log"

    def _require_folder(self) -> Path:
        if self.folder is None:
            raise ClusterError("the cluster has not been started")
        return self.folder

    # -- running binaries as the server account ----------------------------

    def _as_server(self) -> dict:
        kw: dict = {"cwd": self.folder, "env": self._env()}
        if self._account is not None:
            kw.update(user=self._account.pw_uid, group=self._account.pw_gid, extra_groups=[])
        return kw

    def _env(self) -> dict[str, str]:
        # The caller's PG* settings (PGDATA, PGPORT, PGHOST ...) must not steer
        # the private server; a fixed locale keeps initdb from failing on a
        # LANG the machine has no locale files for.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        if self._account is not None:
            env["HOME"] = str(self.folder)
        return env

    def _give_to_server(self, path: Path) -> None:
        if self._account is not None:
            os.chown(path, self._account.pw_uid, self._account.pw_gid)

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        """Set up a fresh cluster in a new temp folder and start it; returns self."""
        if self.folder is not None:
            raise ClusterError("the cluster is already set up; use restart()")
        reap_stale_clusters()
        self.folder = Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX, dir=_base_dir()))
        try:
            (self.folder / _OWNER_FILE).write_text(f"{os.getpid()} {_proc_start_time(os.getpid())}\n")
            # Private to the server account: the socket trusts whoever reaches it.
            self._give_to_server(self.folder)
            self.socket_dir.mkdir(mode=0o700)
            self._give_to_server(self.socket_dir)
            self._initdb(self.data_dir, self.password)
            self._launch(_free_port())
        except BaseException:
            self._discard()
            raise
        return self

    def _initdb(self, data_dir: Path, password: str) -> None:
        pwfile = data_dir.parent / "pwfile"
        pwfile.write_text(password + "\n")
        pwfile.chmod(0o600)
        self._give_to_server(pwfile)
        try:
            res = subprocess.run(
                [str(self.binaries.initdb), "-D", str(data_dir), "-U", self.user,
                 f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                 "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                capture_output=True, text=True, timeout=300, check=False, **self._as_server())
        finally:
            pwfile.unlink()
        if res.returncode != 0:
            raise ClusterError(f"initdb failed (exit {res.returncode}):\n{res.stderr or res.stdout}")

    def _launch(self, port: int, attempts: int = 5) -> None:
        """Start the postmaster as our child and wait until it accepts connections.

        Started directly rather than through ``pg_ctl start``: pg_ctl detaches the
        server from us, so a test process killed outright would leave it running;
        as our child it gets the parent-death signal (see _die_with_parent).
        """
        for attempt in range(attempts):
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen(
                    [str(self.binaries.postgres), "-D", str(self.data_dir), "-k", str(self.socket_dir),
                     "-p", str(port), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                     "-c", "max_connections=200", "-c", "logging_collector=off",
                     "-c", "unix_socket_permissions=0700"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent if _on_main_thread() else None,  # noqa: PLW1509
                    **self._as_server())
            self.port = port
            if self._wait_ready():
                return
            log_text = self.log_path.read_text(errors="replace")
            if "could not bind" in log_text.rsplit("starting PostgreSQL", 1)[-1] and attempt + 1 < attempts:
                port = _free_port()  # someone took the port between our probe and the bind
                continue
            raise ClusterError(f"the PostgreSQL server did not start; its log:\n{log_text[-4000:]}")

    def _wait_ready(self) -> bool:
        """Until the postmaster reports 'ready' in postmaster.pid (what pg_ctl -w
        waits for); False when it exits first."""
        pidfile = self.data_dir / "postmaster.pid"
        deadline = time.monotonic() + _READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                return False
            with contextlib.suppress(OSError):
                lines = pidfile.read_text().splitlines()
                if len(lines) >= 8 and lines[0].strip() == str(self._proc.pid) and lines[7].strip() == "ready":
                    return True
            time.sleep(0.02)
        self._halt(signal.SIGQUIT)
        raise ClusterError(f"the PostgreSQL server was not ready after {_READY_TIMEOUT:.0f}s; its log:\n"
                           + self.log_path.read_text(errors="replace")[-4000:])

    def _halt(self, sig: int) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def shutdown(self, mode: str = "fast") -> None:
        """Stop the server but keep its data (``restart`` brings it back).

        ``fast`` (pg_ctl's default: disconnect clients, checkpoint) or
        ``immediate`` (no checkpoint: the next start replays WAL as after a crash).
        """
        signals = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}
        if mode not in signals:
            raise ValueError(f"unknown shutdown mode {mode!r}; use one of {', '.join(signals)}")
        self._halt(signals[mode])

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again on the same data, socket and port."""
        self._require_folder()
        self.shutdown(mode)
        # One attempt: on another port the URLs a test holds would point nowhere.
        self._launch(self.port, attempts=1)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs."""
        return self._proc.pid if self.running else None

    def ensure_running(self) -> None:
        """Start the server again if a test shut it down (or it died) and left it so."""
        if not self.running:
            self.restart()

    def stop(self) -> None:
        """Fast shutdown and removal of the whole temp folder; safe to call twice."""
        self._discard()

    def _discard(self) -> None:
        try:
            self._halt(signal.SIGINT)
        finally:
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder = None

    def __enter__(self) -> Self:
        return self.start() if self.folder is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- URLs and admin SQL ------------------------------------------------

    def url(self, dbname: str = "postgres", password: bool | str = True) -> str:
        """A libpq URL over TCP (127.0.0.1), where SCRAM checks the password.

        ``password=True`` embeds the right one, ``False`` none, a string that string.
        """
        if self.port is None:
            raise ClusterError("the cluster has not been started")
        secret = self.password if password is True else (password or "")
        auth = f"{self.user}:{quote(secret, safe='')}" if secret else self.user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{quote(dbname, safe='')}"

    def socket_url(self, dbname: str = "postgres") -> str:
        """A libpq URL over the Unix socket (trusted: no password)."""
        return (f"postgresql:///{quote(dbname, safe='')}?host={quote(str(self.socket_dir), safe='/')}"
                f"&port={self.port}&user={self.user}")

    def connect(self, dbname: str = "postgres", **kw):
        """An autocommit psycopg connection over the socket, for admin SQL."""
        import psycopg

        return psycopg.connect(self.socket_url(dbname), autocommit=True, **kw)

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a fresh unique name unless given); returns its name."""
        from psycopg import sql

        name = name or f"t{os.getpid()}_{next(_names)}"
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, ending any connection a test left open to it."""
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def kill_backends(self, dbname: str) -> int:
        """Terminate every other connection to ``dbname`` (as when a server drops its
        clients) and wait until they are gone; returns how many there were."""
        with self.connect() as conn:
            # The timeout argument (PostgreSQL 14+) makes the call wait for the exit.
            wait = ", 10000" if conn.info.server_version >= 140000 else ""
            pids = [pid for (pid,) in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,))]
            for pid in pids:
                conn.execute(f"SELECT pg_terminate_backend(%s{wait})", (pid,))
            deadline = time.monotonic() + 10
            while pids and time.monotonic() < deadline and conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()[0]:
                time.sleep(0.02)
        return len(pids)
