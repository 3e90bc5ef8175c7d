"""Symbol navigation: one definition with its source, the uses of a symbol,
the outline of a file.

The graph says which symbols a name designates and where they are used
(resolved references, import bindings); line ranges and source text come
from :func:`~memstrata.indexer.file_facts.current_facts`, which re-reads a
file that changed since it was indexed, so no answer carries a stale range.
Paths are project-relative, lines 1-based and inclusive.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections import defaultdict
from pathlib import Path

from memstrata.indexer import scan
from memstrata.indexer.file_facts import Definition, FileFacts, StaleFile, current_facts
from memstrata.indexer.graph_view import GraphView
from memstrata.indexer.model import REF_EDGE, SYMBOL_KINDS
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci
from memstrata.storage import code_nav

from .errors import QueryError, echoed, json_type, printable
from .render import comment_prefix
from .symbol_names import Match, near_names, resolve

MAX_RESULTS_LIMIT = 200
MAX_NAME_CHARS = 1000
MAX_SNIPPET_CHARS = 400
_USE_EDGES = ("calls", "references", "inherits")
_CLASSLIKE = frozenset({"class", "struct", "interface", "enum", "type"})
_REF_KIND = {"call": "call", "type": "type", "inherit": "inherit", "export": "export"}
_TEST_PENALTY = 0.5


class NavigationError(QueryError):
    """A navigation request that cannot be answered; the message says why in one sentence."""


# -- arguments ------------------------------------------------------------------

def check_name(value: object, arg: str) -> str:
    if not isinstance(value, str):
        raise NavigationError(f"{arg} must be a string, got {json_type(value)}")
    name = value.strip()
    if not name or name == "*":
        raise NavigationError(f"{arg} is empty: give a symbol name such as 'AuthService.login', "
                              "or the start of one followed by '*'")
    if len(name) > MAX_NAME_CHARS:
        raise NavigationError(f"{arg} is too long ({len(name):,} characters; the limit is {MAX_NAME_CHARS:,})")
    if "*" in name[:-1]:
        raise NavigationError(f"{arg} may hold '*' only at its end (a substring search), "
                              f"got {echoed(name, quoted=True)}")
    return name


def check_int(value: object, arg: str) -> int:
    if isinstance(value, bool):
        raise NavigationError(f"{arg} must be an integer, got {json_type(value)}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise NavigationError(f"{arg} must be an integer, got {echoed(value, quoted=True)}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise NavigationError(f"{arg} must be an integer, got {json_type(value)}")
    return value


def clamp_results(value: object) -> int:
    """``max_results`` held to 1..MAX_RESULTS_LIMIT (out of range is clamped, not refused)."""
    return max(1, min(MAX_RESULTS_LIMIT, check_int(value, "max_results")))


def check_bool(value: object, arg: str) -> bool:
    if not isinstance(value, bool):
        raise NavigationError(f"{arg} must be true or false, got {json_type(value)}")
    return value


def check_kind(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.strip() not in SYMBOL_KINDS:
        shown = echoed(value, quoted=True) if isinstance(value, str) else json_type(value)
        raise NavigationError(f"kind must be one of {', '.join(SYMBOL_KINDS)}; got {shown}")
    return value.strip()


def project_path(root: Path, value: object, arg: str = "path") -> str:
    """``value`` as a project-relative path (absolute paths inside the project
    are accepted); never echoes a path outside the project."""
    if not isinstance(value, str):
        raise NavigationError(f"{arg} must be a string, got {json_type(value)}")
    text = value.strip()
    if not text:
        raise NavigationError(f"{arg} is empty: give a project-relative path such as 'src/app.py'")
    if os.path.isabs(text):
        try:
            rel = os.path.relpath(os.path.realpath(text), os.path.realpath(root))
        except ValueError:  # another drive (Windows)
            raise NavigationError(f"{arg} is outside the project") from None
    else:
        rel = os.path.normpath(text)
    rel = rel.replace(os.sep, "/")
    if rel == ".." or rel.startswith("../"):
        raise NavigationError(f"{arg} is outside the project")
    return "" if rel == "." else rel


# -- results ------------------------------------------------------------------

class _Files:
    """Current facts per file, read once per request."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.cache: dict[str, FileFacts | StaleFile | None] = {}

    def get(self, path: str) -> FileFacts | None:
        """None when not indexed; raises StaleFile when it changed unreadably."""
        hit = self.cache.get(path, False)
        if hit is False:
            try:
                root = None if self.ws.detached else self.ws.root
                hit = current_facts(root, self.ws.store, path, self.ws.indexer.max_file_bytes)
            except StaleFile as exc:
                hit = exc
            self.cache[path] = hit
        if isinstance(hit, StaleFile):
            raise hit
        return hit  # type: ignore[return-value]


