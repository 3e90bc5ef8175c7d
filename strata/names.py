"""The engine's rules for names and ids: one rule per kind, checked in the engine's order.

Each kind refuses, in its own order, some of: an empty name (a whitespace-only one counts as
empty for most kinds; branches have their own sentence), a name past its byte limit, control
bytes (three sets: every C0 and C1 byte with DEL, NUL and LF, or NUL alone), a ``/`` and a
reserved leading ``_``.  Read off stratadb 1.2.7 by trying each kind with every single control
byte, every whitespace character and combinations of two faults (the ``names`` script of
tests/strata/compat_scenarios.py holds them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import StrataError, check_length

# Rust's char::is_whitespace (Unicode White_Space). Python's str.isspace differs: it also counts
# U+001C..U+001F, which the engine reads as control bytes.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
             "\u2028\u2029\u202f\u205f\u3000"
CONTROL_SETS = {
    "c0_c1": re.compile("[\x00-\x1f\x7f-\x9f]"),  # every C0 byte, DEL and every C1 byte
    "nul_lf": re.compile("[\x00\n]"),
    "nul": re.compile("\x00"),
}

EMPTY, BLANK, LENGTH, CONTROL, RESERVED, SLASH = "empty", "blank", "length", "control", "reserved", "slash"
NESTED = "nested"  # a `.` or `/` anywhere: a path into the value, not one field


@dataclass(frozen=True, slots=True)
class NameRule:
    code: str
    what: str  # the name as the engine's sentences call it
    order: tuple[str, ...]
    limit: int = 0
    too_long: str = "exceeds the maximum length"
    control: str = "c0_c1"
    blank: str = "must not be empty"  # the sentence for a whitespace-only name
    reserved: str = ""  # the code of a name starting with `_`
    reserved_for: str = "engine internals"


# A name no rule can refuse: not empty, printable ASCII without `/` or spaces, no leading `_`,
# shorter than every limit. Nearly every name a command carries is one, and this spares the
# steps (a name is checked on every command, reads included).
_ORDINARY = re.compile(r"[0-9A-Za-z.:@+\-][0-9A-Za-z_.:@+\-]{0,254}").fullmatch


def check_name(rule: NameRule, text: str) -> None:
    if not _ORDINARY(text):
        _check_steps(rule, text)


def _check_steps(rule: NameRule, text: str) -> None:
    for step in rule.order:
        if step == EMPTY and text == "":
            raise StrataError(rule.code, f"{rule.what} must not be empty")
        if step == BLANK and text.strip(WHITESPACE) == "":
            raise StrataError(rule.code, f"{rule.what} {rule.blank}")
        if step == LENGTH:
            check_length(rule.code, rule.what, text, rule.limit, rule.too_long)
        if step == CONTROL and CONTROL_SETS[rule.control].search(text):
            raise StrataError(rule.code, f"{rule.what} contains an unsupported control byte")
        if step == RESERVED and text.startswith("_"):
            raise StrataError(rule.reserved, f"{rule.what} is reserved for {rule.reserved_for}")
        if step == SLASH and "/" in text:
            raise StrataError(rule.code, f"{rule.what} must not contain `/`")
        if step == NESTED and ("." in text or "/" in text):
            raise StrataError(rule.code, f"{rule.what} must be a top-level field name")


_GRAPHISH = (BLANK, LENGTH, CONTROL)
BRANCH = NameRule("invalid_argument.engine.branch_name", "branch name", (EMPTY, RESERVED, BLANK, LENGTH, CONTROL),
                  255, "is too long", blank="must not be whitespace-only",
                  reserved="invalid_argument.engine.branch_name_reserved", reserved_for="engine control data")
SPACE = NameRule("invalid_argument.engine.product_space", "product space", (EMPTY, RESERVED, LENGTH, CONTROL),
                 65535, "is too long", "nul_lf", reserved="invalid_argument.engine.product_space_reserved",
                 reserved_for="engine control data")
JSON_DOCUMENT_ID = NameRule("invalid_argument.engine.json_document_id", "JSON document id", (EMPTY, LENGTH, CONTROL),
                            65535, "is too long", "nul_lf")
JSON_INDEX_NAME = NameRule("invalid_argument.engine.json_index_name", "JSON index name",
                           (EMPTY, LENGTH, CONTROL, RESERVED), 256, "is too long", "nul_lf",
                           reserved="invalid_argument.engine.json_index_name_reserved")
EVENT_TYPE = NameRule("invalid_argument.engine.event_type", "event type", _GRAPHISH, 256, control="nul")
VECTOR_COLLECTION = NameRule("invalid_argument.engine.vector_collection", "vector collection name",
                             (EMPTY, LENGTH, CONTROL, RESERVED, SLASH), 256, "is too long", "nul",
                             reserved="invalid_argument.engine.vector_collection_reserved")
VECTOR_KEY = NameRule("invalid_argument.engine.vector_key", "vector key", (LENGTH, CONTROL), 1024, "is too long",
                      "nul")
GRAPH_NAME = NameRule("invalid_argument.engine.graph_name", "graph name", (*_GRAPHISH, RESERVED, SLASH), 256,
                      reserved="invalid_argument.engine.graph_name_reserved")
# A control byte in a node id or edge type would also break the neighbour cursor, whose parts a
# U+001F separates.
NODE_ID = NameRule("invalid_argument.engine.graph_node_id", "graph node id", _GRAPHISH, 1024)
EDGE_TYPE = NameRule("invalid_argument.engine.graph_edge_type", "graph edge type", (*_GRAPHISH, RESERVED), 256,
                     reserved="invalid_argument.engine.graph_edge_type_reserved")
TYPE_NAME = NameRule("invalid_argument.engine.graph_type_name", "graph type name", (*_GRAPHISH, RESERVED), 256,
                     reserved="invalid_argument.engine.graph_type_name_reserved")
PROPERTY_NAME = NameRule("invalid_argument.engine.graph_property_name", "graph property name", _GRAPHISH, 256)
# A filter condition's field names one top-level metadata field; whitespace, other control bytes and
# any other character are allowed.
METADATA_FIELD = NameRule("invalid_argument.engine.vector_metadata_field", "vector metadata field",
                          (EMPTY, LENGTH, CONTROL, NESTED), 1024, "is too long", "nul")
# At most 256 characters are at most 1024 bytes, so such a field without NUL, `.` or `/` passes.
_PLAIN_FIELD = re.compile("[^\x00./]{1,256}").fullmatch


def check_filter_fields(conditions) -> None:
    """The fields of a metadata filter's conditions, in order (the engine reports the first bad one)."""
    for c in conditions or ():
        if not _PLAIN_FIELD(c.field):  # an ordinary name may hold a `.`: no check_name fast path
            _check_steps(METADATA_FIELD, c.field)

# The fields that name the object a command works on, in the order the engine reads them: it turns
# them into checked names when it reads the command, so they are judged before the branch and
# space the command is scoped to.
OBJECT_FIELDS = (("graph", GRAPH_NAME), ("collection", VECTOR_COLLECTION), ("event_type", EVENT_TYPE),
                 ("node_id", NODE_ID))


def check_object_names(args: dict) -> None:
    for field_name, rule in OBJECT_FIELDS:
        value = args.get(field_name)
        if isinstance(value, str):
            check_name(rule, value)
    # A metadata filter's fields come next (vector_query judges its as_of and input before them).
    check_filter_fields(args.get("filter"))
