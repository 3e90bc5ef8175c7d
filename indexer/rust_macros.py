"""Rust items written inside a brace macro call, read as the items they are.

Crates gate whole groups of items behind a macro of their own
(``cfg_feature! { pub fn spawn(..) { .. } impl Handle { .. } }``), or
declare a type through one that re-emits it (``pin_project! { pub struct
Fut<F> { #[pin] inner: F } }``).  The grammar reads a macro's argument as a
token tree, never as items, so every definition in it was invisible: no
symbol, no body to show, no call resolving to it.

When a file holds such calls at item level (the file's top, a module's, an
impl's or a trait's body), each call's argument is parsed on its own.  One
that reads as items without an error is unwrapped: the file is parsed again
with its ``name! {`` and closing ``}`` blanked (spaces; newlines kept, so
every byte offset and line stays the file's own).  One that does not (a list
of type names, a DSL such as ``bitflags!``'s ``struct Flags: u32 { .. }``)
stays the token tree it was.  Calls nested in an unwrapped one are taken the same way.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable

import tree_sitter as ts

from . import grammar_repair

# Nested gates (`cfg_a! { cfg_b! { .. } }`) are a level or two deep in practice.
_MAX_DEPTH = 3
# Larger files are left as they parse: an argument is parsed on its own and then in place, two
# more parses (a generated file of that size is rarely code anyone asks about).
MAX_UNWRAP_BYTES = 1024 * 1024
# Where a call stands at item level.
_ITEM_PARENTS = frozenset({"source_file", "declaration_list"})
# A macro whose argument is code of another shape, or that defines rather than wraps.
_NOT_ITEMS = frozenset({b"macro_rules"})


# An item-level call, first on its line: a (path-qualified) name, `!` and a brace.
_CALL_LINE = re.compile(rb"[ \t]*((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)[ \t]*![ \t]*\{")
_BANG_BRACE = re.compile(rb"![ \t]*\{")
# What an argument made of items starts with, after blanks and comments: an attribute, a
# visibility, an item keyword, or another call.  Anything else (a list of names, `$x`, a DSL) is
# not parsed at all: a grammar's error recovery on such text costs far more than a clean parse.
_ITEMS_START = re.compile(
    rb"(?:\s|//[^\n]*|/\*.*?\*/)*(?:#|pub\b|fn\b|struct\b|enum\b|union\b|impl\b|trait\b|mod\b|use\b|"
    rb"const\b|static\b|type\b|unsafe\b|async\b|extern\b|(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*[ \t]*!)", re.S)


def _item_calls(source: bytes, root: ts.Node) -> list[tuple[int, int, int]]:
    """(call start, argument's opening brace end, closing brace start) for every brace macro call
    at item level, outermost only (a call nested inside one is still a token tree).  Found from
    the text first: walking every top-level node in Python costs more than the rest of this."""
    calls = []
    tried = -1  # the line last matched against _CALL_LINE
    # The line's start is searched for only back to the previous `!{`: a long line holding many
    # (a generated table, a minified literal) is then read once, not once per `!{` on it.
    line_start = scanned = 0
    for bang in _BANG_BRACE.finditer(source):
        newline = source.rfind(b"\n", scanned, bang.start())
        if newline >= 0:
            line_start = newline + 1
        scanned = bang.start()
        # A call first on its line is that line's first `!{`: each line is matched once.
        if line_start == tried:
            continue
        tried = line_start
        match = _CALL_LINE.match(source, line_start)
        if match is None or match.end() != bang.end():
            continue
        if match.group(1).rsplit(b"::", 1)[-1] in _NOT_ITEMS:
            continue
        start = match.start(1)
        node = root.descendant_for_byte_range(start, start + 1)
        while node is not None and node.start_byte == start and node.type != "macro_invocation":
            node = node.parent
        if node is None or node.type != "macro_invocation" or node.start_byte != start:
            continue
        parent = node.parent
        args = node.children[-1]
        if (parent is None or parent.type not in _ITEM_PARENTS or args.type != "token_tree"
                or args.child_count < 2 or args.children[0].type != "{" or args.children[-1].type != "}"):
            continue
        # An unclosed call (a file being typed) ends in a `}` the parser only supposed: it has no
        # byte to blank (past the file's end, or another token's), and unwrapping it would hide
        # the file's syntax error.
        if args.children[-1].is_missing:
            continue
        calls.append((start, args.children[0].end_byte, args.children[-1].start_byte))
    return calls


def _blank(buf: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if buf[i] not in (0x0A, 0x0D):
            buf[i] = 0x20


def _item_spans(source: bytes, root: ts.Node, offset: int, parse: Callable[..., ts.Tree | None],
                depth: int) -> list[tuple[int, int]] | None:
    """The (start, end) byte spans to blank so that the calls under ``root`` whose arguments are
    items read as items, nested calls included (offsets into the file: ``root`` is the parse of
    ``source`` read from byte ``offset``).  Each call's argument is parsed on its own first, so a
    whole file is parsed again only when something is to be unwrapped.  None past the parse's
    deadline."""
    spans: list[tuple[int, int]] = []
    for start, open_end, close_start in _item_calls(source, root):
        inner = source[open_end:close_start]
        if not _ITEMS_START.match(inner):
            continue
        tree = parse(inner)
        if tree is None:
            return None
        if tree.root_node.has_error:
            continue  # no items: a DSL, a list of names, a fragment of an item
        spans.append((offset + start, offset + open_end))
        spans.append((offset + close_start, offset + close_start + 1))
        if depth + 1 < _MAX_DEPTH:
            nested = _item_spans(inner, tree.root_node, offset + open_end, parse, depth + 1)
            if nested is None:
                return None
            spans.extend(nested)
    return spans


def _points(source: bytes):
    """byte -> (row, column) of ``source``, by a search among its line starts."""
    starts = [0] + [m.end() for m in re.finditer(b"\n", source)]

    def point(byte: int) -> tuple[int, int]:
        row = bisect_right(starts, byte) - 1
        return row, byte - starts[row]
    return point


def unwrap_item_macros(source: bytes, tree: ts.Tree, parse: Callable[..., ts.Tree | None]) -> ts.Tree:
    """``tree`` (the parse of ``source``), or a parse in which the item-level brace macro calls whose
    arguments are items read as those items.  ``parse(bytes, old_tree=None)`` parses Rust (None
    past its deadline)."""
    if b"!" not in source or len(source) > MAX_UNWRAP_BYTES:
        return tree
    spans = _item_spans(source, tree.root_node, 0, parse, 0)
    if not spans:
        return tree
    candidate = bytearray(source)
    old = tree.copy()
    point = _points(source)
    for start, end in spans:
        _blank(candidate, start, end)
        # Same length, newlines kept: the edit moves nothing, and the parse below reads again only
        # the calls (everything else is reused from the first parse).
        start_point, end_point = point(start), point(end)
        old.edit(start, end, end, start_point, end_point, end_point)
    again = parse(bytes(candidate), old_tree=old)
    # Read on its own, each argument was items; read in place it should be too.  Should the file
    # then read worse (more code inside errors), it is kept as it was.
    if again is None or again.root_node.has_error and (
            not tree.root_node.has_error
            or grammar_repair.error_weight(again.root_node) > grammar_repair.error_weight(tree.root_node)):
        return tree
    return again