def importance(graph: GraphView, node: str) -> float:
    """How much the project leans on ``node``: the weight of the uses that
    point at it (calls, type uses, subclasses), test code counting less."""
    score = 1.0 + sum(w for _v, kind, w, out, _t in graph.adjacency(node) if not out and kind in _USE_EDGES)
    return score * (_TEST_PENALTY if graph.is_test_node(node) else 1.0)


def _ranked(graph: GraphView, matches: list[Match]) -> list[Match]:
    return sorted(matches, key=lambda m: (m.exact, -importance(graph, m.node), m.node))


def _unknown(graph: GraphView, name: str, scope: str = "", ws: Workspace | None = None) -> NavigationError:
    near = near_names(graph, name)
    hint = f"; did you mean {', '.join(near)}?" if near else "; try a shorter name or 'prefix*'."
    # The name may have been written since the index was: say that the files are ahead of it.
    behind = ws.behind_disk() if ws is not None else None
    ahead = ""
    if behind is not None:
        status, why, then = behind
        ahead = f" (the index is {status}: {why}; a definition written since is not in it yet: {then})"
    return NavigationError(f"no symbol matches {echoed(name, quoted=True)}{scope}{ahead}{hint}")


_TYPES = frozenset({"class", "struct", "interface", "module", "trait", "enum"})


def _inherited(graph: GraphView, name: str, depth: int = 4) -> list[Match]:
    """``Type.member`` that ``Type`` does not define itself but inherits: the definitions of
    ``member`` in its base classes or mixed-in modules, nearest first (``Child.greet`` ->
    ``Base.greet``; a Ruby class's ``include Helpers`` -> ``Helpers.post``)."""
    owner, dot, member = name.rpartition(".")
    if not dot or not owner or not member or member.endswith("*"):
        return []
    found: list[Match] = []
    seen: set[str] = set()
    frontier = [m.node for m in resolve(graph, owner) if graph.node(m.node).get("kind") in _TYPES]
    for _level in range(depth):
        bases = [b for t in frontier for b in graph.bases(t) if b not in seen]
        seen.update(bases)
        for base in bases:
            data = graph.node(base)
            candidate = f"{data.get('path')}::{data.get('qualname')}.{member}"
            if candidate in graph:
                found.append(Match(candidate, 1))
        if found or not bases:
            return found
        frontier = bases
    return found


