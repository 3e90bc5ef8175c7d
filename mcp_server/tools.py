"""The tools' behaviour, independent of the MCP wiring.

Every call ends in a :class:`CallToolResult`: on success the documented JSON as
``structuredContent`` and, identically, as text; on failure ``isError`` with a
message an agent can act on.  Nothing raised here reaches the client as a
traceback, and messages never name a path outside the project.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult, TextContent

from memstrata.compressor import QueryError
from memstrata.compressor import context_query as build_slice
from memstrata.compressor import navigation
from memstrata.indexer.project import REBUILD_HINT
from memstrata.indexer.workspace import Workspace
from memstrata.storage import StoreCorrupt

from .quiet import QuestionGate
from .schemas import SAVINGS_FIELDS
from .warmup import IndexWarmup

log = logging.getLogger(__name__)

SavingsProvider = Callable[[], Mapping[str, Any]]
"""Returns the seven ``savings_summary`` fields (``None`` where there is no data yet)."""

# How long context_query waits for the start-up catch-up before answering
# "still indexing"; short enough for clients' request timeouts.
DEFAULT_READY_TIMEOUT = 30.0

_ABS_PATH = re.compile(r"(?<![\w.~])/[^\s'\"`,;:()\[\]{}<>]+")


def ok(data: Mapping[str, Any]) -> CallToolResult:
    payload = dict(data)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
    )


def failure(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class UnavailableTools:
    """The tools of a server whose index cannot be opened (written by a newer MemStrata,
    damaged): every call says why and what to do, so the client reads it instead of losing
    its connection."""

    def __init__(self, message: str):
        self.message = message

    def _refuse(self, *_args: Any) -> CallToolResult:
        return failure(self.message)

    context_query = index_status = savings_summary = find_symbol = find_references = file_outline = _refuse


class MemStrataTools:
    def __init__(self, ws: Workspace, *, savings: SavingsProvider | None = None,
                 warmup: IndexWarmup | None = None, ready_timeout: float = DEFAULT_READY_TIMEOUT,
                 gate: QuestionGate | None = None):
        self.ws = ws
        self.gate = gate or QuestionGate()  # background work of the server waits while a question runs
        self.savings = savings
        self.warmup = warmup
        self.ready_timeout = ready_timeout
        self._root = str(Path(ws.root))

    # -- tools --------------------------------------------------------------

    def context_query(self, query: Any, max_tokens: Any = 4096, include_tests: Any = False) -> CallToolResult:
        if (refusal := self._not_ready()) is not None:
            return refusal
        try:
            with self.gate.answering():
                result = build_slice(self.ws, query, max_tokens=max_tokens, include_tests=include_tests)
        except QueryError as exc:
            return failure(self._safe(str(exc)))
        except StoreCorrupt as exc:
            log.error("context_query: %s", exc)
            return failure(self._unreadable(exc))
        except Exception as exc:
            log.exception("context_query failed")
            return failure(f"context_query failed with an internal error ({type(exc).__name__}); "
                           "the MemStrata log on stderr has the details.")
        answer = ok(result.api_fields())
        if result.notes:
            # The reference's output has exactly its four fields; what the agent should know
            # besides (files shown as indexed that changed on disk since, nothing matching) follows
            # them as a second text item, which clients show the model with the first.
            answer.content.append(TextContent(type="text", text="\n".join(f"note: {n}" for n in result.notes)))
        return answer

    def index_status(self) -> CallToolResult:
        try:
            fields = self.ws.status().api_fields()
        except StoreCorrupt as exc:
            # The status of an index that cannot be read is "error", with what to do about it.
            log.error("index_status: %s", exc)
            answer = ok({"project": str(self.ws.root), "files_indexed": 0, "last_indexed": None,
                         "index_size_mb": round(self._index_bytes() / (1024 * 1024), 2), "status": "error"})
            answer.content.append(TextContent(type="text", text="note: " + self._unreadable(exc)))
            return answer
        except Exception as exc:
            log.exception("index_status failed")
            return failure(self._safe(f"cannot read the index: {type(exc).__name__}: {exc}"))
        if self.warmup is not None and self.warmup.started and not self.warmup.done:
            fields["status"] = "indexing"
        return ok(fields)

    def savings_summary(self) -> CallToolResult:
        if self.savings is None:
            return failure("savings are not tracked by this MemStrata server (no savings ledger is connected).")
        try:
            figures = self.savings()
        except StoreCorrupt as exc:
            log.error("savings_summary: %s", exc)
            return failure(self._unreadable(exc))
        except Exception as exc:
            log.exception("savings_summary failed")
            return failure(self._safe(f"cannot read the savings ledger: {type(exc).__name__}: {exc}"))
        missing = [f for f in SAVINGS_FIELDS if f not in figures]
        if missing:
            log.warning("the savings provider did not report %s", ", ".join(missing))
        # Exactly the documented fields; a figure the ledger lacks stays null, never guessed.
        return ok({f: figures.get(f) for f in SAVINGS_FIELDS})

    # -- navigation -----------------------------------------------------------

    def find_symbol(self, name: Any, include_body: Any = False, kind: Any = None, path: Any = None,
                    max_results: Any = 20) -> CallToolResult:
        return self._navigate("find_symbol", navigation.find_symbol, name, include_body, kind, path, max_results)

    def find_references(self, symbol: Any, max_results: Any = 50) -> CallToolResult:
        return self._navigate("find_references", navigation.find_references, symbol, max_results)

    def file_outline(self, path: Any, depth: Any = 2) -> CallToolResult:
        return self._navigate("file_outline", navigation.file_outline, path, depth)

    def _navigate(self, tool: str, operation: Callable[..., dict], *args: Any) -> CallToolResult:
        # An index that has finished once answers at once from its graph
        # (ranges are checked against the files on disk); only a project
        # never indexed before waits for the start-up catch-up.
        try:
            settled = self.ws.store.get_meta("last_indexed") is not None and self.ws.quick_status() != "error"
        except StoreCorrupt:
            settled = False  # _not_ready says what is wrong
        if not settled:
            if (refusal := self._not_ready()) is not None:
                return refusal
        try:
            with self.gate.answering():
                found = operation(self.ws, *args)
            return ok(found)
        except QueryError as exc:
            return failure(self._safe(str(exc)))
        except StoreCorrupt as exc:
            log.error("%s: %s", tool, exc)
            return failure(self._unreadable(exc))
        except Exception as exc:
            log.exception("%s failed", tool)
            return failure(f"{tool} failed with an internal error ({type(exc).__name__}); "
                           "the MemStrata log on stderr has the details.")

    # -- helpers ------------------------------------------------------------

    def _not_ready(self) -> CallToolResult | None:
        """A refusal while the index cannot answer yet (still building, or broken)."""
        w = self.warmup
        if w is not None and w.started and not w.wait(self.ready_timeout):
            return failure(
                f"MemStrata is still building the index of this project ({w.describe_progress()}). "
                "Retry in a moment; index_status reports status 'ready' once it is done."
            )
        try:
            broken = self.ws.quick_status() == "error"
        except StoreCorrupt as exc:
            log.error("the index: %s", exc)
            return failure(self._unreadable(exc))
        if broken:
            detail = self.ws.status(check_disk=False).message or "the last index run failed"
            if "restart" in detail:  # the index file went away under this server: the detail says what to do
                return failure(self._safe(f"This MemStrata server cannot answer: {detail}."))
            return failure(self._safe(
                f"The index of this project is in an error state ({detail}). "
                "Rebuild it by running `memstrata index` in the project folder, then retry."
            ))
        return None

    def _unreadable(self, exc: StoreCorrupt, what: str = "The index of this project") -> str:
        return self._safe(f"{what} is unreadable ({exc.__cause__ or exc}). Rebuild it: "
                          f"{REBUILD_HINT}, in the project folder, then retry.")

    def _index_bytes(self) -> int:
        try:
            return self.ws.store.size_bytes()
        except Exception:
            return 0

    def _safe(self, message: str) -> str:
        """``message`` with absolute paths outside the project replaced."""
        root = self._root

        def keep_inside(m: re.Match[str]) -> str:
            path = m.group(0)
            if path == root or path.startswith(root + "/"):
                return path
            return "<path outside the project>"

        return _ABS_PATH.sub(keep_inside, message)
