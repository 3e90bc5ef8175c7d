"""The version-1 error vocabulary and the one exception that carries it.

Every failure that reaches a protocol boundary (``sbuf invoke``, MCP) is a
:class:`SbufError` whose ``message`` is one of the fixed, sanitised strings
below: no filesystem path, no exception text from the OS or SQLite.  The
human CLI may print the longer ``detail`` (ids, statuses, file names inside
the store), never an absolute path.
"""

from __future__ import annotations

CODES = (
    "invalid_json", "invalid_request", "unsupported_version", "unknown_operation", "input_too_large",
    "output_too_large", "path_denied", "scope_denied", "access_denied", "permission_denied", "not_found",
    "not_initialized", "invalid_state", "invalid_record", "conflict", "internal_error",
)

# Fixed messages (the protocol's sanitised vocabulary).
INVALID_JSON = "stdin must contain one JSON object"
NOT_AN_OBJECT = "request must be a JSON object"
BAD_VERSION = "request must include integer version 1"
UNSUPPORTED_VERSION = "request version is not supported"
OPERATION_MISMATCH = "request operation does not match the command operation"
UNKNOWN_OPERATION = "operation is not supported by protocol version 1"
UNKNOWN_FIELD = "request contains an unknown field"
INPUT_TOO_LARGE = "request exceeds the bounded input limit"
OUTPUT_TOO_LARGE = "response exceeds the bounded protocol output"
MCP_OUTPUT_TOO_LARGE = "response exceeds the bounded MCP tool output"
RECORD_TOO_LARGE = "record exceeds the bounded protocol output"
TOO_MANY_RECORDS = "resource contains too many records"
PATH_DENIED = "filesystem paths are not accepted by the invocation protocol"
SCOPE_OUTSIDE_STORE = "requested scope is outside the selected store boundary"
RECORD_OUTSIDE_SCOPE = "record is outside the selected scope"
ACCESS_DENIED = "record is not available to this access class"
HUMAN_ACCESS = "the invoke protocol is limited to agent-readable records"
AGENT_APPROVAL = "agent writes always require explicit human approval"
WRITES_DISABLED = "MCP write tools are disabled; restart with an explicit host write grant"
PROPOSAL_APPROVAL = "invoke proposals always require explicit human approval"
AGENT_ACCESS_ONLY = "agent invocations may only write agent-accessible records"
NOT_FOUND = "record was not found"
RESOURCE_NOT_FOUND = "resource URI was not found"
CANDIDATE_NOT_FOUND = "candidate was not found"
NOT_INITIALIZED = "the selected store is not initialized"
INVALID_STATE = "record lifecycle state does not permit this operation"
RECORDS_INVALID = "one or more canonical records are invalid"
VALIDATION_FAILED = "record validation failed"
BUSY = "record changed or is busy; retry after inspection"
PROJECTION_BUSY = "the SQLite projection is busy; retry the operation"
STORE_FAILED = "the store operation failed"
PROJECTION_UNAVAILABLE = ("the SQLite projection could not be opened; check that its directory is "
                          "writable, then reindex the selected store")
UNRESOLVED_STORE = "could not resolve the selected store"
INVALID_INPUT = "request input is invalid"


class SbufError(Exception):
    """A failure with a protocol ``code`` and a sanitised ``message``.

    ``detail`` is an optional longer sentence for the human CLI (never an
    absolute path); protocol boundaries only ever show ``message``.
    """

    def __init__(self, code: str, message: str, detail: str | None = None):
        assert code in CODES, code
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail
        # Set by the editor commands only: the private file that keeps the text a
        # person typed when the command failed after they saved it (human CLI only).
        self.kept_draft = None

    @property
    def human(self) -> str:
        return self.detail or self.message


def invalid_request(message: str) -> SbufError:
    return SbufError("invalid_request", message)


__all__ = ["CODES", "SbufError", "invalid_request"]