def find_symbol(ws: Workspace, name: object, include_body: object = False, kind: object = None,
                path: object = None, max_results: object = 20) -> dict:
    name = check_name(name, "name")
    include_body = check_bool(include_body, "include_body")
    kind = check_kind(kind)
    limit = clamp_results(max_results)
    rel = None if path is None else project_path(ws.root, path)
    with ws.lock:
        graph = ws.graph
        if rel is not None:
            _check_indexed(graph, rel, allow_dir=True, store=ws.store)
        matches = resolve(graph, name) or _inherited(graph, name)
        if not matches:
            raise _unknown(graph, name, ws=ws)
        if kind is not None:
            matches = [m for m in matches if graph.node(m.node).get("kind") == kind]
        if rel:
            prefix = rel.rstrip("/") + "/"
            matches = [m for m in matches if graph.file_of(m.node) == rel or graph.file_of(m.node).startswith(prefix)]
        if not matches:
            where = (f" of kind {kind}" if kind else "") + (f" in {echoed(printable(rel))}" if rel else "")
            raise NavigationError(f"{echoed(name, quoted=True)} names no symbol{where}; "
                                  "leave out kind or path to see every match")
        ranked = [(m.node, graph.file_of(m.node), graph.node(m.node)["qualname"]) for m in _ranked(graph, matches)]
    files = _Files(ws)
    out: list[dict] = []
    gone: list[str] = []
    for node, file, qual in ranked:
        if len(out) > limit:
            break
        sym = _current_definition(files, file, qual, gone)
        if sym is None:
            continue
        facts, d = sym
        entry = {"symbol": node, "kind": d.kind, "path": facts.path, "start_line": d.start_line,
                 "end_line": d.end_line, "signature": d.signature}
        if include_body:
            entry["body"] = facts.span_text(d.start_line, d.end_line)
        out.append(entry)
    if not out:
        raise NavigationError(gone[0] if len(gone) == 1 else
                              f"every match of {name!r} changed since it was indexed: {'; '.join(gone[:3])}")
    return {"symbols": out[:limit], "truncated": len(out) > limit}


def _current_definition(files: _Files, path: str, qual: str,
                        gone: list[str]) -> tuple[FileFacts, Definition] | None:
    """The definition ``qual`` of ``path`` as the file is now; None (and the
    reason in ``gone``) when it is no longer there."""
    try:
        facts = files.get(path)
    except StaleFile as exc:
        gone.append(f"{qual}: {exc}")
        return None
    d = facts.definition(qual) if facts is not None else None
    if d is None:
        gone.append(f"{qual} is no longer defined in {path} (the file changed since it was indexed)")
        return None
    return facts, d


# What to say of a file the index saw and left out, by the reason it keeps (indexer/scan.py):
# running `memstrata index` again would not change most of these.
_SKIPPED_BECAUSE = {
    scan.UNSUPPORTED: "it is no source file of a language MemStrata parses",
    scan.TOO_LARGE: "it is over the file-size cap (memstrata index --max-file-size)",
    scan.BINARY: "it is binary",
    scan.IGNORED: "a .gitignore leaves it out",
    scan.EXCLUDED: "it is in a folder the index leaves out (dependencies, builds, caches)",
    scan.OUTSIDE: "it is a symlink to a place outside the project",
    scan.PARSE_TIMEOUT: "the parser could not finish it in time",
    scan.NAME_NOT_UTF8: "its name is not UTF-8",
    scan.NOT_A_FILE: "it is no regular file (a FIFO, socket or device)",
}


def _check_indexed(graph: GraphView, rel: str, allow_dir: bool, store) -> None:
    if rel in graph and graph.node(rel).get("type") == "file":
        return
    prefix = rel.rstrip("/") + "/"
    if allow_dir:
        if rel == "" or any(f.startswith(prefix) for f in graph.files()):
            return
    elif (first := min((f for f in graph.files() if rel == "" or f.startswith(prefix)), default=None)) is not None:
        # A folder where one file is asked for: name one of its files rather than call it unindexed.
        raise NavigationError(f"{echoed(printable(rel)) or '.'} is a folder; outline one of its indexed files "
                              f"(such as {printable(first)})")
    reason = ci.skip_reason(store, rel) if rel else None
    if reason is not None:
        why = _SKIPPED_BECAUSE.get(reason, f"it was skipped ({reason.replace('_', ' ')})")
        raise NavigationError(f"{echoed(printable(rel))} is not indexed: {why}")
    what = "file or folder" if allow_dir else "file"
    raise NavigationError(f"{echoed(printable(rel)) or '.'} is not an indexed {what} "
                          "of this project (check the path, or run memstrata index)")


