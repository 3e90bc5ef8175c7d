"""The store view and the operations of the version-1 protocol.

A :class:`View` is what one process serves: the global store alone, or a
project store composed with the global store for reads (writes only ever go
to the selected store).  :class:`Core` answers protocol operations against
a view; ``sbuf invoke`` and the MCP adapter both call :meth:`Core.invoke`,
so the two boundaries give the same envelope for the same request.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstrata.storage import StoreError
from . import index_db as sb

from . import errors
from . import invoke as p
from .errors import SbufError, invalid_request
from .projection import Projection
from .records import (
    GLOBAL_SCOPE, Record, RecordInvalid, check_provenance, new_id, now_ns, parse_scope, validate,
)
from .repository import Proposal, Repository
from .retrieval import Filters, assemble_context, ranked_hits, search_item, sources_json
from .stores import StoreLocation, global_location, project_location

AGENT = ["agent"]
ACTIVE = ["active"]
MAX_SCOPE_RECORDS = 100


@dataclass
class View:
    mode: str                          # "global" | "project"
    selected: StoreLocation
    global_store: StoreLocation        # the selected store itself in global mode
    watch: bool = False                # follow file changes with a change feed (long-running hosts)
    _projections: dict[Path, Projection] = field(default_factory=dict)

    @classmethod
    def resolve(cls, mode: str, cwd: Path | None = None, env: Mapping[str, str] = os.environ,
                *, watch: bool = False) -> "View":
        """Resolve the store locations (nothing is created).  Raises SbufError(internal_error)."""
        glob = global_location(env)
        selected = project_location(cwd, env) if mode == "project" else glob
        return cls(mode, selected, glob, watch)

    @property
    def current_scope(self) -> str:
        return self.selected.scope

    @property
    def default_scopes(self) -> list[str]:
        if self.mode == "project":
            return [self.selected.scope, GLOBAL_SCOPE]
        return [GLOBAL_SCOPE]

    def projection(self, loc: StoreLocation) -> Projection:
        proj = self._projections.get(loc.root)
        if proj is None:
            proj = self._projections[loc.root] = Projection(loc, watch=self.watch)
        return proj

    def repository(self, loc: StoreLocation | None = None) -> Repository:
        loc = loc or self.selected
        return Repository(loc, self.projection(loc))

    def read_stores(self, scopes: list[str]) -> list[Projection]:
        """The synced, valid projections a read consults: the selected store, and in
        project mode the global store when it is initialized and ``global`` is allowed."""
        self.selected.read_config()
        locs = [self.selected]
        if self.mode == "project" and GLOBAL_SCOPE in scopes and self.global_store.initialized():
            self.global_store.read_config()
            locs.append(self.global_store)
        out = []
        for loc in locs:
            self.repository(loc).recover_if_needed()
            proj = self.projection(loc)
            proj.sync()
            proj.require_valid(writing=False)
            out.append(proj)
        return out

    def verify(self) -> None:
        """Stat every file of the projections in use (the idle check behind a change feed)."""
        for proj in list(self._projections.values()):
            if proj.loc.initialized():
                try:
                    proj.sync(full=True)
                except SbufError:
                    pass  # the next read reports it

    def close(self) -> None:
        for proj in self._projections.values():
            proj.close()
        self._projections.clear()


def invoke_record(rec: sb.RecordRow) -> dict:
    """A record on the wire: every field, no path."""
    return {
        "id": rec.id, "title": rec.title, "kind": rec.kind, "scope": rec.scope, "status": rec.status,
        "access": rec.access, "created_at": rec.created_at, "updated_at": rec.updated_at, "tags": rec.tags,
        "aliases": rec.aliases, "supersedes": rec.supersedes, "sources": sources_json(rec), "body": rec.body,
    }


def _invalid(record_id: str, exc: RecordInvalid) -> dict:
    return Proposal("invalid", record_id, None, None, str(exc)).to_json()


def _checked(record: Record) -> RecordInvalid | None:
    try:
        validate(record)
        check_provenance(record)
    except RecordInvalid as exc:
        return exc
    return None


class Core:
    """The protocol operations over one :class:`View`."""

    def __init__(self, view: View):
        self.view = view

    # -- entry points --------------------------------------------------------------

    def invoke(self, operation: str, request: Any) -> dict:
        """The envelope for one request (checks, operation, sanitised errors)."""
        def run() -> Any:
            m = p.check_request(operation, request)
            return self._translate(getattr(self, f"op_{operation}"), m)
        return p.guarded(operation, run)

    def scope_records(self, scope: str) -> dict:
        """Envelope of the active agent-readable records of one allowed scope (the
        MCP scope resource), sorted by id."""
        def run() -> list[dict]:
            if parse_scope(scope) is None:
                raise invalid_request(errors.INVALID_INPUT)
            if scope not in self.view.default_scopes:
                raise SbufError("scope_denied", errors.SCOPE_OUTSIDE_STORE)
            rows: list[sb.RecordRow] = []
            for proj in self.view.read_stores([scope]):
                rows += sb.list_records(proj.store(), statuses=ACTIVE, accesses=AGENT, scopes=[scope])
            if len(rows) > MAX_SCOPE_RECORDS:
                raise SbufError("output_too_large", errors.TOO_MANY_RECORDS)
            return [invoke_record(r) for r in sorted(rows, key=lambda r: r.id)]
        return p.guarded("get", lambda: self._translate(run))

    @staticmethod
    def _translate(fn, *args) -> Any:
        """Storage-level failures as protocol errors."""
        try:
            return fn(*args)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise SbufError("conflict", errors.PROJECTION_BUSY) from None
            raise SbufError("internal_error", errors.PROJECTION_UNAVAILABLE) from None
        except (sqlite3.Error, StoreError):
            raise SbufError("internal_error", errors.PROJECTION_UNAVAILABLE) from None
        except OSError:
            raise SbufError("internal_error", errors.STORE_FAILED) from None

    # -- reads ---------------------------------------------------------------------

    def _read_filters(self, m: dict) -> Filters:
        scopes = p.scope_filter(m, self.view.default_scopes)
        p.access_field(m)
        return Filters(scopes, ACTIVE, AGENT)

    def op_context(self, m: dict) -> dict:
        query = p.query_field(m)
        limit = p.integer_field(m, "limit", p.DEFAULT_LIMIT, p.MAX_LIMIT)
        budget = p.integer_field(m, "budget", p.DEFAULT_BUDGET, p.MAX_BUDGET)
        filters = self._read_filters(m)
        return self.context(query, limit, budget, filters)

    def op_search(self, m: dict) -> list[dict]:
        query = p.query_field(m)
        limit = p.integer_field(m, "limit", p.DEFAULT_LIMIT, p.MAX_LIMIT)
        filters = self._read_filters(m)
        return self.search(query, limit, filters)

    def context(self, query: str, limit: int, budget: int, filters: Filters) -> dict:
        stores = [proj.store() for proj in self.view.read_stores(filters.scopes)]
        hits, dropped = ranked_hits(stores, query, limit, self.view.current_scope, filters)
        return assemble_context(hits, dropped, query=query, budget=budget, current_scope=self.view.current_scope,
                                filters=filters)

    def search(self, query: str, limit: int, filters: Filters) -> list[dict]:
        stores = [proj.store() for proj in self.view.read_stores(filters.scopes)]
        hits, _ = ranked_hits(stores, query, limit, self.view.current_scope, filters)
        return [search_item(h) for h in hits]

    def op_get(self, m: dict) -> dict:
        record_id = p.id_field(m)
        filters = self._read_filters(m)
        for proj in self.view.read_stores(filters.scopes):
            rows = sb.find_records(proj.store(), record_id)
            if rows:
                rec = rows[0]
                break
        else:
            raise SbufError("not_found", errors.NOT_FOUND)
        if rec.scope not in filters.scopes:
            raise SbufError("scope_denied", errors.RECORD_OUTSIDE_SCOPE)
        if rec.access != "agent":
            raise SbufError("access_denied", errors.ACCESS_DENIED)
        if p.utf8_len(rec.body) > p.MAX_STRING_BYTES:
            raise SbufError("output_too_large", errors.RECORD_TOO_LARGE)
        return invoke_record(rec)

    # -- writes --------------------------------------------------------------------

    def _allowed_target(self, repo: Repository, record_id: str, scopes: list[str]):
        loaded = repo.find(record_id)
        if loaded is None:
            raise SbufError("not_found", errors.NOT_FOUND)
        if loaded.record.scope not in scopes:
            raise SbufError("scope_denied", errors.RECORD_OUTSIDE_SCOPE)
        if loaded.record.access != "agent":
            raise SbufError("access_denied", errors.ACCESS_DENIED)
        return loaded

    def op_archive(self, m: dict) -> dict:
        record_id = p.id_field(m)
        filters = self._read_filters(m)
        with self.view.repository().mutation() as repo:
            loaded = self._allowed_target(repo, record_id, filters.scopes)
            if loaded.record.status != "active":
                raise SbufError("invalid_state", errors.INVALID_STATE)
            repo.transition(loaded, "archived")
        return {"outcome": "accepted", "id": record_id, "status": "archived"}

    def op_remember(self, m: dict) -> dict:
        p.write_guard(m)
        source = p.source_object(m)
        title = p.bounded(m, "title")
        kind = p.kind_field(m, required=True)
        scope = p.record_scope_field(m, self.view.selected.scope)
        tags = p.string_list(m, "tags") or []
        aliases = p.string_list(m, "aliases") or []
        sources = [p.parse_source(source)] if source is not None else []
        body = p.bounded(m, "body")
        now = now_ns()
        record = Record(new_id(), title, kind, scope, "candidate", "agent", now, now, body, sources, tags, aliases)
        invalid = self._screen(record)
        if invalid is not None:
            return invalid
        with self.view.repository().mutation() as repo:
            return repo.propose(record).to_json()

    def _screen(self, record: Record) -> dict | None:
        """The ``invalid`` outcome of a new record that breaks a rule, else None;
        refuses one that does not carry the selected store's scope."""
        problem = _checked(record)
        if problem is not None:
            return _invalid(record.id, problem)
        if record.scope != self.view.selected.scope:
            raise SbufError("scope_denied", errors.RECORD_OUTSIDE_SCOPE)
        return None

    def op_update(self, m: dict) -> dict:
        p.write_guard(m)
        old_id = p.id_field(m)
        scopes = p.scope_filter(m, self.view.default_scopes)
        with self.view.repository().mutation() as repo:
            old = self._allowed_target(repo, old_id, scopes).record
            source = p.source_object(m)
            title = p.bounded(m, "title", required=False)
            kind = p.kind_field(m, required=False)
            tags = p.string_list(m, "tags")
            aliases = p.string_list(m, "aliases")
            sources = [p.parse_source(source)] if source is not None else []
            body = p.bounded(m, "body", required=False)
            now = now_ns()
            record = Record(
                new_id(), title if title is not None else old.title, kind or old.kind, old.scope, "candidate",
                "agent", now, now, body if body is not None else old.body, sources,
                tags if tags is not None else list(old.tags), aliases if aliases is not None else list(old.aliases),
                [old.id])
            problem = _checked(record)
            if problem is not None:
                return _invalid(record.id, problem)
            if old.status != "active":
                raise SbufError("invalid_state", errors.INVALID_STATE)
            return repo.propose(record).to_json()

    def op_propose(self, m: dict) -> dict:
        p.write_guard(m)
        f = p.nested_fields(m, "record", p.RECORD_FIELDS)
        p.access_field(f, errors.PROPOSAL_APPROVAL)
        status = f.get("status", "candidate")
        if status != "candidate":
            raise SbufError("permission_denied", errors.PROPOSAL_APPROVAL)
        record_id = p.id_field(f, required=False) or new_id()
        record = self._record_from_fields(f, record_id, "candidate", self.view.selected.scope)
        invalid = self._screen(record)
        if invalid is not None:
            return invalid
        with self.view.repository().mutation() as repo:
            if repo.find(record.id) is not None:
                raise SbufError("invalid_state", errors.INVALID_STATE)
            for old_id in record.supersedes[:1]:
                old = self._allowed_target(repo, old_id, [record.scope])
                if old.record.status != "active":
                    raise SbufError("invalid_state", errors.INVALID_STATE)
            return repo.propose(record).to_json()

    def op_supersede(self, m: dict) -> dict:
        p.access_field(m, errors.AGENT_ACCESS_ONLY)
        old_id = p.id_field(m)
        f = p.nested_fields(m, "replacement", p.RECORD_FIELDS - {"id"})
        if f is not m:
            p.access_field(f, errors.AGENT_ACCESS_ONLY)
        if f.get("status", "active") != "active":
            raise invalid_request("status is invalid")
        with self.view.repository().mutation() as repo:
            old = self._allowed_target(repo, old_id, [self.view.selected.scope])
            if old.record.status != "active":
                raise SbufError("invalid_state", errors.INVALID_STATE)
            new = self._record_from_fields(f, new_id(), "active", old.record.scope, base=old.record)
            new.supersedes = [old.record.id]
            if new.scope != old.record.scope:
                raise SbufError("scope_denied", errors.RECORD_OUTSIDE_SCOPE)
            if _checked(new) is not None:
                raise invalid_request(errors.INVALID_INPUT)
            repo.supersede(old, new)
        return {"outcome": "accepted", "id": new.id, "status": "active"}

    def _record_from_fields(self, f: dict, record_id: str, status: str, default_scope: str,
                            base: Record | None = None) -> Record:
        """A full record from propose/supersede fields; ``base`` fills what is missing."""
        title = p.bounded(f, "title", required=base is None)
        kind = p.kind_field(f, required=base is None)
        scope = p.record_scope_field(f, default_scope)
        tags = p.string_list(f, "tags")
        aliases = p.string_list(f, "aliases")
        supersedes = p.ids_field(f, "supersedes")
        sources = p.sources_field(f)
        body = p.bounded(f, "body", required=base is None)
        now = now_ns()
        created = p.timestamp_field(f, "created_at")
        updated = p.timestamp_field(f, "updated_at")
        return Record(
            id=record_id, title=title if title is not None else base.title, kind=kind or base.kind,
            scope=scope, status=status, access="agent", created_at=created if created is not None else now,
            updated_at=updated if updated is not None else max(now, created or 0),
            body=body if body is not None else base.body,
            sources=sources if sources is not None else (list(base.sources) if base else []),
            tags=tags if tags is not None else (list(base.tags) if base else []),
            aliases=aliases if aliases is not None else (list(base.aliases) if base else []),
            supersedes=supersedes or [])

    def idle(self) -> None:
        """Housekeeping between requests of a long-running host."""
        self.view.verify()

    def close(self) -> None:
        self.view.close()


__all__ = ["View", "Core", "invoke_record", "AGENT", "ACTIVE", "MAX_SCOPE_RECORDS"]
