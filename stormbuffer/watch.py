"""Which record files changed since the last look, from Linux inotify.

A long-running process (the MCP adapter) syncs before every read; walking and
stat-ing 10,000 files each time costs tens of milliseconds.  A
:class:`ChangeFeed` watches ``records/`` and its sub-folders, and
:meth:`ChangeFeed.drain` returns the names touched since the previous call
(or None when it cannot tell: queue overflow, a folder created, moved or
removed, a watch lost).  The kernel queues an event during the writing system
call itself, so a write that finished before a sync began is always seen by
that sync.

The feed is only used on local filesystems, where inotify sees every write;
on network or FUSE filesystems, other platforms, or when the kernel refuses
a watch, :func:`open_feed` returns None and the caller walks the folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
import sys
from pathlib import Path

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_ONLYDIR, IN_ISDIR = 0x1000000, 0x40000000
_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
         | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_RESET = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("iIII")

# statfs f_type of filesystems whose every change inotify reports.
LOCAL_FILESYSTEMS = frozenset({
    0xEF53,       # ext2/3/4
    0x58465342,   # xfs
    0x9123683E,   # btrfs
    0x01021994,   # tmpfs
    0x858458F6,   # ramfs
    0x794C7630,   # overlayfs
    0x2FC12FC1,   # zfs
    0xF2F52010,   # f2fs
    0xCA451A4E,   # bcachefs
    0x52654973,   # reiserfs
    0x3153464A,   # jfs
})


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def filesystem_type(path: Path) -> int | None:
    if _LIBC is None:
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _LIBC.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


class ChangeFeed:
    """inotify watches on a folder tree; not thread-safe (one sync at a time)."""

    def __init__(self, root: Path, fd: int):
        self.root = root
        self._fd = fd
        self._dirs: dict[int, str] = {}  # watch descriptor -> folder prefix below root ("" or "a/b/")
        self._stale = True

    def _watch_tree(self) -> bool:
        for wd in list(self._dirs):
            _LIBC.inotify_rm_watch(self._fd, wd)
        self._dirs.clear()
        pending = [(self.root, "")]
        while pending:
            folder, prefix = pending.pop()
            wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
            if wd < 0:
                return False
            self._dirs[wd] = prefix
            with contextlib.suppress(OSError), os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
        return True

    def drain(self) -> set[str] | None:
        """Paths (below root) touched since the last call; None means "walk everything".

        After a None the watches are re-established before returning, so the
        walk that follows misses nothing.
        """
        changed: set[str] = set()
        reset = self._stale
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                reset = True
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size: offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _RESET or mask & IN_ISDIR:
                    reset = True
                elif wd in self._dirs and name:
                    changed.add(self._dirs[wd] + os.fsdecode(name))
        if reset:
            self._stale = not (self.root.is_dir() and self._watch_tree())
            return None
        return changed

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def open_feed(root: Path) -> ChangeFeed | None:
    """A change feed on ``root``, or None where inotify cannot be trusted or used."""
    if _LIBC is None or not root.is_dir() or filesystem_type(root) not in LOCAL_FILESYSTEMS:
        return None
    fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        return None
    return ChangeFeed(root, fd)


__all__ = ["ChangeFeed", "open_feed", "filesystem_type", "LOCAL_FILESYSTEMS"]
