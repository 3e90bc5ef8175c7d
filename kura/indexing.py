"""Keeping one Kura database's store in step with its folder.

:func:`sync_folder` compares the whole folder with the store (a stat walk; only
files whose size or mtime changed are read, and only those whose bytes
changed are re-chunked).  :func:`update_paths` does the same for the paths a
watcher batch named.  Each file is written in its own transaction, so a
search running meanwhile sees every file either before or after its update.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .chunking import (CHUNKING_VERSION, DocumentFilter, SkipDocument, chunk_document, decode_document,
                                        read_document, stat_document, walk_documents)
from memstrata.storage import Store
from . import store as kura_store

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason); folders end with "/"
    chunks: int = 0

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed

    def skipped_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, reason in self.skipped:
            counts[reason] = counts.get(reason, 0) + 1
        return dict(sorted(counts.items()))


def sync_folder(store: Store, root: Path, flt: DocumentFilter | None = None) -> SyncReport:
    report = SyncReport()
    root = root.resolve()
    flt = flt or DocumentFilter(root)
    known = kura_store.source_states(store)
    # Chunks cut by another chunking version are cut again, unchanged files too.
    recut = kura_store.get_chunking(store) != CHUNKING_VERSION
    seen: set[str] = set()
    for doc in walk_documents(root, flt, on_skip=lambda rel, reason: report.skipped.append((rel, reason))):
        seen.add(doc.path)
        _index_one(store, root, doc.path, known.get(doc.path), report, recut=recut)
    # Whatever the walk did not yield drops out: deleted, now excluded, now a
    # symlink leading outside, or now skipped at read time (binary, too large).
    skipped = {rel for rel, _ in report.skipped}
    gone = [p for p in known if p not in seen or p in skipped]
    if gone:
        with store.write() as conn:
            report.removed += kura_store.delete_sources(conn, gone)
    kura_store.set_skipped(store, report.skipped_counts())
    if recut:
        kura_store.set_chunking(store, CHUNKING_VERSION)
    return report


def update_paths(store: Store, root: Path, paths: Iterable[str], flt: DocumentFilter) -> SyncReport:
    """Re-check the named files: index new/changed ones, drop vanished or excluded ones."""
    report = SyncReport()
    root = root.resolve()
    known = kura_store.source_states(store)
    gone: list[str] = []
    paths = set(paths)
    for rel in sorted(paths | _links_to(root, known, paths)):
        full = root / rel
        if flt.excluded_reason(rel) is not None or not full.is_file():
            if rel in known:
                gone.append(rel)
            continue
        _index_one(store, root, rel, known.get(rel), report)
    # A skipped file that used to be indexed (now binary, too large) drops out.
    gone += [rel for rel, _ in report.skipped if rel in known]
    if gone:
        with store.write() as conn:
            report.removed += kura_store.delete_sources(conn, gone)
    return report


def _links_to(root: Path, known: Iterable[str], paths: set[str]) -> set[str]:
    """The indexed file links that lead to one of ``paths``: a watcher reports the file that was
    edited, never the links in the folder that show it under another name."""
    targets = {os.path.realpath(root / rel) for rel in paths}
    return {rel for rel in known if rel not in paths and os.path.islink(root / rel)
            and os.path.realpath(root / rel) in targets}


def _index_one(store: Store, root: Path, rel: str, known: kura_store.SourceState | None,
               report: SyncReport, *, recut: bool = False) -> None:
    try:
        st = stat_document(root, rel)
        if (not recut and known is not None and known.size == st.st_size
                and known.mtime_ns == st.st_mtime_ns):
            report.unchanged += 1
            return
        data, st = read_document(root, rel)
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        if not recut and known is not None and known.hash == digest:
            with store.write() as conn:
                kura_store.touch_source(conn, rel, st.st_size, st.st_mtime_ns)
            report.unchanged += 1
            return
        text = decode_document(data)
    except SkipDocument as exc:
        report.skipped.append((rel, exc.reason))
        return
    except OSError as exc:  # vanished or unreadable between the walk and the read
        report.skipped.append((rel, f"unreadable: {exc.strerror or exc}"))
        return
    chunked = chunk_document(rel, text)
    rec = kura_store.SourceRecord(rel, st.st_size, st.st_mtime_ns, digest, chunked.kind, time.time())
    with store.write() as conn:
        kura_store.replace_source(conn, rec, chunked.chunks)
    report.chunks += len(chunked.chunks)
    if known is None:
        report.added += 1
    else:
        report.updated += 1
