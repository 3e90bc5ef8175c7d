"""The daemon's socket: where it lives, what makes it trusted, and the message framing.

The socket is ``.memstrata/daemon.sock`` in the project.  Whoever can connect
to it gets answers from the project's index, and a client believes what comes
back, so trust goes both ways:

- the file is a socket, owned by the user running the client (who also owns
  the project's ``.memstrata/``), mode 0600: anything else in its place is
  refused, never connected to;
- the kernel's word on the peer (``SO_PEERCRED``) must name that same user,
  on the client's side and on the daemon's.

One daemon per project is held by a record lock on ``.memstrata/daemon.lock``
(the kernel drops it when the daemon dies, even by SIGKILL), so a socket file
whose lock is free is a stale one a killed daemon left behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import struct
import time
from collections.abc import Iterator
from pathlib import Path

SOCKET_NAME = "daemon.sock"
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
# When `daemon stop` last ran (ns since the epoch): a daemon whose start was asked
# for before it does not start, however late it gets going.
STOPPED_NAME = "daemon.stopped"
SOCKET_MODE = 0o600
MAX_MESSAGE = 64 * 1024 * 1024  # an answer is a context slice: far below this
# sun_path holds 108 bytes; a longer path is reached through the folder's descriptor.
_SUN_PATH_MAX = 100


class Refused(Exception):
    """The socket file or its peer is not the user's own: never used."""


class ProtocolError(Exception):
    """The other end sent something that is not a message of this protocol."""


def socket_path(index_folder: Path) -> Path:
    return index_folder / SOCKET_NAME


def lock_path(index_folder: Path) -> Path:
    return index_folder / LOCK_NAME


def mark_stopped(index_folder: Path) -> None:
    """Say that the user stopped the project's daemon now (best effort: a read-only
    folder has no daemon started from it either)."""
    tmp = index_folder / f"{STOPPED_NAME}.{os.getpid()}"
    with contextlib.suppress(OSError):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{time.time_ns()}\n".encode())
        finally:
            os.close(fd)
        os.replace(tmp, index_folder / STOPPED_NAME)


def stopped_at(index_folder: Path) -> int | None:
    """When `daemon stop` last ran for the project (ns since the epoch), if it ever did."""
    try:
        return int((index_folder / STOPPED_NAME).read_text().strip())
    except (OSError, ValueError):
        return None


def check_folder(index_folder: Path) -> None:
    """The project's ``.memstrata/`` must be the running user's: a daemon of
    this user answers only for what this user owns."""
    st = os.stat(index_folder)
    if st.st_uid != os.getuid():
        raise Refused(f"{index_folder.name}/ belongs to uid {st.st_uid}, not to you (uid {os.getuid()})")


def check_socket_file(path: Path) -> bool:
    """True when a trusted socket file is there, False when there is none;
    raises :class:`Refused` for anything else in its place."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    name = f"{path.parent.name}/{path.name}"
    if stat.S_ISDIR(st.st_mode):
        raise Refused(f"{name} is a folder, not a socket")
    if not stat.S_ISSOCK(st.st_mode):
        raise Refused(f"{name} is not a socket")
    if st.st_uid != os.getuid():
        raise Refused(f"{name} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})")
    mode = stat.S_IMODE(st.st_mode)
    if mode != SOCKET_MODE:
        raise Refused(f"{name} has mode {mode:04o} instead of {SOCKET_MODE:04o}")
    return True


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end, as the kernel saw it connect."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


def check_peer(sock: socket.socket) -> int:
    """The peer's pid, after making sure it runs as this user."""
    pid, uid, _gid = peer_credentials(sock)
    if uid != os.getuid():
        raise Refused(f"the process at the other end of the socket runs as uid {uid}, not as you")
    return pid


@contextlib.contextmanager
def address(path: Path) -> Iterator[str]:
    """A name ``bind``/``connect`` accept for ``path``, however deep the project is."""
    text = os.fsdecode(path)
    if len(os.fsencode(text)) <= _SUN_PATH_MAX:
        yield text
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def connect(path: Path, timeout: float) -> socket.socket:
    """A connection to a trusted socket at ``path``; OSError when nothing listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        with address(path) as addr:
            sock.connect(addr)
        return sock
    except BaseException:
        sock.close()
        raise


def lock_is_free(index_folder: Path) -> bool:
    """True when no daemon holds the project's daemon lock (none runs, or it was killed)."""
    mode = fcntl.LOCK_EX
    try:
        fd = os.open(lock_path(index_folder), os.O_RDWR)
    except FileNotFoundError:
        return True
    except OSError:
        # A read-only index folder (a read-only mount): a shared lock, which needs no write
        # access, is refused just the same while a daemon holds its lock.
        try:
            fd = os.open(lock_path(index_folder), os.O_RDONLY)
        except OSError:
            return False  # cannot tell: assume one runs rather than stack daemons up
        mode = fcntl.LOCK_SH
    try:
        fcntl.lockf(fd, mode | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def holding_lock(index_folder: Path, timeout: float) -> Iterator[bool]:
    """Hold the project's daemon lock for the block, waiting up to ``timeout`` seconds for
    whoever holds it to let go: True while it is held here (no daemon runs, and none can take
    it until the block ends), False when it was not let go in time.

    A single look at the lock cannot tell that no daemon runs: a start queued behind a stopped
    daemon takes the lock an instant after it is let go, finds it has nothing to do and lets go
    again.  Taking it here settles the question for as long as the block lasts.  Nothing in the
    block may open and close the lock file again (:func:`lock_is_free`): closing any descriptor
    of it drops this process's record locks."""
    mode = fcntl.LOCK_EX
    try:
        fd = os.open(lock_path(index_folder), os.O_RDWR)
    except FileNotFoundError:
        yield True  # no daemon ever ran here
        return
    except OSError:
        try:  # a read-only index folder, as in lock_is_free
            fd = os.open(lock_path(index_folder), os.O_RDONLY)
        except OSError:
            yield False
            return
        mode = fcntl.LOCK_SH
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.lockf(fd, mode | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def send(sock: socket.socket, message: dict) -> None:
    # One JSON document a line: json.dumps escapes every newline inside it.
    sock.sendall(json.dumps(message, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n")


class Reader:
    """The messages arriving on one connection, in order: what arrives after a message's line
    (the daemon sends an acknowledgement, then the answer) waits for the next call."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()
        self._scanned = 0   # bytes of the buffer known to hold no newline

    def next(self) -> dict:
        """The next message; ConnectionError when the peer went away first."""
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[:newline + 1]
                self._scanned = 0
                return _decode(line)
            self._scanned = len(self._buffer)
            if self._scanned > MAX_MESSAGE:
                raise ProtocolError("message too large")
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the other end closed the connection")
            self._buffer += chunk


def receive(sock: socket.socket) -> dict:
    """The next message of a connection that carries one; ConnectionError when the peer went away first."""
    return Reader(sock).next()


def _decode(line: bytes) -> dict:
    try:
        message = json.loads(line.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("not a JSON message") from None
    if not isinstance(message, dict):
        raise ProtocolError("not a JSON object")
    return message
