"""The CLI's side of the daemon: ask it, start it, replace it, stop it.

:func:`ask` never fails a command: whenever the daemon cannot give the answer
(none runs, its socket is stale or not trusted, it runs other code, it died
mid-question) the caller answers in-process, as before there was a daemon,
and then starts one in the background for the next call, without waiting
for it.

``MEMSTRATA_DAEMON=off`` turns all of this off; ``MEMSTRATA_DAEMON_IDLE``
(seconds) sets the idle timeout of the daemons started here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import sockets
from .identity import build_id

if TYPE_CHECKING:
    import subprocess

log = logging.getLogger(__name__)

ENV_SWITCH = "MEMSTRATA_DAEMON"
ENV_IDLE = "MEMSTRATA_DAEMON_IDLE"
CONNECT_TIMEOUT = 2.0
# A daemon acknowledges a question as soon as it reads it; one that has not
# within this time is answering another call (it takes one at a time) or not
# running at all (stopped, hung): the command answers in-process.
ACCEPT_TIMEOUT = 2.0
# A question over a large index after others changed it can rebuild the graph
# (seconds); a daemon that takes longer than this is given up on.
ANSWER_TIMEOUT = 300.0
_OFF = {"0", "off", "no", "false"}
_ON = {"", "1", "on", "yes", "true"}
# The command that starts a daemon answers first and exits; the daemon's own
# start-up (interpreter, imports, index) would only slow that answer and that
# exit down.  So a bare interpreter (no site, nothing imported) waits for the
# command to be gone -- it is handed to another parent then -- and becomes the
# daemon.
_AFTER_PARENT = (
    "import os, sys, time\n"
    "parent, deadline = os.getppid(), time.monotonic() + 10\n"
    "while os.getppid() == parent and time.monotonic() < deadline:\n"
    "    time.sleep(0.01)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)
# How long a daemon started after another died waits for the kernel to release
# the dead one's lock (it is gone at once; this only covers its last instant).
_DYING = 2.0


@dataclass
class Answer:
    exit: int
    stdout: str
    stderr: str


def idle_setting() -> float | None:
    """``MEMSTRATA_DAEMON_IDLE`` in seconds; None when unset, or (said once) when it is not a
    positive number: daemons then leave after the default."""
    text = os.environ.get(ENV_IDLE, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value > 0 and value != float("inf")):
        global _idle_warned
        if not _idle_warned:
            _idle_warned = True
            log.warning("%s=%r is not a positive number of seconds; the resident query process leaves "
                        "after the default idle time", ENV_IDLE, text[:40])
        return None
    return value


_idle_warned = False


def enabled() -> bool:
    """``MEMSTRATA_DAEMON``: on unless off; a value that is neither (``disabled``, ``none``) is
    said once, like a bad idle time, rather than quietly read as on."""
    text = os.environ.get(ENV_SWITCH, "").strip().lower()
    if text not in _ON and text not in _OFF:
        global _switch_warned
        if not _switch_warned:
            _switch_warned = True
            log.warning("%s=%r is neither on nor off (off: %s); the resident query process is used",
                        ENV_SWITCH, text[:40], ", ".join(sorted(_OFF)))
    return text not in _OFF


_switch_warned = False


@dataclass
class Outcome:
    """What asking the daemon gave: its answer, or None (answer in-process), and
    maybe a daemon to start once the caller has answered: started before, it
    would compete with that answer for the processor."""

    answer: Answer | None = None
    start: Callable[[], object] | None = None


def ask(root: Path, index_folder: Path, command: str, args: dict, cwd: str) -> Outcome:
    """``command`` run by the project's daemon, when it can."""
    if not enabled():
        return Outcome()
    try:
        sockets.check_folder(index_folder)
    except (OSError, sockets.Refused):  # another user's project: no daemon of ours answers for it
        return Outcome()
    path = sockets.socket_path(index_folder)
    start = functools.partial(spawn, root, index_folder)
    try:
        sock, pid = _open(path)
    except sockets.Refused as exc:
        log.warning("not using the resident query process: %s; answering in-process "
                    "(`memstrata daemon stop` removes what is left there when it is yours)", exc)
        return Outcome()
    except OSError:
        # A socket file nothing listens on: a killed daemon's (its lock may
        # not be released yet), which the new one replaces.
        log.debug("stale socket; answering in-process, then starting a resident query process")
        return Outcome(start=functools.partial(start, lock_wait=_DYING))
    if sock is None:  # none runs, or one is loading (it holds the lock)
        return Outcome(start=start if sockets.lock_is_free(index_folder) else None)
    request = {"op": "run", "build": build_id(), "command": command, "root": str(root),
               "cwd": cwd, "args": args}
    accepted = False
    try:
        with sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sockets.send(sock, request)
            log.debug("request sent to the resident query process (pid %d)", pid)
            reader = sockets.Reader(sock)
            sock.settimeout(ACCEPT_TIMEOUT)
            reply = reader.next()   # the acknowledgement; another build's daemon answers at once
            if reply.get("accepted"):
                accepted = True
                sock.settimeout(ANSWER_TIMEOUT)
                reply = reader.next()
    except TimeoutError:
        if accepted or stopped(pid):
            # Stuck on a question it took on, or stopped (a job-control stop, a debugger): it
            # will not answer anyone; replace it.
            log.debug("the resident query process (pid %d) does not answer; replacing it", pid)
            return Outcome(start=_retire(pid, start))
        log.debug("the resident query process is busy; answering in-process")
        return Outcome()
    except (OSError, sockets.ProtocolError) as exc:
        # Killed mid-question, or not this protocol at all: answer here, and
        # make sure a daemon of this build serves the next call.
        log.debug("the resident query process did not answer (%s); answering in-process", exc)
        if isinstance(exc, sockets.ProtocolError):
            return Outcome(start=_retire(pid, start))
        return Outcome(start=functools.partial(start, lock_wait=_DYING))
    if reply.get("build") != build_id():
        log.debug("the resident query process runs other code (%s); replacing it", reply.get("build"))
        return Outcome(start=_retire(pid, start))
    if not reply.get("ok"):
        log.debug("the resident query process passed (%s); answering in-process", reply.get("reason"))
        return Outcome()
    try:
        return Outcome(Answer(int(reply["exit"]), str(reply["stdout"]), str(reply["stderr"])))
    except (KeyError, TypeError, ValueError):
        return Outcome()


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (job control or a tracer): it runs nothing until continued."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return False
    return fields[:1] in (["T"], ["t"])