def resolve_one(graph: GraphView, name: str, arg: str, ws: Workspace | None = None) -> str:
    """The one symbol ``name`` designates; an error lists the candidates when
    there are several equally good ones."""
    matches = resolve(graph, name)
    if not matches:
        raise _unknown(graph, name, ws=ws)
    best = min(m.exact for m in matches)
    top = _ranked(graph, [m for m in matches if m.exact == best])
    if len(top) == 1:
        return top[0].node
    shown = ", ".join(m.node for m in top[:10])
    more = f" and {len(top) - 10} more" if len(top) > 10 else ""
    raise NavigationError(f"{arg} {echoed(name, quoted=True)} is ambiguous: "
                          f"it names {len(top)} symbols ({shown}{more}); "
                          "pass one of them exactly")


# -- references -----------------------------------------------------------------

_DEFAULT = "default"  # the name an import of a module's default export is stored under (indexer/imports.py)


def find_references(ws: Workspace, symbol: object, max_results: object = 50) -> dict:
    name = check_name(symbol, "symbol")
    limit = clamp_results(max_results)
    with ws.lock:
        graph = ws.graph
        node = resolve_one(graph, name, "symbol", ws)
        target_path = graph.file_of(node)
        attrs = graph.node(node)
        short, qual = attrs["name"], attrs["qualname"]
        # A constructor (Java, C#, C++) is used where its class is made: `new Builder(...)` is
        # resolved to the class, whose name it spells; its imports are the class's, not its own.
        made = _class_constructed(graph, node, short, qual)
        used = made or node
        used_by = {(n.node, n.kind) for n in graph.neighbors(used, ("calls",) if made else _USE_EDGES, "in")}
        sources = {src for src, _kind in used_by}
        paths = {target_path}
        for s in sources:
            paths.add(graph.file_of(s) if "::" in s else s)
            if "::" in s and graph.node(s).get("kind") in _CLASSLIKE:
                # `impl Trait for T` with T defined elsewhere: the graph starts
                # those uses at T, but the text lives beside the impl's members.
                paths.update(graph.file_of(c.node) for c in graph.neighbors(s, ("contains",), "out"))
    files = _Files(ws)
    gone: list[str] = []
    if _current_definition(files, target_path, qual, gone) is None:
        raise NavigationError(gone[0])
    ids = code_nav.file_ids(ws.store, sorted(paths))
    rows_by_file: dict[str, list[tuple]] = defaultdict(list)
    id_path = {fid: p for p, fid in ids.items()}
    # Its own name, and whatever name the index resolved to it (`from .cells import cell_len as
    # measure`: the call is spelled `measure`).
    for fid, scope, kind, receiver, line, count, target, spelled in code_nav.file_refs(
            ws.store, list(id_path), short, used):
        rows_by_file[id_path[fid]].append((scope, spelled, kind, receiver, line, count, target))
    imports_by_file: dict[str, list[tuple]] = defaultdict(list)
    # A module's default export is imported as `default` under a name of the importer's choosing
    # (`import Foo from './foo'`): listed where that name is written, as a named import is.
    default = not made and _default_export(ws, attrs, target_path)
    # (path, module, line, the name the statement writes)
    imported = [] if made else [(p, m, ln, short) for p, m, _a, ln in code_nav.member_imports(ws.store, target_path, short)]
    if default:
        imported += [(p, m, ln, a or short) for p, m, a, ln in code_nav.member_imports(ws.store, target_path, _DEFAULT)]
    # A module that exports the symbol, imported from it, as its own default (`import { toRem }
    # from './size'` + `export default toRem`): an import of that module's default is an import
    # of the symbol under the importer's name too.
    re_defaults = set() if made else {
        p for p, rows in rows_by_file.items() if p != target_path
        and any(kind == "export" and scope is None and target == used for scope, _s, kind, _r, _l, _c, target in rows)
        and code_nav.default_export_name(ws.store, p) in {r[1] for r in rows if r[2] == "export"}}
    for p in sorted(re_defaults):
        imported += [(i, m, ln, a or short) for i, m, a, ln in code_nav.member_imports(ws.store, p, _DEFAULT)]
    for path, module, line, written in imported:
        imports_by_file[path].append((module, line, written))
    import_names = {short, _DEFAULT} if default or re_defaults else {short}

    def is_use(path: str, scope: str | None, kind: str, target: str | None) -> bool:
        if made and kind != "call":
            return False  # a type named in a declaration makes nothing
        if target is not None and target in graph:
            return target == used
        # Not resolved in the index yet (a read-only index, a file parsed a moment ago), or
        # resolved to a definition that is gone since (a process that could not write the rows
        # again): trust the graph's edge of the same kind from the same scope (a trait method's
        # `inherit` of a library trait is not its call of a namesake).
        return (f"{path}::{scope}" if scope else path, REF_EDGE.get(kind, "references")) in used_by

    refs: list[dict] = []
    for path in sorted(set(rows_by_file) | set(imports_by_file), key=lambda p: _nearest_first(p, target_path)):
        if len(refs) > limit:
            break
        try:
            facts = files.get(path)
        except StaleFile:
            continue  # the file is gone or unreadable now: none of its uses exist any more
        if facts is None:
            continue
        found: dict[tuple[int, str], str | None] = {}
        rows = rows_by_file.get(path, [])
        if facts.reread:
            kept = {(scope, spelled, kind, receiver) for scope, spelled, kind, receiver, _l, _c, target in rows
                    if is_use(path, scope, kind, target)}
            uses = [(s, n, k, r, ln, c) for s, n, k, r, ln, c in facts.refs if (s, n, k, r) in kept]
            modules = {m for m, _ln, _w in imports_by_file.get(path, [])}
            import_lines = [(ln, a or short if n == _DEFAULT else short) for m, n, a, ln in facts.imports
                            if n in import_names and m in modules]
        else:
            uses = [(s, n, k, r, ln, c) for s, n, k, r, ln, c, target in rows if is_use(path, s, k, target)]
            import_lines = [(ln, written) for _m, ln, written in imports_by_file.get(path, [])]
        for scope, spelled, kind, receiver, line, count in uses:
            for ln in use_lines(facts, scope, spelled, receiver, line, count):
                found.setdefault((ln, _REF_KIND.get(kind, "other")), f"{path}::{scope}" if scope else None)
        for ln, written in import_lines:
            ln = _name_line(facts, ln, written)
            found.setdefault((ln, "import"), _enclosing(facts, ln))
        for (ln, kind), where in sorted(found.items()):
            refs.append({"path": path, "line": ln, "symbol": where, "kind": kind,
                         "snippet": facts.line(ln).strip()[:MAX_SNIPPET_CHARS]})
    # Uses the index could not attribute are not guessed; their number tells the agent to look
    # for them by name (less those listed above on the graph's word, not yet resolved in the index).
    listed = sum(c for path, rows in rows_by_file.items() for s, n, k, _r, _l, c, target in rows
                 if target is None and n == short and is_use(path, s, k, target))
    unattributed = max(_unattributed(ws).get(short, 0) - listed, 0)
    # Listed in file and line order, whichever files were nearest enough to be read.
    kept = sorted(refs[:limit], key=lambda r: (r["path"], r["line"]))
    return {"symbol": node, "references": kept, "truncated": len(refs) > limit,
            "unattributed": unattributed}


