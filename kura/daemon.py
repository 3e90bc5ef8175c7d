"""The Kura daemon: one per Kura home, loopback only.

Exactly one daemon runs per home: it holds an exclusive ``flock`` on
``daemon.lock`` for its whole life (the kernel drops it if the process dies,
so a crash never leaves a stale lock).  A second daemon that finds the lock
taken waits for the winner's ``endpoint`` file and reports that address.

The CLI side (:func:`ensure_running`, :func:`stop`) starts the daemon as a
detached background process and talks to it over its HTTP API.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import IO

from .registry import Home, KuraError, write_text_atomic

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
LOCK_RETRY = 0.5  # a CLI probing the lock holds it for microseconds; ride that out

# Requests to our own loopback daemon must never go through a proxy from the environment.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# -- the lock -------------------------------------------------------------------------


def _try_lock(home: Home, retry: float = 0.0) -> IO[str] | None:
    home.ensure()
    fh = open(home.lock_file, "a+")
    deadline = time.monotonic() + retry
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if time.monotonic() >= deadline:
                fh.close()
                return None
            time.sleep(0.02)


def lock_held(home: Home) -> bool:
    """Whether a daemon holds the lock right now (without disturbing it for long)."""
    fh = _try_lock(home)
    if fh is None:
        return True
    fh.close()  # closing releases the flock
    return False


def daemon_pid(home: Home) -> int | None:
    try:
        text = home.lock_file.read_text().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


# -- talking to a running daemon ---------------------------------------------------------


def api(url: str, path: str, *, method: str = "GET", timeout: float = 5.0) -> dict:
    req = urllib.request.Request(url.rstrip("/") + path, method=method,
                                 data=b"" if method == "POST" else None)
    with _opener.open(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def running_url(home: Home) -> str | None:
    """The address of the running daemon, or None."""
    url = home.read_endpoint()
    if url is None:
        return None
    try:
        if api(url, "/api/health", timeout=3).get("status") == "ok":
            return url
    except (OSError, ValueError, urllib.error.URLError):
        pass
    return None


def notify_reload(home: Home) -> None:
    """Make a running daemon re-read the registry now (it also notices within a second)."""
    url = running_url(home)
    if url is not None:
        with contextlib.suppress(OSError, ValueError, urllib.error.URLError):
            api(url, "/api/reload", method="POST", timeout=60)


# -- starting and stopping (CLI side) -------------------------------------------------------


@dataclass
class Started:
    url: str
    started: bool  # False: it was already running


def ensure_running(home: Home) -> Started:
    url = running_url(home)
    if url is not None:
        return Started(url, False)
    home.ensure()
    with open(home.log_file, "ab") as log_fh:
        proc = subprocess.Popen(
            # -P: the folder it is started from must never stand in for the standard library
            # (a `logging.py` there would run).
            [sys.executable, "-P", "-m", "memstrata.kura.cli", "daemon"],  # cli.DAEMON_ARGV
            stdin=subprocess.DEVNULL, stdout=log_fh, stderr=log_fh,
            start_new_session=True, close_fds=True,
            env={**os.environ, "KURA_HOME": str(home.root)},
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        url = running_url(home)
        if url is not None:
            # Started by us only if our process won the lock: a loser of a race
            # between two CLIs is still alive here, waiting to report the winner.
            return Started(url, daemon_pid(home) == proc.pid)
        code = proc.poll()
        if code not in (None, 0):
            raise KuraError(f"the kura daemon failed to start (exit {code}); see {home.log_file}:\n"
                            + _log_tail(home))
        time.sleep(0.05)
    raise KuraError(f"the kura daemon did not answer within {START_TIMEOUT:.0f}s; see {home.log_file}")


def stop(home: Home) -> bool:
    """Stop the running daemon; False if none was running."""
    if not lock_held(home):
        _remove_endpoint(home)
        return False
    pid = daemon_pid(home)
    if pid is None:
        raise KuraError(f"a kura daemon holds {home.lock_file} but its pid is unknown")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if not lock_held(home):
            _remove_endpoint(home)
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    _remove_endpoint(home)
    return True


def _remove_endpoint(home: Home, only: str | None = None) -> None:
    if only is not None and home.read_endpoint() != only:
        return  # another daemon's address by now
    with contextlib.suppress(FileNotFoundError):
        home.endpoint_file.unlink()


def _log_tail(home: Home, lines: int = 15) -> str:
    try:
        return "\n".join(home.log_file.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- the daemon process itself -----------------------------------------------------------------


def run_daemon(home: Home, version: str) -> int:
    """Serve in the foreground until SIGTERM/SIGINT.  Returns the exit code."""
    lock = _try_lock(home, retry=LOCK_RETRY)
    if lock is None:
        url = _wait_for_endpoint(home)
        print(f"kura is already running at {url or '(starting)'}", flush=True)
        return 0
    _configure_logging(home)
    try:
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        return _serve(home, version)
    finally:
        lock.close()


def _serve(home: Home, version: str) -> int:
    from .api import build_app
    from .library import Library

    import uvicorn

    _Server = _server_class()

    port, remote = home.port(), home.remote()
    # IPPROTO_TCP explicitly: asyncio enables TCP_NODELAY on accepted connections
    # only then, and without it every response waits ~40 ms on Nagle/delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        log.error("cannot listen on %s:%d: %s", HOST, port, exc.strerror or exc)
        print(f"kura: cannot listen on {HOST}:{port}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 1
    url = f"http://{HOST}:{sock.getsockname()[1]}"
    library = Library(home, live=True)
    library.reload()
    library.start_monitor()

    def started() -> None:
        write_text_atomic(home.endpoint_file, url + "\n")
        log.info("kura %s serving %s (remote MCP %s)", version, url, "on" if remote else "off")

    app = build_app(library, remote=remote, version=version, on_started=started,
                    on_stopping=lambda: _remove_endpoint(home, only=url))
    server = _Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                    lifespan="on", timeout_graceful_shutdown=3))
    try:
        server.run(sockets=[sock])
    finally:
        _remove_endpoint(home, only=url)
        library.close()
        sock.close()
        log.info("kura stopped")
    return 0


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM/SIGINT once it has shut down, which would kill
        the process before the library is closed; a stop request is a normal exit."""

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

    return Server


def _wait_for_endpoint(home: Home, timeout: float = START_TIMEOUT) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        url = running_url(home)
        if url is not None:
            return url
        if not lock_held(home):
            return None
        time.sleep(0.05)
    return None


def _configure_logging(home: Home) -> None:
    root = logging.getLogger()
    if any(getattr(h, "_kura", False) for h in root.handlers):
        return
    handler = logging.FileHandler(home.log_file, encoding="utf-8")
    handler._kura = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # The SDK and uvicorn are chatty at INFO (one line per MCP session).
    for name in ("mcp", "uvicorn", "httpx", "watchdog"):
        logging.getLogger(name).setLevel(logging.WARNING)
