"""The human ``sbuf`` commands (everything but ``invoke`` and ``mcp``).

These apply no access filter: a person sees human and agent records alike.
``list``, ``show`` and the lifecycle commands cover the selected store only.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import index_db as sb

from . import errors
from .core import ACTIVE, Core, View
from .errors import SbufError
from memstrata.storage.files import is_temp_name
from .invoke import MAX_BUDGET, MAX_LIMIT
from .projection import walk_records
from .records import parse_uuid
from .retrieval import Filters
from .stores import StoreLocation, init_store


def run(command: str, mode: str, args: argparse.Namespace) -> int:
    view = View.resolve(mode)
    try:
        return HANDLERS[command](view, args)
    finally:
        view.close()


def _record_id(text: str) -> str:
    canonical = parse_uuid(text)
    if canonical is None:
        raise SbufError("invalid_request", errors.INVALID_INPUT, f"{text!r} is not a record identifier")
    return canonical


def _synced(view: View, loc: StoreLocation | None = None):
    loc = loc or view.selected
    loc.read_config()
    view.repository(loc).recover_if_needed()
    proj = view.projection(loc)
    proj.sync()
    proj.require_valid(writing=False)
    return proj


def _out(text: str) -> None:
    sys.stdout.write(text)


# -- store ------------------------------------------------------------------------


def cmd_init(view: View, args) -> int:
    loc = view.selected
    try:
        created, config = init_store(loc, args.shared)
    except OSError:
        raise SbufError("internal_error", errors.STORE_FAILED, "the store folder cannot be created") from None
    view.projection(loc).sync()
    shared = " (shared)" if config.visibility == "shared" else ""
    verb = "Initialized" if created else "Already initialized"
    _out(f"{verb} {loc.kind} store at {loc.root}{shared}\n")
    return 0


def cmd_root(view: View, _args) -> int:
    _out(f"{view.selected.root}\n")
    return 0


def cmd_status(view: View, args) -> int:
    loc = view.selected
    initialized = loc.initialized()
    visibility = loc.read_config().visibility if initialized else None
    count = len(walk_records(loc.records_dir)) if initialized else 0
    # The JSON names the store kind ("project" | "global"), as Stormbuffer's does;
    # the record scope string is in the text form.
    status = {"scope": loc.kind, "root": str(loc.root), "initialized": initialized, "visibility": visibility,
              "record_count": count}
    if args.json:
        _out(json.dumps(status, ensure_ascii=False, sort_keys=True) + "\n")
    else:
        _out(f"store: {loc.kind}\nscope: {loc.scope}\nroot: {loc.root}\n"
             f"initialized: {'yes' if initialized else 'no'}\n"
             f"visibility: {visibility or '-'}\nrecords: {count}\n")
    return 0


def cmd_sync(view: View, _args) -> int:
    view.selected.read_config()
    report = view.projection(view.selected).sync(strict=True)
    _out(f"synced {report.files} record files: {report.added} added, {report.updated} updated, "
         f"{report.removed} removed, {report.invalid} invalid\n")
    return 1 if report.invalid else 0


def cmd_reindex(view: View, _args) -> int:
    view.selected.read_config()
    report = view.projection(view.selected).rebuild()
    _out(f"reindexed {report.files} record files ({report.invalid} invalid)\n")
    return 1 if report.invalid else 0


def cmd_doctor(view: View, _args) -> int:
    loc = view.selected
    problems: list[str] = []
    notes: list[str] = []
    config = loc.read_config()
    notes.append(f"{loc.kind} store, scope {loc.scope}, {config.visibility}")
    if loc.journal.exists():
        problems.append("an interrupted supersession is pending (locks/supersede.toml); any write completes it")
    temps = [p for p in loc.records_dir.rglob(".*") if p.is_file() and is_temp_name(p.name)]
    if temps:
        notes.append(f"{len(temps)} leftover temp file(s) from interrupted writes in records/ (safe to delete)")
    proj = view.projection(loc)
    report = proj.sync(strict=True)
    found = proj.problems()
    for path, why in found.invalid:
        problems.append(f"records/{path}: {why}")
    for rid, paths in found.duplicates:
        problems.append(f"record id {rid} is used by {len(paths)} files: " + ", ".join(f"records/{p}" for p in paths))
    if not proj.store().integrity_ok():
        problems.append("the index failed its integrity check; run `sbuf reindex`")
    rows = sb.list_records(proj.store())
    foreign = sorted({r.scope for r in rows} - {loc.scope})
    if foreign:
        notes.append("records with a scope other than this store's (not writable here): " + ", ".join(foreign))
    notes.append(f"{report.files} record files, {len(rows)} valid")
    for line in notes:
        _out(f"ok: {line}\n")
    for line in problems:
        _out(f"problem: {line}\n")
    return 1 if problems else 0


# -- records ----------------------------------------------------------------------


def cmd_list(view: View, args) -> int:
    proj = _synced(view)
    rows = sb.list_records(proj.store(), statuses=None if args.all else ACTIVE)
    for r in sorted(rows, key=lambda r: r.id):
        _out(f"{r.id}\t{r.status}\t{r.kind}\t{r.scope}\t{r.title}\n")
    return 0


def cmd_show(view: View, args) -> int:
    record_id = _record_id(args.id)
    _synced(view)
    loaded = view.repository().find(record_id)
    if loaded is None:
        raise SbufError("not_found", errors.NOT_FOUND, f"record {record_id} was not found")
    sys.stdout.flush()
    sys.stdout.buffer.write(loaded.data)
    sys.stdout.buffer.flush()
    return 0


def cmd_approve(view: View, args) -> int:
    record_id = _record_id(args.id)
    with view.repository().mutation() as repo:
        outcome, status, related = repo.approve(record_id)
    _out(f"{record_id}\t{outcome}\t{status}\n")
    if related is not None:
        # The line above is the seed's; it does not say which record blocks the approval.
        # Two agents updating one record at once leave two replacements that block each
        # other, so name the other one and the way out (stderr: stdout stays the seed's).
        same = "title and body" if outcome == "duplicate_of" else "title"
        print(f"note: not approved: record {related} has the same {same}; reject one of the two "
              f"(`sbuf reject ID`) to approve the other", file=sys.stderr)
    return 0


# Each human move starts from one state only, the one its command names: a
# candidate becomes active only through `approve` (which re-runs the duplicate
# and conflict checks and commits a replacement together with the record it
# supersedes), never through `restore`, and `archive` takes an active record,
# as the protocol's archive does.  A record already in the target state is the
# no-op the lifecycle allows.
_MOVE_FROM = {"reject": ("candidate", "a candidate", "could not update candidate"),
              "archive": ("active", "active", "could not update record"),
              "restore": ("archived", "archived", "could not update record")}


def _move(view: View, record_id: str, status: str, what: str) -> str:
    with view.repository().mutation() as repo:
        loaded = repo.find(record_id)
        if loaded is None:
            raise SbufError("not_found", errors.NOT_FOUND, f"record {record_id} was not found")
        source, expected, context = _MOVE_FROM[what]
        current = loaded.record.status
        if current != source and (what == "reject" or current != status):
            raise SbufError("invalid_state", errors.INVALID_STATE,
                            f"{context}: repository operation failed: record {record_id} "
                            f"must be {expected}, not {current}")
        return repo.transition(loaded, status).status


def cmd_reject(view: View, args) -> int:
    record_id = _record_id(args.id)
    _move(view, record_id, "archived", "reject")
    _out(f"{record_id}\taccepted\tarchived\n")
    return 0


def cmd_archive(view: View, args) -> int:
    record_id = _record_id(args.id)
    _out(f"{record_id}\t{_move(view, record_id, 'archived', 'archive')}\n")
    return 0


def cmd_restore(view: View, args) -> int:
    record_id = _record_id(args.id)
    _out(f"{record_id}\t{_move(view, record_id, 'active', 'restore')}\n")
    return 0


def cmd_forget(view: View, args) -> int:
    """Delete a record's file for good: only with --destroy, and only after a
    person confirms at a terminal (or passes --yes)."""
    if not args.destroy:
        raise SbufError("invalid_request", errors.INVALID_INPUT, "forget requires --destroy for permanent deletion")
    record_id = _record_id(args.id)
    _synced(view)
    loaded = view.repository().find(record_id)
    if loaded is None:
        raise SbufError("not_found", errors.NOT_FOUND, f"record {record_id} was not found")
    if not args.yes:
        if not all(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr)):
            raise SbufError("permission_denied", errors.INVALID_INPUT, "noninteractive deletion requires --yes")
        sys.stderr.write(f"Permanently delete {loaded.record.title} ({record_id})? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline()
        if answer.strip().lower() not in ("y", "yes"):
            raise SbufError("invalid_state", errors.INVALID_INPUT, "deletion cancelled")
    # No lock was held while the person answered: the record is looked up again under it.
    with view.repository().mutation() as repo:
        repo.forget(record_id)
    _out(f"Forgot {record_id}\n")
    return 0


def _clamped(value: int, maximum: int) -> int:
    return min(max(value, 1), maximum)


def _human_filters(view: View, all_statuses: bool) -> Filters:
    return Filters(view.default_scopes, None if all_statuses else ACTIVE, None)


def cmd_search(view: View, args) -> int:
    results = Core(view).search(args.query, _clamped(args.limit, MAX_LIMIT), _human_filters(view, args.all))
    if args.json:
        _out(json.dumps(results, ensure_ascii=False, sort_keys=True, indent=2) + "\n")
        return 0
    for item in results:
        excerpt = " ".join(item["excerpt"].split())[:120]
        _out(f"{item['score']:.3f}\t{item['record_id']}\t{item['status']}\t{item['title']}\t{excerpt}\n")
    return 0


def cmd_context(view: View, args) -> int:
    result = Core(view).context(args.query, _clamped(args.limit, MAX_LIMIT), _clamped(args.budget, MAX_BUDGET),
                                _human_filters(view, args.all))
    _out(json.dumps(result, ensure_ascii=False, sort_keys=True, indent=2) + "\n")
    return 0


def _editor(name: str):
    def handler(view: View, args) -> int:
        from . import editor

        return getattr(editor, name)(view, args)
    return handler


def _maintenance(name: str):
    def handler(view: View, args) -> int:
        from . import maintenance

        return getattr(maintenance, name)(view, args)
    return handler


HANDLERS = {
    "init": cmd_init, "root": cmd_root, "status": cmd_status, "sync": cmd_sync, "reindex": cmd_reindex,
    "doctor": cmd_doctor, "list": cmd_list, "show": cmd_show, "approve": cmd_approve, "reject": cmd_reject,
    "archive": cmd_archive, "restore": cmd_restore, "search": cmd_search, "context": cmd_context,
    "add": _editor("cmd_add"), "propose": _editor("cmd_propose"), "edit": _editor("cmd_edit"),
    "supersede": _editor("cmd_supersede"), "forget": cmd_forget,
    "watch": _maintenance("cmd_watch"), "gc": _maintenance("cmd_gc"),
}

__all__ = ["run", "HANDLERS"]
