"""Atomic file replacement: a reader sees the old bytes or the new, never a torn file.

Shared by every file MemStrata rewrites in place: Stormbuffer's records and
journal, Kura's registry, config and endpoint files, providers.json, and the
derived files of :mod:`storage.checked_file` (the graph snapshot, the
tokenizer's ranks).  It lives in the storage layer so every layer can use it.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``: a temp file in the same folder
    (``.<name>.<pid>.<nanos>.tmp``), fsync, rename over ``path``, fsync the folder."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{time.time_ns()}{TEMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write` of ``text`` as UTF-8."""
    atomic_write(path, text.encode("utf-8"))


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems refuse to fsync a folder
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


__all__ = ["atomic_write", "atomic_write_text", "fsync_dir", "is_temp_name"]
