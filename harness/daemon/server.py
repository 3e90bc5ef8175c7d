"""The daemon: one process per project that keeps the index, graph and tokenizer loaded.

It runs a command the way the CLI would in-process (the same handler, the
caller's arguments and working directory, its stdout and stderr captured) and
sends back exactly what that printed, so an answer through the daemon is the
in-process answer byte for byte.  Requests are served one at a time: the
handlers share one workspace, and a question takes milliseconds.

It leaves when it has been idle for ``idle_timeout`` seconds, on SIGTERM or
SIGINT, on a ``stop`` request, and when its socket file is gone or replaced or
the index it reads was deleted; it removes its socket file on the way out,
only if the file is still its own.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import io
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import sockets
from .identity import build_id

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 600.0
# A client that connected must send its request within this; one that never
# does must not hold the queue.
REQUEST_TIMEOUT = 5.0
_POLL = 0.5  # seconds between checks of the idle clock and the socket file

Handler = Callable[[object, argparse.Namespace], int]


class DaemonError(Exception):
    """The daemon cannot start here (one sentence for the log)."""


class Daemon:
    """Serve ``handlers`` for the project at ``root`` over ``.memstrata/daemon.sock``.

    ``open_workspace(root)`` opens the project's index for reading (the CLI's
    own opener); ``warm(ws)`` loads what the first question would load.
    """

    def __init__(self, root: Path, index_folder: Path, handlers: dict[str, Handler],
                 open_workspace: Callable[[Path], object], warm: Callable[[object], None] | None = None,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT, index_file: str = "index.db",
                 lock_wait: float = 0.5, replacing: bool = False, requested_at: int | None = None):
        self.root = root
        self.folder = index_folder
        self.handlers = handlers
        self.open_workspace = open_workspace
        self.warm = warm
        self.idle_timeout = idle_timeout
        self.index_file = index_folder / index_file
        self.lock_wait = lock_wait
        self.replacing = replacing
        self.requested_at = requested_at
        self._waited = False
        self.build = build_id()
        self.path = sockets.socket_path(index_folder)
        self.started = time.time()
        self.served = 0
        self._ws = None
        self._ws_identity: tuple[int, int] | None = None
        self._lock_fd: int | None = None
        self._sock: socket.socket | None = None
        self._inode: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._last_active = time.monotonic()

    # -- life cycle -----------------------------------------------------------

    def run(self) -> int:
        """Serve until told to stop; 0 when it served or another daemon already does, 1 on failure."""
        try:
            sockets.check_folder(self.folder)
            if not self._take_lock():
                log.info("another daemon serves %s", self.root)
                return 0
            if self._waited and not self.replacing and not os.path.lexists(self.path):
                # The daemon it waited for was stopped or left on purpose (it took its
                # socket with it): a start queued behind it must not undo that.
                log.info("the daemon this one waited for was stopped; not starting")
                return 0
            stop = sockets.stopped_at(self.folder)
            if self.requested_at is not None and stop is not None and stop >= self.requested_at:
                # Started late (a loaded machine, a slow interpreter start): the user
                # stopped the daemon after this start was asked for.
                log.info("`daemon stop` ran after this start was asked for; not starting")
                return 0
        except (OSError, sockets.Refused) as exc:
            log.error("cannot start: %s", exc)
            return 1
        try:
            self._remove_stale_socket()
            try:
                self._open_workspace()
                if self.warm is not None:
                    self.warm(self._ws)
                self._listen()
                # Idle from now on: the time spent getting here (a loaded machine, a large
                # graph to load, waiting out a daemon being replaced) is not time without
                # requests, and a daemon that counted it could leave before anyone could ask.
                self._last_active = time.monotonic()
            except Exception as exc:  # an unreadable index: the CLI answers in-process and says why
                log.error("cannot start: %s", exc)
                return 1
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self._stop.set())
            log.info("serving %s (pid %d, build %s, idle timeout %.0f s)",
                     self.root, os.getpid(), self.build, self.idle_timeout)
            self._serve()
            return 0
        finally:
            self._shutdown()

    def _take_lock(self) -> bool:
        # Never through a link: the pid written below would replace the text of the file it names.
        fd = os.open(sockets.lock_path(self.folder), os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        deadline = time.monotonic() + self.lock_wait
        self._waited = False
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                # Who holds it, for `daemon stop` while the socket is not up yet.
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
            # A client testing the lock holds it for an instant; a daemon being
            # replaced holds it until its SIGTERM lands.
            if time.monotonic() >= deadline:
                os.close(fd)
                return False
            self._waited = True
            time.sleep(0.02)

    def _remove_stale_socket(self) -> None:
        """Holding the lock, any socket file of ours is a dead daemon's."""
        with contextlib.suppress(FileNotFoundError):
            if sockets.check_socket_file(self.path):
                self.path.unlink()

    def _listen(self) -> None:
        """Bind under a private name with mode 0600 from the start, then rename it
        into place: a client never sees a socket that is not ready or not private."""
        tmp = self.path.with_name(f"{sockets.SOCKET_NAME}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # no thread runs yet that creates files
        try:
            with sockets.address(tmp) as addr:
                sock.bind(addr)
        finally:
            os.umask(old_umask)
        os.chmod(tmp, sockets.SOCKET_MODE)
        sock.listen(64)
        sock.settimeout(_POLL)
        os.replace(tmp, self.path)
        st = os.lstat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        self._sock = sock

    def _shutdown(self) -> None:
        if self._sock is not None:
            if self._still_ours():
                with contextlib.suppress(OSError):
                    self.path.unlink()
            self._sock.close()
            self._sock = None
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
            self._ws = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # drops the record lock
            self._lock_fd = None
        log.info("stopped after %d requests", self.served)

    def _still_ours(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._inode

    def _should_leave(self) -> str | None:
        if self._stop.is_set():
            return "asked to stop"
        if time.monotonic() - self._last_active >= self.idle_timeout:
            return f"idle for {self.idle_timeout:.0f} s"
        if not self._still_ours():
            return "its socket file was removed or replaced"
        if not self.index_file.exists():
            return "the index was deleted"
        return None

    # -- serving ----------------------------------------------------------------

    def _serve(self) -> None:
        assert self._sock is not None
        while True:
            reason = self._should_leave()
            if reason:
                log.info("leaving: %s", reason)
                return
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, InterruptedError):
                continue
            with conn:
                self._handle(conn)
            self._last_active = time.monotonic()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(REQUEST_TIMEOUT)
            sockets.check_peer(conn)
            request = sockets.receive(conn)
            conn.settimeout(None)
            if request.get("op") == "run" and request.get("build") == self.build:
                # Taken on at once, before the answer (which may take seconds): a client that
                # hears nothing in time knows this process is not answering, not merely slow.
                sockets.send(conn, {"build": self.build, "pid": os.getpid(), "accepted": True})
            reply = self._answer(request)
            sockets.send(conn, reply)
        except sockets.Refused as exc:
            log.warning("refused a connection: %s", exc)
        except (OSError, sockets.ProtocolError) as exc:  # the client went away or spoke nonsense
            log.debug("dropped a connection: %s", exc)

    def _answer(self, request: dict) -> dict:
        base = {"build": self.build, "pid": os.getpid()}
        if request.get("build") != self.build:
            # Another MemStrata's client: it must not get this code's answers.
            return {**base, "ok": False, "reason": "build"}
        op = request.get("op")
        if op == "status":
            return {**base, "ok": True, **self.status()}
        if op == "stop":
            self._stop.set()
            return {**base, "ok": True}
        if op == "run":
            return {**base, **self._run(request)}
        return {**base, "ok": False, "reason": "unknown operation"}

    def status(self) -> dict:
        return {"root": str(self.root), "started": self.started, "uptime": time.time() - self.started,
                "idle_timeout": self.idle_timeout, "served": self.served}

    def _run(self, request: dict) -> dict:
        handler = self.handlers.get(request.get("command"))
        args = request.get("args")
        cwd = request.get("cwd")
        if handler is None or not isinstance(args, dict) or not isinstance(cwd, str):
            return {"ok": False, "reason": "unknown command"}
        if request.get("root") != str(self.root):
            return {"ok": False, "reason": "another project"}
        out, err = io.StringIO(), io.StringIO()
        here = os.getcwd()
        try:
            ws = self._workspace()
            os.chdir(cwd)  # relative paths in the arguments mean what they meant to the caller
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = handler(ws, argparse.Namespace(**args))
        except Exception:
            # The client runs the command in-process and reports whatever this
            # was the way the CLI does; the workspace is opened afresh next time.
            log.warning("command %s failed here; the client answers in-process", request.get("command"),
                        exc_info=True)
            self._drop_workspace()
            return {"ok": False, "reason": "failed"}
        finally:
            with contextlib.suppress(OSError):
                os.chdir(here)
        self.served += 1
        return {"ok": True, "exit": int(code or 0), "stdout": out.getvalue(), "stderr": err.getvalue()}

    # -- the workspace ---------------------------------------------------------------

    def _open_workspace(self) -> None:
        st = os.stat(self.index_file)
        self._ws = self.open_workspace(self.root)
        self._ws_identity = (st.st_dev, st.st_ino)

    def _workspace(self):
        """The open workspace, reopened when the index file was replaced (rebuilt
        after damage): the old handle would keep reading the deleted file."""
        try:
            st = os.stat(self.index_file)
            same = (st.st_dev, st.st_ino) == self._ws_identity
        except OSError:
            same = False
        if self._ws is None or not same:
            self._drop_workspace()
            self._open_workspace()
        return self._ws

    def _drop_workspace(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
            self._ws = None
