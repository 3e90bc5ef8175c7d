"""Lifecycle operations on one store's canonical records, under its mutation lock.

Every mutation runs inside :meth:`Repository.mutation`: the store must be
initialized, the mutation lock is taken (waiting up to
``locks.MUTATION_WAIT_S`` for another writer, then ``conflict``), an interrupted supersession is replayed, the projection is
synced and every canonical file must be valid.  Writes go to the Markdown
only, atomically; the projection catches up on the next sync.

Approving a replacement changes two files.  The new contents of both are
first written to a journal (``locks/supersede.toml``), then each file is
replaced, then the journal is removed; a journal left by a killed process is
replayed by the next mutation or read, so the pair always lands together.
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import index_db as sb

from . import errors, locks
from .codec import CodecError, parse_record, render_record, toml_string
from .errors import SbufError
from memstrata.storage.files import atomic_write, fsync_dir
from .projection import Projection
from .records import (
    TRANSITIONS, Record, RecordInvalid, body_digest, check_provenance, normalize_text, now_ns, validate,
)
from .stores import StoreLocation

OVERLAP_STATUSES = ("candidate", "active")
REQUIRES_APPROVAL = "candidate awaits explicit approval"
REPLACEMENT_REQUIRES_APPROVAL = "replacement candidate awaits explicit approval"
DUPLICATE = "proposal matches an existing memory"
CONFLICT = "candidate awaits explicit approval; a record with the same title has a different body"


@dataclass(slots=True)
class Proposal:
    outcome: str          # requires_approval | duplicate_of | conflicts_with | invalid | accepted
    record_id: str
    related_id: str | None
    status: str | None
    message: str

    def to_json(self) -> dict:
        return {"outcome": self.outcome, "record_id": self.record_id, "related_id": self.related_id,
                "status": self.status, "message": self.message}


@dataclass(slots=True)
class Loaded:
    record: Record
    rel: str        # path below records/
    data: bytes     # the file's bytes when loaded


def _state_error(record_id: str, expected: str, actual: str, what: str = "could not update record") -> SbufError:
    return SbufError("invalid_state", errors.INVALID_STATE,
                     f"{what}: repository operation failed: record {record_id} must be {expected}, not {actual}")


def _io_error(what: str) -> SbufError:
    return SbufError("internal_error", errors.STORE_FAILED, f"{what} (is the store folder writable?)")


class Repository:
    def __init__(self, loc: StoreLocation, projection: Projection):
        self.loc = loc
        self.projection = projection

    @property
    def lock_path(self) -> Path:
        return self.loc.locks_dir / "mutation.lock"

    # -- the lock ------------------------------------------------------------------

    @contextlib.contextmanager
    def mutation(self) -> Iterator["Repository"]:
        with self.locked():
            self.projection.sync()
            self.projection.require_valid(writing=True)
            yield self

    @contextlib.contextmanager
    def locked(self) -> Iterator["Repository"]:
        """The mutation lock with any interrupted supersession completed, but no
        sync: for maintenance (``sbuf gc``) that must work on a store whose
        records are invalid."""
        self.loc.read_config()
        try:
            self.loc.locks_dir.mkdir(exist_ok=True)
        except OSError:
            raise _io_error("the lock folder cannot be created") from None
        with locks.exclusive(self.lock_path, wait=locks.MUTATION_WAIT_S):
            self._replay_journal()
            yield self

    def recover_if_needed(self) -> None:
        """Replay an interrupted supersession before a read, unless a writer is at work."""
        if not self.loc.journal.exists():
            return
        with contextlib.suppress(SbufError):
            with locks.exclusive(self.lock_path):
                self._replay_journal()

    # -- reading -------------------------------------------------------------------

    def find(self, record_id: str) -> Loaded | None:
        """The record with ``record_id`` as its file now holds it (after a sync)."""
        rows = sb.find_records(self.projection.store(), record_id)
        if not rows:
            return None
        return self.load(rows[0].file)

    def load(self, rel: str) -> Loaded:
        try:
            data = (self.loc.records_dir / rel).read_bytes()
            return Loaded(parse_record(data), rel, data)
        except FileNotFoundError:
            raise SbufError("conflict", errors.BUSY, "the record file vanished; retry") from None
        except CodecError:
            raise SbufError("invalid_record", errors.VALIDATION_FAILED,
                            "the record file changed and is no longer valid") from None
        except OSError:
            raise _io_error("the record file cannot be read") from None

    # -- writing -------------------------------------------------------------------

    def write(self, record: Record, rel: str | None = None) -> str:
        rel = rel or f"{record.id}.md"
        try:
            data = render_record(record)
        except RecordInvalid:
            raise SbufError("invalid_record", errors.VALIDATION_FAILED) from None
        try:
            self.loc.records_dir.mkdir(exist_ok=True)
            atomic_write(self.loc.records_dir / rel, data)
        except OSError:
            raise _io_error("the record file cannot be written") from None
        return rel

    def overlap(self, record: Record, exclude: set[str]) -> Proposal | None:
        """The duplicate (same title and body) or conflict (same title) of ``record``, if any."""
        rows = sb.overlapping(self.projection.store(), record.scope, record.kind, normalize_text(record.title),
                              OVERLAP_STATUSES, exclude | {record.id})
        digest = body_digest(record.body)
        for row in rows:
            if row.norm_body == digest:
                return Proposal("duplicate_of", record.id, row.id, row.status, DUPLICATE)
        if rows:
            return Proposal("conflicts_with", record.id, rows[0].id, "candidate", CONFLICT)
        return None

    def propose(self, record: Record) -> Proposal:
        """Write a candidate unless it duplicates an existing candidate or active record."""
        found = self.overlap(record, set(record.supersedes))
        if found is not None and found.outcome == "duplicate_of":
            return found
        self.write(record)
        if found is not None:
            return found
        message = REPLACEMENT_REQUIRES_APPROVAL if record.supersedes else REQUIRES_APPROVAL
        return Proposal("requires_approval", record.id, record.supersedes[0] if record.supersedes else None,
                        "candidate", message)

    def transition(self, loaded: Loaded, status: str) -> Record:
        """Move one record to ``status`` (a same-state move is a no-op)."""
        record = loaded.record
        if record.status == status:
            return record
        if (record.status, status) not in TRANSITIONS:
            raise _state_error(record.id, _expected_for(status), record.status)
        changed = record.evolve(status=status, updated_at=max(now_ns(), record.created_at))
        self.write(changed, loaded.rel)
        return changed

    def approve(self, record_id: str) -> tuple[str, str, str | None]:
        """Activate a candidate (superseding what it replaces).  Returns (outcome, status,
        the id of the record that kept it a candidate, if one did)."""
        loaded = self._require(record_id)
        cand = loaded.record
        if cand.status != "candidate":
            raise _state_error(record_id, "a candidate", cand.status, "could not update candidate")
        try:
            validate(cand)
            check_provenance(cand)
        except RecordInvalid as exc:
            raise SbufError("invalid_record", errors.VALIDATION_FAILED, f"could not approve candidate: {exc}") from None
        found = self.overlap(cand, set(cand.supersedes))
        if found is not None:
            return found.outcome, "candidate", found.related_id
        now = max(now_ns(), cand.created_at)
        if len(cand.supersedes) == 1:
            old = self._require(cand.supersedes[0])
            if old.record.status != "active":
                raise _state_error(old.record.id, "active", old.record.status, "could not supersede record")
            if old.record.scope != cand.scope:
                raise SbufError("scope_denied", errors.RECORD_OUTSIDE_SCOPE,
                                "could not supersede record: the replacement has a different scope")
            self.commit_pair(old, old.record.evolve(status="superseded", updated_at=max(now, old.record.created_at)),
                             loaded, cand.evolve(status="active", updated_at=now))
        else:
            self.write(cand.evolve(status="active", updated_at=now), loaded.rel)
        return "accepted", "active", None

    def forget(self, record_id: str) -> None:
        """Delete a record's file: the one irreversible operation, reachable only
        from ``sbuf forget --destroy`` (agents archive instead)."""
        loaded = self._require(record_id)
        path = self.loc.records_dir / loaded.rel
        try:
            path.unlink()
            fsync_dir(path.parent)
        except FileNotFoundError:
            raise SbufError("conflict", errors.BUSY, "the record file vanished; retry") from None
        except OSError:
            raise _io_error("the record file cannot be deleted") from None

    def supersede(self, old: Loaded, replacement: Record) -> None:
        """Replace an active record by an active ``replacement`` at once (human and CLI paths)."""
        if old.record.status != "active":
            raise _state_error(old.record.id, "active", old.record.status, "could not supersede record")
        now = max(now_ns(), old.record.created_at)
        self.commit_pair(old, old.record.evolve(status="superseded", updated_at=now),
                         None, replacement)

    def _require(self, record_id: str) -> Loaded:
        loaded = self.find(record_id)
        if loaded is None:
            raise SbufError("not_found", errors.NOT_FOUND, f"record {record_id} was not found")
        return loaded

    # -- two-file commits ----------------------------------------------------------

    def commit_pair(self, old: Loaded, old_new: Record, new: Loaded | None, new_record: Record) -> None:
        try:
            writes = [(old.rel, render_record(old_new)),
                      (new.rel if new is not None else f"{new_record.id}.md", render_record(new_record))]
        except RecordInvalid:
            raise SbufError("invalid_record", errors.VALIDATION_FAILED) from None
        lines = ["format_version = 1"]
        for rel, data in writes:
            lines += ["", "[[writes]]", f"file = {toml_string(rel)}", f"content = {toml_string(data.decode())}"]
        try:
            atomic_write(self.loc.journal, ("\n".join(lines) + "\n").encode())
        except OSError:
            raise _io_error("the supersession journal cannot be written") from None
        self._replay_journal()

    def _replay_journal(self) -> None:
        journal = self.loc.journal
        try:
            data = journal.read_bytes()
        except FileNotFoundError:
            return
        except OSError:
            raise _io_error("the supersession journal cannot be read") from None
        try:
            writes = _journal_writes(data)
        except ValueError:
            raise SbufError("conflict", errors.BUSY,
                            "an interrupted supersession cannot be replayed; inspect locks/supersede.toml") from None
        try:
            self.loc.records_dir.mkdir(exist_ok=True)
            for rel, content in writes:
                target = self.loc.records_dir / rel
                with contextlib.suppress(FileNotFoundError):
                    if target.read_bytes() == content:
                        continue
                atomic_write(target, content)
            journal.unlink()
            fsync_dir(journal.parent)
        except OSError:
            raise _io_error("an interrupted supersession cannot be completed") from None


def _journal_writes(data: bytes) -> list[tuple[str, bytes]]:
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError("unreadable journal") from exc
    writes = []
    for entry in table.get("writes", []):
        rel, content = entry.get("file"), entry.get("content")
        if not isinstance(rel, str) or not isinstance(content, str):
            raise ValueError("malformed journal entry")
        parts = PurePosixPath(rel).parts
        if not parts or rel.startswith("/") or ".." in parts or not rel.endswith(".md") or os.sep in rel.replace("/", ""):
            raise ValueError("journal names a file outside records/")
        writes.append((rel, content.encode("utf-8")))
    return writes


def _expected_for(status: str) -> str:
    sources = sorted({a for a, b in TRANSITIONS if b == status})
    return " or ".join(sources) if sources else "in another state"


__all__ = ["Repository", "Proposal", "Loaded", "OVERLAP_STATUSES", "REQUIRES_APPROVAL",
           "REPLACEMENT_REQUIRES_APPROVAL"]