def _nearest_first(path: str, target_path: str) -> tuple:
    """Files of uses in the order an agent wants them listed when not all fit: production code before
    tests, then the definition's own file and its nearest neighbours in the tree (its package
    before the examples and adapters elsewhere in a monorepo), then by path."""
    return scan.is_test_path(path), path != target_path, -scan.shared_dirs(path, target_path), path


def _class_constructed(graph: GraphView, node: str, short: str, qual: str) -> str | None:
    """The class ``node`` constructs when it is a constructor named as its class, else None."""
    if "." not in qual:
        return None
    owner = f"{graph.file_of(node)}::{qual.rsplit('.', 1)[0]}"
    if owner in graph and graph.node(owner).get("kind") in _CLASSLIKE and graph.node(owner)["name"] == short:
        return owner
    return None


_IMPORT_SPAN = 200  # lines an import statement may run over (`from x import (` one name a line)


def _default_export(ws: Workspace, attrs: dict, path: str) -> bool:
    """Whether the symbol is what its JavaScript/TypeScript module exports as `default`:
    declared so (`export default class Foo`, `module.exports = ...`), or named by an
    `export default foo` of its module."""
    if "." in attrs["qualname"]:
        return False
    if (attrs.get("signature") or "").startswith(("export default", "module.exports")):
        return True
    return code_nav.default_export_name(ws.store, path) == attrs["qualname"]


