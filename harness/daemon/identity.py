"""Which MemStrata a process is: the release plus a digest of the code it runs.

A daemon answers for the code that was installed when it started.  The
release number alone does not change when the sources do (an editable
install, an upgrade in place to a build of the same number), so clients and
daemon also compare a digest of every source file's name, size and
modification time: a daemon left over from other code is refused and
replaced instead of answering as that other code would.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from functools import lru_cache

from memstrata import __version__

# Every package a daemon's answers go through (the products never run in it).
_PACKAGES = ("memstrata", "memstrata.storage", "memstrata.indexer", "memstrata.compressor",
             "memstrata.mcp_server", "memstrata.harness")
_SOURCE_SUFFIXES = (".py", ".scm")


@lru_cache(maxsize=1)
def build_id() -> str:
    """``0.1.0+<digest>``: equal in two processes exactly when they run the same code."""
    digest = hashlib.blake2b(digest_size=8)
    # The interpreter and the environment it runs in, however the path to it was written
    # (`../../venv/bin/python3`, `venv/bin/python`, `venv/bin/python3.11` are one): the binary
    # the links lead to, and the environment's prefix, which keeps two venvs over one base
    # Python apart.
    for part in (os.path.realpath(sys.executable), os.path.normpath(sys.prefix)):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(sys.version.encode())
    for folder in sorted(_package_folders()):
        for path, st in _source_files(folder):
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return f"{__version__}+{digest.hexdigest()}"


def _package_folders() -> set[str]:
    folders: set[str] = set()
    for name in _PACKAGES:
        # find_spec locates a subpackage without running it (only its parent, the cheap root, is imported).
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders.update(os.path.normpath(os.path.abspath(f)) for f in spec.submodule_search_locations)
    return folders


def _source_files(folder: str):
    """(path, stat) of the sources directly in ``folder`` and below it, in a fixed order;
    the folders of other packages under it are walked on their own."""
    found = []
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__" and not entry.name.startswith("."):
                        stack.append(entry.path)
                elif entry.name.endswith(_SOURCE_SUFFIXES):
                    found.append((entry.path, entry.stat()))
            except OSError:  # vanished while walked: the digest differs, which is right
                continue
    return found
