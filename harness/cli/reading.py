"""Opening a project for a command that only reads, and the one-line failure every command prints."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memstrata.indexer.project import (INDEX_FILE, ProjectError, StoreChoice, holds_index, index_dir, open_store,
                                       resolve_root, writer_active_elsewhere)
from memstrata.storage import StoreError

if TYPE_CHECKING:
    from memstrata.indexer.workspace import Workspace

NOT_INDEXED = "not indexed yet (run memstrata index)"


class NotIndexed(Exception):
    """A read-only command found no index (and created none)."""

    def __init__(self, root: Path):
        super().__init__(f"{root}: {NOT_INDEXED}")
        self.root = root


def open_indexed(path: str | Path | None, store: StoreChoice | None = None) -> Workspace:
    """The project's workspace for a command that only reads: never creates ``.memstrata/``.

    Raises :class:`NotIndexed` when the project has no index; opens the index
    read-only when it cannot be written.  With a shared ``store`` the project
    is read from it, without its checkout.
    """
    # Here, not at the top: a command the resident query process answers never needs it.
    from memstrata.indexer.workspace import Workspace

    if store is not None and store.shared:
        return Workspace.open_shared(store, path, readonly=True)
    root = resolve_root(path)
    if not holds_index(root):
        raise NotIndexed(root)
    try:
        return Workspace.open(root)
    except (ProjectError, StoreError):
        if os.access(index_dir(root) / INDEX_FILE, os.W_OK) and os.access(index_dir(root), os.W_OK):
            raise
        return Workspace(root, open_store(root, readonly=True))


def fail(message: str, code: int = 2) -> int:
    print(f"memstrata: {message}", file=sys.stderr)
    return code


def first_run_unfinished(ws) -> int | None:
    """The refusal for a question asked before the project's first index run finished, else None."""
    if ws.store.get_meta("last_indexed") is not None:
        return None
    if writer_active_elsewhere(ws.root, ws.store):
        return fail(f"{ws.root}: the first index run is still under way in another process; ask again "
                    "when it finishes (memstrata status shows how far it got)")
    return fail(f"{ws.root}: the first index run has not finished (run memstrata index)")