def _name_line(facts: FileFacts, first: int, name: str) -> int:
    """The line of an import statement starting at ``first`` that spells ``name``: a statement
    over several lines (`from .gen import (` ... `)`) is listed where the name is written."""
    word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
    for ln in range(first, min(first + _IMPORT_SPAN, len(facts.lines())) + 1):
        if word.search(facts.line(ln)):
            return ln
    return first


# Per store: (the code generation they were counted under, uses per name attributed to no
# definition).  One pass over the references per generation, kept by the long-lived processes
# (an MCP server, the daemon) between calls.
_unattributed_counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_unattributed_lock = threading.Lock()


def _unattributed(ws: Workspace) -> dict[str, int]:
    generation = ci.code_generation(ws.store)
    with _unattributed_lock:
        hit = _unattributed_counts.get(ws.store)
    if hit is not None and hit[0] == generation and generation is not None:
        return hit[1]
    counts = code_nav.unattributed_counts(ws.store)
    with _unattributed_lock:
        _unattributed_counts[ws.store] = (generation, counts)
    return counts


def use_lines(facts: FileFacts, scope: str | None, name: str, receiver: str | None,
              first: int, count: int) -> list[int]:
    """The lines of the ``count`` uses a folded reference row stands for.

    The index keeps one row per (scope, name, kind, receiver) with the first
    line and a count; the other uses are found by spelling inside the same
    scope, leaving out the definitions nested in it (their uses are rows of
    their own).  A use the spelling misses (a line continuation between
    receiver and name) is not reported rather than guessed.
    """
    if count <= 1:
        return [first]
    region, nested = _scope_region(facts, scope)
    pattern = _use_pattern(name, receiver)
    comment = comment_prefix(facts.language or "")
    out: list[int] = []
    seen = 0
    last = region[1] if region else len(facts.lines())
    for ln in range(first, last + 1):
        if any(a <= ln <= b for a, b in nested):
            continue
        text = facts.line(ln)
        if ln != first and text.lstrip().startswith(comment):
            continue  # `# apply _reduce to ...`: the name in a comment is no use
        hits = len(pattern.findall(_without_strings(text, facts.language or "")))
        if hits or ln == first:
            out.append(ln)
            seen += max(hits, 1)
            if seen >= count:
                break
    return out


# A string literal that opens and closes on one line, with its prefix letters if any; single
# quotes too where they delimit strings or characters (in Rust a lone quote starts a lifetime).
_LITERAL = r"""(\b[A-Za-z]{1,2})?(%s)(?:\\.|(?!\2).)*\2"""
_QUOTED = re.compile(_LITERAL % "\"|'")
_DOUBLE_QUOTED = re.compile(_LITERAL % '"')


def _blank_literal(match: re.Match) -> str:
    prefix = match.group(1) or ""
    if "f" in prefix.lower():
        return match.group()  # an f-string's braces hold code: its uses count
    return prefix + " " * (len(match.group()) - len(prefix))