def terminate(pid: int) -> None:
    """SIGTERM, then SIGCONT: a stopped process would hold the signal until continued."""
    for sig in (signal.SIGTERM, signal.SIGCONT):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _retire(pid: int, start: Callable[..., object]) -> Callable[[], object]:
    """Stop a daemon that runs other code now, or is stopped (its pid as the kernel
    reported it, a process of this user); what starts one of this build in its place."""
    if pid > 0:
        terminate(pid)
    # The new daemon waits for the old one's lock instead of the caller waiting.
    return functools.partial(start, lock_wait=5.0, replacing=True)


def _open(path: Path) -> tuple[socket.socket | None, int]:
    """A connection to the daemon and its pid, or (None, 0) when there is no socket file;
    OSError when nothing listens on the one there is."""
    if not sockets.check_socket_file(path):
        return None, 0
    sock = sockets.connect(path, CONNECT_TIMEOUT)
    try:
        return sock, sockets.check_peer(sock)
    except BaseException:
        sock.close()
        raise


def spawn(root: Path, index_folder: Path, lock_wait: float | None = None,
          after_parent: bool = True, replacing: bool = False) -> subprocess.Popen | None:
    """Start a daemon for the project in the background (detached: its own session,
    no terminal); its log goes to ``.memstrata/daemon.log``.  With ``after_parent``
    it starts only once this process has exited."""
    import subprocess  # only a call that starts one pays for it

    if not os.access(index_folder, os.W_OK):
        return None
    # -P: it runs in the project folder, whose files must never stand in for the standard
    # library's modules (a project's own `logging.py` would run, and the daemon fail).
    argv = [sys.executable, "-P", "-m", "memstrata", "daemon", "run", "--project", str(root)]
    if after_parent:
        argv = [sys.executable, "-S", "-P", "-c", _AFTER_PARENT, *argv[1:]]
    if replacing:
        argv.append("--replacing")
    idle = idle_setting()
    if idle:
        argv += ["--idle-timeout", repr(idle)]
    if lock_wait is not None:
        argv += ["--lock-wait", str(lock_wait)]
    argv += ["--requested-at", str(time.time_ns())]
    try:
        # Never through a link: truncating would empty the file it names (indexer/project.checked_index_dir).
        log_fd = os.open(index_folder / sockets.LOG_NAME,
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        log_fd = subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_fd,
                                cwd=str(root), start_new_session=True)
    except OSError as exc:
        log.debug("could not start the resident query process: %s", exc)
        return None
    finally:
        if isinstance(log_fd, int) and log_fd >= 0:
            os.close(log_fd)


