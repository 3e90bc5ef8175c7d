"""Editor-based commands: ``add``, ``propose``, ``edit`` and ``supersede``.

Each renders a draft record, opens ``$VISUAL`` (else ``$EDITOR``) on a
private temp copy, and saves the edited Markdown only when the editor exits
0 and the result is a valid record.  No lock is held while the editor runs;
``edit`` and ``supersede`` refuse to save when the record changed meanwhile.
Whenever a command fails after the editor saved text of the person's own, that
text is kept and its file named (see :func:`edited_text`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import errors
from .codec import CodecError, parse_record, render_record
from .core import View
from .errors import SbufError
from .records import KINDS, Record, RecordInvalid, Source, check_provenance, new_id, now_ns, parse_uuid

HUMAN_SOURCE = Source("conversation", "stormbuffer:cli", "human")
PROPOSE_SOURCE = Source("conversation", "stormbuffer:cli/propose", "human")


def _fail(message: str) -> SbufError:
    return SbufError("invalid_request", errors.INVALID_INPUT, message)


def editor_command() -> list[str]:
    for name in ("VISUAL", "EDITOR"):
        value = os.environ.get(name, "").strip()
        if value:
            return shlex.split(value)
    raise _fail("set $VISUAL or $EDITOR to choose the editor for this command")


@contextlib.contextmanager
def edited_text(draft: bytes):
    """Open the editor on ``draft`` and yield the edited bytes.

    The text a person typed exists nowhere else until the command saves it, so
    when the command then fails (the record changed while the editor was open,
    the edit does not parse, the lock stayed busy, ...) the edited file is kept
    in its private temp folder and named on stderr, after the error, as editors
    that refuse a concurrent change keep the user's copy.  An editor that exits
    non-zero (the person gave up) and an unchanged draft keep nothing.
    """
    command = editor_command()
    folder = Path(tempfile.mkdtemp(prefix="sbuf-edit-"))
    path = folder / "record.md"
    keep = False
    try:
        path.write_bytes(draft)
        try:
            done = subprocess.run([*command, str(path)])
        except OSError:
            raise _fail(f"cannot start the editor {Path(command[0]).name!r}") from None
        if done.returncode != 0:
            raise _fail(f"the editor exited with status {done.returncode}; nothing was saved")
        data = path.read_bytes()
        try:
            yield data
        except SbufError as exc:
            if data != draft:
                keep = True
                exc.kept_draft = path
            raise
        except BaseException:
            if data != draft:
                keep = True
                print(f"your edited text is kept in {path}", file=sys.stderr)
            raise
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _parsed(data: bytes, record_id) -> Record:
    try:
        record = parse_record(data)
    except CodecError as exc:
        raise _fail(f"the edited record is invalid ({exc}); nothing was saved") from None
    if record.id != record_id:
        raise _fail("the record id must not change; nothing was saved")
    return record


def _draft(view: View, args, status: str, access: str, source: Source) -> Record:
    kind = args.kind or "fact"
    if kind not in KINDS:
        raise _fail(f"kind must be one of {', '.join(KINDS)}")
    now = now_ns()
    return Record(new_id(), args.title or "", kind, view.selected.scope, status, access, now, now,
                  args.body or "", [source])


def _require_scope(view: View, record: Record) -> None:
    if record.scope != view.selected.scope:
        raise SbufError("scope_denied", errors.RECORD_OUTSIDE_SCOPE,
                        f"the record's scope must be {view.selected.scope} in this store; nothing was saved")


def cmd_add(view: View, args) -> int:
    view.selected.read_config()
    draft = _draft(view, args, "active", "human", HUMAN_SOURCE)
    with edited_text(render_record(draft, check=False)) as data:
        record = _parsed(data, draft.id)
        _require_scope(view, record)
        with view.repository().mutation() as repo:
            if repo.find(record.id) is not None:
                raise _fail("a record with this id already exists")
            repo.write(record.evolve(updated_at=max(now_ns(), record.created_at)))
    print(record.id)
    return 0


def cmd_propose(view: View, args) -> int:
    view.selected.read_config()
    draft = _draft(view, args, "candidate", "agent", PROPOSE_SOURCE)
    with edited_text(render_record(draft, check=False)) as data:
        record = _parsed(data, draft.id)
        if record.status != "candidate" or record.access != "agent":
            raise _fail("a proposal stays a candidate with agent access; use `sbuf add` for other records")
        _require_scope(view, record)
        try:
            check_provenance(record)
        except RecordInvalid as exc:
            print(f"{record.id}\tinvalid", flush=True)
            raise _fail(str(exc)) from None
        with view.repository().mutation() as repo:
            proposal = repo.propose(record)
    print(f"{proposal.record_id}\t{proposal.outcome}")
    return 0


def _active(view: View, text: str):
    record_id = parse_uuid(text)
    if record_id is None:
        raise _fail(f"{text!r} is not a record identifier")
    with view.repository().mutation() as repo:
        loaded = repo.find(record_id)
    if loaded is None:
        raise SbufError("not_found", errors.NOT_FOUND, f"record {record_id} was not found")
    if loaded.record.status != "active":
        raise SbufError("invalid_state", errors.INVALID_STATE,
                        f"record {record_id} must be active, not {loaded.record.status}")
    return loaded


def _unchanged(repo, loaded):
    current = repo.find(loaded.record.id)
    if current is None or current.data != loaded.data or current.rel != loaded.rel:
        raise SbufError("conflict", errors.BUSY, "the record changed while it was open in the editor; "
                                                 "nothing was saved")
    return current


def cmd_edit(view: View, args) -> int:
    loaded = _active(view, args.id)
    with edited_text(loaded.data) as data:
        if data == loaded.data:
            print(f"{loaded.record.id}\tunchanged")
            return 0
        record = _parsed(data, loaded.record.id)
        if record.status != "active":
            raise _fail("use approve, archive or restore to change a record's status; nothing was saved")
        _require_scope(view, record)
        with view.repository().mutation() as repo:
            _unchanged(repo, loaded)
            repo.write(record.evolve(updated_at=max(now_ns(), record.created_at)), loaded.rel)
    print(f"{record.id}\tactive")
    return 0


def cmd_supersede(view: View, args) -> int:
    loaded = _active(view, args.id)
    old = loaded.record
    kind = args.kind or old.kind
    if kind not in KINDS:
        raise _fail(f"kind must be one of {', '.join(KINDS)}")
    now = now_ns()
    draft = Record(new_id(), args.title or old.title, kind, old.scope, "active", old.access, now, now,
                   args.body if args.body is not None else old.body, [HUMAN_SOURCE], list(old.tags),
                   list(old.aliases), [old.id])
    with edited_text(render_record(draft, check=False)) as data:
        record = _parsed(data, draft.id)
        if record.status != "active" or record.supersedes != [old.id]:
            raise _fail("a replacement stays active and supersedes exactly the record it replaces; "
                        "nothing was saved")
        _require_scope(view, record)
        with view.repository().mutation() as repo:
            current = _unchanged(repo, loaded)
            repo.supersede(current, record.evolve(updated_at=max(now_ns(), record.created_at)))
    print(f"{record.id}\tactive")
    return 0


__all__ = ["cmd_add", "cmd_propose", "cmd_edit", "cmd_supersede", "editor_command", "edited_text"]