def _without_strings(text: str, language: str) -> str:
    """``text`` with its one-line string literals blanked: a function's name in a message
    (`fail("parse_header failed")`) is no use of it."""
    if '"' not in text and ("'" not in text or language == "rust"):
        return text
    return (_DOUBLE_QUOTED if language == "rust" else _QUOTED).sub(_blank_literal, text)


def _scope_region(facts: FileFacts, scope: str | None) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    if scope is None:
        return None, [(d.start_line, d.end_line) for d in facts.definitions]
    d = facts.definition(scope)
    if d is None:
        return None, []
    prefix = scope + "."
    nested = [(n.start_line, n.end_line) for n in facts.definitions
              if n.qualname.startswith(prefix) and (n.start_line, n.end_line) != (d.start_line, d.end_line)]
    return (d.start_line, d.end_line), nested


_PATTERNS: dict[tuple[str, str | None], re.Pattern] = {}


def _use_pattern(name: str, receiver: str | None) -> re.Pattern:
    key = (name, receiver)
    p = _PATTERNS.get(key)
    if p is None:
        word = re.escape(name) + r"(?![\w$])"
        if receiver:
            p = re.compile(re.escape(receiver) + r"\s*(?:\.|::|->|#|\?\.)\s*" + word)
        else:
            p = re.compile(r"(?<![\w$.>:])" + word)
        if len(_PATTERNS) > 10_000:
            _PATTERNS.clear()
        _PATTERNS[key] = p
    return p


def _enclosing(facts: FileFacts, line: int) -> str | None:
    best: Definition | None = None
    for d in facts.definitions:
        if d.start_line <= line <= d.end_line and (best is None or d.end_line - d.start_line < best.end_line - best.start_line):
            best = d
    return f"{facts.path}::{best.qualname}" if best else None


# -- outline ----------------------------------------------------------------------

def file_outline(ws: Workspace, path: object, depth: object = 2) -> dict:
    rel = project_path(ws.root, path)
    depth = check_int(depth, "depth")
    if depth < 1:
        raise NavigationError(f"depth must be at least 1 (1: top-level definitions only), got {echoed(str(depth))}")
    try:
        facts = _Files(ws).get(rel)
    except StaleFile as exc:
        raise NavigationError(str(exc)) from None
    if facts is None:
        with ws.lock:
            graph = ws.graph
        _check_indexed(graph, rel, allow_dir=False, store=ws.store)
        raise NavigationError(f"{echoed(printable(rel))} is not an indexed file of this project")
    # Nesting follows the text: a definition sits inside the innermost one
    # whose lines hold it.  A method defined apart from its type (a Rust
    # impl block, `Foo.prototype.m = ...`, a C++ out-of-line member) stays
    # where it is written, so the outline reads in source order.
    seen: set[str] = set()
    roots: list[dict] = []
    deeper = 0  # definitions nested below ``depth``: counted, so the reader knows to look
    open_: list[tuple[dict, int]] = []  # enclosing entries with their level, outermost first
    for d in sorted(facts.definitions, key=lambda d: (d.start_line, -d.end_line)):
        if d.qualname in seen:
            continue
        seen.add(d.qualname)
        while open_ and open_[-1][0]["end_line"] < d.end_line:
            open_.pop()
        level = open_[-1][1] + 1 if open_ else 1
        entry = {"symbol": f"{rel}::{d.qualname}", "kind": d.kind, "start_line": d.start_line,
                 "end_line": d.end_line, "signature": d.signature, "children": []}
        if level <= depth:
            (open_[-1][0]["children"] if open_ else roots).append(entry)
        else:
            deeper += 1
        open_.append((entry, level))
    return {"path": rel, "language": facts.language, "symbols": roots, "deeper": deeper}


__all__ = ["NavigationError", "find_symbol", "find_references", "file_outline", "MAX_RESULTS_LIMIT"]