def _lock_holder(index_folder: Path) -> int | None:
    """The pid a starting daemon wrote into the lock file, if that process is this user's."""
    try:
        pid = int(sockets.lock_path(index_folder).read_text().strip())
        if os.stat(f"/proc/{pid}").st_uid == os.getuid():
            return pid
    except (OSError, ValueError):
        pass
    return None


# -- daemon stop | status ---------------------------------------------------------


@dataclass
class DaemonState:
    running: bool
    pid: int | None = None
    build: str | None = None
    info: dict | None = None
    stale_socket: bool = False
    refused: str | None = None
    same_build: bool = False
    answering: bool = True     # False: it did not answer in time (busy with another call, or stopped)
    stopped: bool = False
    removed: str | None = None  # stop: what was left at the socket's path and removed (socket, file, folder)
    left_running: int | None = None  # stop: a daemon still held the lock when it gave up (its pid, or 0)


def status(index_folder: Path) -> DaemonState:
    path = sockets.socket_path(index_folder)
    try:
        sock, pid = _open(path)
    except sockets.Refused as exc:
        return DaemonState(running=not sockets.lock_is_free(index_folder), refused=str(exc))
    except OSError:  # nothing listens on the file there
        return DaemonState(running=not sockets.lock_is_free(index_folder), stale_socket=True)
    if sock is None:
        return DaemonState(running=not sockets.lock_is_free(index_folder))
    try:
        with sock:
            sockets.send(sock, {"op": "status", "build": build_id()})
            reply = sockets.receive(sock)
    except TimeoutError:
        return DaemonState(running=True, pid=pid, answering=False, stopped=stopped(pid))
    except (OSError, sockets.ProtocolError):
        return DaemonState(running=True, pid=pid)
    return DaemonState(running=True, pid=pid, build=reply.get("build"), info=reply if reply.get("ok") else None,
                       same_build=reply.get("build") == build_id())


def stop(index_folder: Path, timeout: float = 10.0) -> DaemonState:
    """Stop the project's daemon (whatever build it runs) and remove a stale socket;
    the state before stopping is returned."""
    # First, so that a daemon a command asked for just before (still starting, not yet
    # holding the lock, where nothing below can see it) does not start after this.
    sockets.mark_stopped(index_folder)
    state = status(index_folder)
    if state.running and not state.pid:  # still loading: not listening yet
        state.pid = _lock_holder(index_folder)
    if state.pid:
        asked = False
        if state.same_build:
            with contextlib.suppress(OSError, sockets.ProtocolError, sockets.Refused):
                sock, _ = _open(sockets.socket_path(index_folder))
                if sock is not None:
                    with sock:
                        sockets.send(sock, {"op": "stop", "build": build_id()})
                        asked = bool(sockets.receive(sock).get("ok"))
        if not asked:
            terminate(state.pid)
    # Done when this process holds the lock itself: a start queued behind the daemon (asked
    # for before the mark above, so it gives up) may hold it for an instant after the daemon
    # let go, and a look at the lock in that instant would take it for the daemon still running.
    with sockets.holding_lock(index_folder, timeout) as held:
        if held:
            state.removed = _clear_socket_path(sockets.socket_path(index_folder))
    if not held:
        state.left_running = _lock_holder(index_folder) or state.pid or 0
    return state


def _clear_socket_path(path: Path) -> str | None:
    """With no daemon running, what sits at the socket's path is left over: removed when it is
    the user's own -- a dead socket (whatever its mode), a stray file, an empty folder.  What was
    removed, or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if st.st_uid != os.getuid():
        return None  # not ours to remove; queries keep refusing it, and say why
    kind = "socket" if stat.S_ISSOCK(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) or \
        stat.S_ISLNK(st.st_mode) else "folder" if stat.S_ISDIR(st.st_mode) else None
    try:
        if kind == "folder":
            path.rmdir()
        elif kind is not None:
            path.unlink()
        else:
            return None
    except OSError:
        return None
    return kind
