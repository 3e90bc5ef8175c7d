"""Retrieval quality of ``context_query`` against naive RAG, on real git history (issues 3 and 10).

Cases come from each repository's own history.  A commit qualifies when it
is not a merge, modifies (no adds, deletes, renames, binary diffs) 1-3
non-test source files in a supported language, and at least one changed
line lies inside a function/class that exists at the parent commit.  Other
files (tests, docs, changelog) may change too.  Inline test code (a Rust
``#[cfg(test)] mod tests``) counts as tests: it is never gold, and a file
changed only there is not a gold file.  For a case:

* query = the commit message (subject + body) without trailers such as
  ``Signed-off-by:`` / ``Co-authored-by:`` (PR numbers like "(#1234)" stay);
  messages with fewer than ``--min-query-words`` content words ("Fix typo",
  "Tweaks", "spelling") are skipped and counted: nothing to retrieve by;
* gold files = the changed source files;
* gold symbols = the innermost function/method/class enclosing each changed
  line, taken from the index of the parent commit.

The parent is checked out into one scratch clone per repository (outside
the repository, under ``--scratch``), indexed incrementally (each case moves
the same checkout to the next parent, so only changed files are re-parsed),
then ``context_query`` and the naive-RAG arm (:mod:`compressor.baseline`)
run at the same ``--max-tokens``.  Commits are taken newest first, so the
selection is deterministic for a given repository HEAD.

Measured per case and averaged over cases (every case weighs the same):

* file recall: share of gold files in ``sources``;
* symbol recall: share of gold symbols whose definition line is in the
  slice -- for ``context_query`` the symbol (or an enclosing symbol shown in
  full, one whose lines contain the symbol's: a Go method's receiver type
  does not) is among the rendered symbols, or its signature line is in its
  file's section as the header that frames a member shown under it (a
  class's line above its method), for naive RAG a packed chunk spans the
  line of the symbol's signature;
* body recall: share of gold symbols shown whole, i.e. at least 90 % of the
  symbol's non-blank lines (its text at the parent commit, lines
  start..end) are in the slice.  Measured on the text, the same way for
  both arms and whatever the rendering: for ``context_query`` the slice is
  cut into its per-file sections (header line "# path" / "// path") and the
  symbol's lines (rstripped) are matched in order against the lines of its
  own file's section (longest in-order subsequence, never across files);
  for naive RAG a line counts when a packed chunk's span covers it;
* tokens, ``baseline_tokens`` (whole text of the files in ``sources``) and
  their per-case ratio;
* p50/p95 latency of the ``context_query`` call alone (the graph is warm;
  the name-index rebuild after each incremental update is included).

Development half and check half: ``--repos`` is the development half (the
repositories the code is tuned on), ``--check-repos`` the check half (held
out).  Each half gets its own table (per repository, per language, overall);
then a line per figure compares the halves and flags ``FITTED`` where the
development half's cq figure is more than 0.05 above the check half's, and
the check half's targets are printed (body recall >= 0.60 overall and >=
0.45 on every repository, symbol recall >= 0.82, file recall >= 0.92 on
Python and >= 0.90 on other repositories, the BM25 arm ahead nowhere).

Plain-English questions (``--english-per-repo N``, default 20, 0 = off):
after the commit cases each repository's HEAD is indexed and up to N
documented, non-test, non-private functions/methods of at least 5 lines are
picked (ordered by a hash of their id, so the pick is deterministic).  The
question is made from the first docstring/doc-comment line only (>= 5
words): "how does the code <that line, lower-cased, without trailing
period>?", any word naming the function dropped.  Gold = that function and
its file; scored like the commit cases and reported apart, per half.

``--latency-index PATH`` also times ``context_query`` on a large existing
index (read-only), e.g. the sympy wheel indexed by bench/index_speed.py,
with queries made from its docstrings' first lines, "<Symbol> and its
callers", and (``--latency-repo``) real commit messages of a repository.
It then times one-shot ``memstrata query`` processes on that project (wall
clock, start-up to exit, like a shell user or a script): the first one, which
builds and saves the graph snapshot when none matches the index, apart from
the rest.  Those processes may save the snapshot and whole-file token counts
into the index folder, as any reader of a writable index does.

Printed per repository, with a GUARD line for any repository where
context_query is below the BM25 arm on file, symbol or body recall, the share
of slices under half the budget, and issue 10's targets (on ``--repos``)
next to their figures.  A large repository's run is bounded with
``--limit NAME=CASES[/SCAN]`` (either half).

Example (CORPORA holds the clones; see docs/benchmarks.md for the commands)::

    python bench/quality.py --repos CORPORA/repos/{click,starlette,rich,attrs,eslint,ky,cobra,tokio} \\
        --check-repos CORPORA/repos/{marshmallow,jinja,koa,mocha,hono,vue-core,echo,viper,axum,tracing} \\
        --json /tmp/quality.json

    python bench/quality.py --repos CORPORA/repos/{click,starlette,rich,attrs,ky,cobra,sympy,twisted,tokio,eslint} \\
        --limit sympy=40/2000 --latency-index CORPORA/sympy_wheel --latency-repo CORPORA/repos/sympy \\
        --json /tmp/quality.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memstrata.compressor import context_query
from memstrata.compressor.baseline import STOPWORDS, chunk_index, naive_rag
from memstrata.indexer.graph import SYMBOL
from memstrata.indexer.languages import language_for_path
from memstrata.indexer.project import INDEX_FILE
from memstrata.indexer.scan import is_test_path
from memstrata.indexer.workspace import Workspace
from memstrata.storage import Store
from memstrata.storage import code_index as ci

GOLD_KINDS = frozenset({"function", "method", "class", "interface", "struct", "enum", "type"})
MAX_SOURCE_FILES = 3
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_TRAILER = re.compile(
    r"^\s*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|suggested-by|"
    r"helped-by|cc|change-id|[a-z]+(-[a-z]+)*-by)\s*:",
    re.I,
)
_WS = re.compile(r"\s+")
_CONTENT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")
_PR_REF = re.compile(r"\(#\d+\)|#\d+")
BODY_SHARE = 0.9  # a gold symbol is shown whole when this share of its non-blank lines is in the slice
FITTED_GAP = 0.05  # development half above the check half by more than this: flagged FITTED
# Rows per language: a repository's language is the majority language of its gold files.
LANGUAGE_ROWS = (("Python", ("python",)), ("JS", ("javascript",)), ("TS", ("typescript", "tsx")),
                 ("Go", ("go",)), ("Rust", ("rust",)))
RECALLS = (("file recall", "file_recall"), ("symbol recall", "symbol_recall"), ("body recall", "body_recall"))


# -- data ---------------------------------------------------------------------


@dataclass
class GoldSymbol:
    node: str  # "path::qualname" at the parent commit
    kind: str
    start: int
    end: int
    def_line: int  # the line carrying the signature (after decorators)
    body_lines: int = 0  # non-blank lines in start..end


@dataclass
class Case:
    repo: str
    sha: str
    parent: str
    query: str
    files: list[str]
    symbols: list[GoldSymbol]
    source: str = "commit"  # "commit" (message of a commit) or "english" (docstring question at HEAD)


@dataclass
class ArmResult:
    file_recall: float
    symbol_recall: float
    tokens: int
    baseline_tokens: int
    latency_ms: float
    sources: list[str]
    hits: list[str] = field(default_factory=list)  # gold symbols found
    shown: list[str] = field(default_factory=list)  # cq: symbols; rag: "path:a-b" spans
    full: list[str] = field(default_factory=list)  # cq: symbols shown in full
    body_recall: float = 0.0  # share of gold symbols with >= BODY_SHARE of their non-blank lines in the slice
    body_hits: list[str] = field(default_factory=list)
    body_cover: dict[str, float] = field(default_factory=dict)  # gold symbol -> share of its lines shown


@dataclass
class CaseResult:
    case: Case
    cq: ArmResult
    rag: ArmResult


@dataclass
class RepoRun:
    name: str
    head: str
    results: list[CaseResult] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    scanned: int = 0
    source_lines: int = 0  # non-test source lines indexed at the last case
    language: str = ""  # the language most gold files are in
    half: str = "development"  # or "check"
    english: list[CaseResult] = field(default_factory=list)  # plain-English questions at HEAD
    english_skipped: dict[str, int] = field(default_factory=dict)
    english_pool: int = 0  # functions that qualified before the pick
    english_named: int = 0  # picked questions still holding a part of the function's name

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def skip_english(self, reason: str) -> None:
        self.english_skipped[reason] = self.english_skipped.get(reason, 0) + 1


# -- git ------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, check=True)
    return out.stdout.decode("utf-8", errors="replace")


_UNREADABLE = re.compile(r"unable to read sha1 file of (.+?) \([0-9a-f]{40}\)")


def checkout(clone: Path, rev: str) -> None:
    """Check ``rev`` out in a scratch clone.  A clone of a partial snapshot
    may lack some blobs (large binaries); their paths are left out of the work
    tree (a sparse checkout) and the checkout is tried again."""
    missing: list[str] = []
    for _ in range(5):
        try:
            git(clone, "checkout", "--quiet", "--force", "--detach", rev)
            return
        except subprocess.CalledProcessError as exc:
            found = [m for m in _UNREADABLE.findall(exc.stderr.decode("utf-8", "replace")) if m not in missing]
            if not found:
                raise
            missing += found
            git(clone, "sparse-checkout", "set", "--no-cone", "/*", *(f"!/{m}" for m in missing))
    git(clone, "checkout", "--quiet", "--force", "--detach", rev)


def commit_message(repo: Path, sha: str) -> str:
    lines = git(repo, "log", "-1", "--format=%B", sha).splitlines()
    kept = [ln for ln in lines if not _TRAILER.match(ln)]
    return _WS.sub(" ", " ".join(kept)).strip()


def content_words(message: str) -> int:
    """Words that could steer retrieval: no stop words, no PR numbers."""
    return sum(1 for w in _CONTENT_WORD.findall(_PR_REF.sub(" ", message)) if w.lower() not in STOPWORDS)


def source_changes(repo: Path, parent: str, sha: str) -> tuple[list[str] | None, str | None]:
    """The modified non-test source files, or (None, skip reason)."""
    sources: list[str] = []
    try:
        # Rename detection reads the blobs; a clone made from a partial
        # snapshot can lack some (large binaries), and then the commit is skipped.
        status_lines = git(repo, "diff-tree", "-r", "-M", "--no-commit-id", "--name-status", parent, sha).splitlines()
    except subprocess.CalledProcessError:
        return None, "objects_missing"
    for line in status_lines:
        parts = line.split("\t")
        status, paths = parts[0], parts[1:]
        if not any(language_for_path(p) and not is_test_path(p) for p in paths):
            continue
        if status != "M":
            return None, "source_added_deleted_or_renamed"
        sources.append(paths[0])
    if not sources:
        return None, "no_source_change"
    if len(sources) > MAX_SOURCE_FILES:
        return None, "more_than_3_source_files"
    for line in git(repo, "diff-tree", "-r", "--no-commit-id", "--numstat", parent, sha, "--", *sources).splitlines():
        if line.startswith("-\t-\t"):
            return None, "binary_diff"
    return sources, None


def changed_old_lines(repo: Path, parent: str, sha: str, paths: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Per file, the parent-side ranges touched: (first, count); count 0 = insertion after `first`."""
    out: dict[str, list[tuple[int, int]]] = {p: [] for p in paths}
    current: str | None = None
    diff = git(repo, "diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames", parent, sha, "--", *paths)
    for line in diff.splitlines():
        if line.startswith("--- "):
            name = line[4:]
            current = name[2:] if name.startswith("a/") else None
        elif line.startswith("@@") and current in out:
            m = _HUNK.match(line)
            if m:
                out[current].append((int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)))
    return out


# -- gold -------------------------------------------------------------------------


def definition_line(lines: list[str], start: int, end: int, signature: str) -> int:
    head = _WS.sub("", signature)[:12]
    if head:
        for i in range(start, min(end, start + 30) + 1):
            if i - 1 < len(lines) and head in _WS.sub("", lines[i - 1]):
                return i
    return start


def gold_symbols(ws: Workspace, ranges: dict[str, list[tuple[int, int]]]) -> list[GoldSymbol]:
    graph = ws.graph
    gold: dict[str, GoldSymbol] = {}
    for path, hunks in ranges.items():
        spans = []
        for node in graph.symbols_in_file(path):
            d = graph.node(node)
            # Inline test code (a Rust `mod tests`) is left out of a slice like a test file is.
            if d["kind"] in GOLD_KINDS and not graph.is_test_node(node):
                spans.append((d["start_line"], d["end_line"], node, d))
        if not spans:
            continue
        lines = (ci.file_text(ws.store, path) or "").split("\n")

        def innermost(line: int, insertion: bool):
            best = None
            for start, end, node, d in spans:
                inside = start <= line < end if insertion else start <= line <= end
                if inside and (best is None or end - start < best[1] - best[0]):
                    best = (start, end, node, d)
            return best

        for first, count in hunks:
            probes = [(first, True)] if count == 0 else [(ln, False) for ln in range(first, first + count)]
            for line, insertion in probes:
                hit = innermost(line, insertion)
                if hit and hit[2] not in gold:
                    start, end, node, d = hit
                    gold[node] = GoldSymbol(node, d["kind"], start, end,
                                            definition_line(lines, start, end, d.get("signature") or ""),
                                            len(body_lines(lines, start, end)))
    return list(gold.values())


def only_inline_tests(graph, path: str, hunks: list[tuple[int, int]]) -> bool:
    """Whether every line a commit touched in ``path`` is inline test code (a Rust
    `mod tests`): such a file is a test file for this change, as a test path is."""
    spans = [(graph.node(n)["start_line"], graph.node(n)["end_line"])
             for n in graph.symbols_in_file(path) if graph.is_test_node(n)]
    if not spans or not hunks:
        return False
    lines = [ln for first, count in hunks for ln in ([first] if count == 0 else range(first, first + count))]
    return all(any(a <= ln <= b for a, b in spans) for ln in lines)


def body_lines(lines: list[str], start: int, end: int) -> list[str]:
    """The non-blank lines of ``start..end`` (1-based, inclusive), rstripped."""
    return [ln.rstrip() for ln in lines[start - 1 : end] if ln.strip()]


# -- scoring ---------------------------------------------------------------------


def _ancestors(node: str) -> list[str]:
    path, _, qual = node.partition("::")
    parts = qual.split(".")
    return [f"{path}::{'.'.join(parts[:i])}" for i in range(len(parts) - 1, 0, -1)]


def slice_sections(context: str, sources: list[str]) -> dict[str, list[str]]:
    """The lines (rstripped) of each file's section of a ``context_query`` slice.

    A section starts with its header, "<comment prefix> <path>" (``#`` for
    Python/Ruby, ``//`` otherwise, see compressor/render.py), as the first
    line of the slice or after the blank line that joins sections; the
    header itself is not part of the section.  Gap and elision markers stay:
    they match no code line.
    """
    headers = {f"{c} {p}": p for p in sources for c in ("#", "//")}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    lines = context.split("\n")
    for i, line in enumerate(lines):
        path = headers.get(line.rstrip())
        if path is not None and (i == 0 or not lines[i - 1].strip()):
            current = sections.setdefault(path, [])
            continue
        if current is not None:
            current.append(line.rstrip())
    return sections


def in_order_matches(wanted: list[str], shown: list[str]) -> int:
    """How many of ``wanted`` appear in ``shown`` in the same order: the
    length of their longest common subsequence (bit-parallel, Hyyroe 2004)."""
    m = len(wanted)
    if not m or not shown:
        return 0
    masks: dict[str, int] = {}
    for i, line in enumerate(wanted):
        masks[line] = masks.get(line, 0) | (1 << i)
    full = (1 << m) - 1
    v = full
    for line in shown:
        u = v & masks.get(line, 0)
        if u:
            v = ((v + u) | (v - u)) & full
    return m - v.bit_count()


def _body_score(case: Case, cover) -> tuple[float, list[str], dict[str, float]]:
    """Body recall of one arm: ``cover(gold)`` gives the share of the gold
    symbol's non-blank lines that the arm's slice holds."""
    shares: dict[str, float] = {}
    for g in case.symbols:
        shares[g.node] = cover(g)
    hits = [n for n, share in shares.items() if share >= BODY_SHARE]
    return len(hits) / len(case.symbols), hits, shares


def enclosing(graph, g: GoldSymbol) -> list[str]:
    """The symbols named as ``g``'s ancestors whose lines contain ``g``'s: a Go
    method ``T.m`` is named under its receiver type ``T``, but the type's
    declaration does not hold the method's code."""
    out = []
    for a in _ancestors(g.node):
        if a in graph:
            d = graph.node(a)
            if d["start_line"] <= g.start and g.end <= d["end_line"]:
                out.append(a)
    return out


def score_cq(case: Case, sl, latency_ms: float, texts: dict[str, list[str]],
             ancestors: dict[str, list[str]] | None = None) -> ArmResult:
    """``ancestors``: gold symbol -> the enclosing symbols whose being shown
    in full shows it (default: every symbol its name is nested under)."""
    shown, full = set(sl.symbols), set(sl.full_symbols)
    up = ancestors or {}
    sections = slice_sections(sl.context, list(sl.sources))

    def framed(g: GoldSymbol) -> bool:
        # A member shown without its class is rendered under the class's own signature line (the
        # frame header): the symbol's line is in the slice, which is what this figure counts, and
        # what the BM25 arm is credited with when a chunk spans that line.
        path = g.node.partition("::")[0]
        if not any(s.startswith(g.node + ".") for s in shown):
            return False
        line = texts[path][g.def_line - 1].rstrip() if 0 < g.def_line <= len(texts[path]) else ""
        return bool(line.strip()) and line in sections.get(path, ())

    hits = [g.node for g in case.symbols
            if g.node in shown or any(a in full for a in up.get(g.node, _ancestors(g.node)))
            or framed(g)]

    def cover(g: GoldSymbol) -> float:
        path = g.node.partition("::")[0]
        wanted = body_lines(texts[path], g.start, g.end)
        return in_order_matches(wanted, sections.get(path, [])) / len(wanted) if wanted else 0.0

    body, body_hits, shares = _body_score(case, cover)
    return ArmResult(
        file_recall=sum(f in sl.sources for f in case.files) / len(case.files),
        symbol_recall=len(hits) / len(case.symbols),
        tokens=sl.tokens, baseline_tokens=sl.baseline_tokens, latency_ms=latency_ms,
        sources=list(sl.sources), hits=hits, shown=list(sl.symbols), full=list(sl.full_symbols),
        body_recall=body, body_hits=body_hits, body_cover=shares,
    )


def score_rag(case: Case, r, latency_ms: float, texts: dict[str, list[str]]) -> ArmResult:
    hits = []
    for g in case.symbols:
        path = g.node.partition("::")[0]
        if any(p == path and a <= g.def_line <= b for p, a, b in r.spans):
            hits.append(g.node)

    def cover(g: GoldSymbol) -> float:
        path = g.node.partition("::")[0]
        spans = [(a, b) for p, a, b in r.spans if p == path]
        lines = texts[path]
        wanted = [i for i in range(g.start, min(g.end, len(lines)) + 1) if lines[i - 1].strip()]
        covered = sum(1 for i in wanted if any(a <= i <= b for a, b in spans))
        return covered / len(wanted) if wanted else 0.0

    body, body_hits, shares = _body_score(case, cover)
    return ArmResult(
        file_recall=sum(f in r.sources for f in case.files) / len(case.files),
        symbol_recall=len(hits) / len(case.symbols),
        tokens=r.tokens, baseline_tokens=r.baseline_tokens, latency_ms=latency_ms,
        sources=list(r.sources), hits=hits, shown=[f"{p}:{a}-{b}" for p, a, b in r.spans],
        body_recall=body, body_hits=body_hits, body_cover=shares,
    )


def answer(ws: Workspace, case: Case, args) -> CaseResult:
    """Both arms on one case, at ``args.max_tokens``, scored."""
    t0 = time.perf_counter()
    sl = context_query(ws, case.query, max_tokens=args.max_tokens)
    cq_ms = (time.perf_counter() - t0) * 1000
    chunk_index(ws.store)  # built outside the timing, as a long-lived server would hold it
    t0 = time.perf_counter()
    rag = naive_rag(ws, case.query, max_tokens=args.max_tokens)
    rag_ms = (time.perf_counter() - t0) * 1000
    # The texts the index holds, i.e. those both arms were built from.
    texts = {p: (ci.file_text(ws.store, p) or "").split("\n")
             for p in dict.fromkeys(g.node.partition("::")[0] for g in case.symbols)}
    ancestors = {g.node: enclosing(ws.graph, g) for g in case.symbols}
    return CaseResult(case, score_cq(case, sl, cq_ms, texts, ancestors), score_rag(case, rag, rag_ms, texts))


# -- plain-English questions ---------------------------------------------------------

ENGLISH_KINDS = ("function", "method")
ENGLISH_MIN_WORDS = 5  # on the docstring's first line
ENGLISH_MIN_LINES = 5
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NAME_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# First lines that are no description: licence headers, linter pragmas, doc tags.
_NOT_A_DESCRIPTION = re.compile(r"copyright|licen[cs]e|spdx|eslint|istanbul|prettier|@ts-|nolint|noinspection|"
                                r"^\s*[@:]|^\s*(todo|fixme|xxx)\b", re.IGNORECASE)


_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]`'\"])\.\s+(?=[A-Z])")


def first_doc_line(doc: str | None) -> str:
    return next((ln.strip() for ln in (doc or "").splitlines() if ln.strip()), "")


def name_parts(name: str) -> set[str]:
    """The identifier parts of a name (snake_case and CamelCase split), lower-cased, 3+ letters."""
    return {p.lower() for p in _NAME_PART.findall(name) if len(p) >= 3}


def english_question(first_line: str, name: str) -> str | None:
    """The question for a function, from its first docstring line only:
    "how does the code <line>?", lower-cased, cut after its first sentence
    (a wrapped docstring's first line may run into the next one), trailing
    period dropped, any word naming the function (``name``, ``name()``,
    ``Cls.name``, `name`; case-insensitive) dropped.  None when fewer than 3
    words are left."""
    low = name.lower()
    sentence = _SENTENCE_END.split(first_line, maxsplit=1)[0]
    words = [w for w in sentence.split() if not any(t.lower() == low for t in _IDENT.findall(w))]
    text = " ".join(words).lower().rstrip(" .:;,")
    if len(text.split()) < 3:
        return None
    return f"how does the code {text}?"


def english_cases(ws: Workspace, run: RepoRun, n: int) -> list[Case]:
    """Up to ``n`` questions made from documented functions at the indexed HEAD."""
    graph = ws.graph
    pool: list[tuple[str, str, str, dict]] = []
    for node in graph.nodes():
        d = graph.node(node)
        if d.get("type") != SYMBOL or d["kind"] not in ENGLISH_KINDS:
            continue
        path, qual = d["path"], d["qualname"]
        if graph.is_test_node(node) or is_test_path(path) or any(p in ("test", "tests") for p in qual.split(".")):
            run.skip_english("test")
            continue
        if any(part.startswith(("_", "#")) for part in qual.split(".")):
            run.skip_english("private_or_dunder")
            continue
        if d["end_line"] - d["start_line"] + 1 < ENGLISH_MIN_LINES:
            run.skip_english(f"under_{ENGLISH_MIN_LINES}_lines")
            continue
        first = first_doc_line(d.get("doc"))
        if len(first.split()) < ENGLISH_MIN_WORDS:
            run.skip_english(f"no_doc_line_of_{ENGLISH_MIN_WORDS}_words")
            continue
        if _NOT_A_DESCRIPTION.search(first):
            run.skip_english("doc_line_not_a_description")
            continue
        question = english_question(first, d["name"])
        if question is None:
            run.skip_english("doc_line_mostly_the_name")
            continue
        pool.append((hashlib.sha1(node.encode()).hexdigest(), node, question, d))
    pool.sort()
    run.english_pool = len(pool)
    cases = []
    texts: dict[str, list[str]] = {}
    for _h, node, question, d in pool[:n]:
        path = d["path"]
        if path not in texts:
            texts[path] = (ci.file_text(ws.store, path) or "").split("\n")
        lines = texts[path]
        start, end = d["start_line"], d["end_line"]
        gold = GoldSymbol(node, d["kind"], start, end, definition_line(lines, start, end, d.get("signature") or ""),
                          len(body_lines(lines, start, end)))
        if set(_IDENT.findall(question)) & name_parts(d["name"]):
            run.english_named += 1
        cases.append(Case(run.name, run.head, run.head, question, [path], [gold], source="english"))
    return cases


# -- one repository ----------------------------------------------------------------


def prepare_checkout(repo: Path, name: str, scratch: Path, fresh: bool) -> Path:
    dest = scratch / name
    if fresh and dest.exists():
        shutil.rmtree(dest)
    if not (dest / ".git").exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        # --shared borrows the objects: cheap, and the corpus repository is never written.
        subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(dest)], check=True)
    return dest


def run_repo(repo: Path, args, log, half: str = "development") -> RepoRun:
    name = repo.name  # as given: the corpus folder may be a symlink to a mirror named otherwise
    repo = repo.resolve()
    head = git(repo, "rev-parse", "HEAD").strip()
    run = RepoRun(name, head, half=half)
    clone = prepare_checkout(repo, name, Path(args.scratch), args.fresh)
    ws: Workspace | None = None
    max_cases, max_scan = repo_limits(name, args)
    try:
        for line in git(repo, "rev-list", "--parents", f"--max-count={max_scan}", head).splitlines():
            if len(run.results) >= max_cases:
                break
            sha, *parents = line.split()
            run.scanned += 1
            if len(parents) != 1:
                run.skip("merge" if parents else "root_commit")
                continue
            parent = parents[0]
            files, reason = source_changes(repo, parent, sha)
            if files is None:
                run.skip(reason)
                continue
            query = commit_message(repo, sha)
            if content_words(query) < args.min_query_words:
                run.skip("message_too_short")  # "Fix typo", "Tweaks": nothing to retrieve by
                continue
            try:
                checkout(clone, parent)
                if ws is None:
                    ws = Workspace.open(clone)
                ws.index()
                graph = ws.graph  # refreshed here, so the timed call below is the query alone
            except Exception as exc:  # noqa: BLE001 - any failure to index skips the case
                log(f"  {sha[:10]}: parent failed to index: {type(exc).__name__}: {exc}")
                run.skip("parent_index_failed")
                continue
            if any(f not in graph for f in files):
                run.skip("source_not_indexed")
                continue
            ranges = changed_old_lines(repo, parent, sha, files)
            files = [f for f in files if not only_inline_tests(graph, f, ranges[f])]
            symbols = gold_symbols(ws, {f: ranges[f] for f in files})
            if not files:
                run.skip("no_source_change")
                continue
            if not symbols:
                run.skip("no_enclosing_symbol")
                continue
            if len(symbols) > args.max_gold_symbols:
                run.skip(f"more_than_{args.max_gold_symbols}_gold_symbols")
                continue
            case = Case(name, sha, parent, query, files, symbols)
            try:
                res = answer(ws, case, args)
            except Exception as exc:  # noqa: BLE001 - reported, never hidden
                log(f"  {sha[:10]}: query failed: {type(exc).__name__}: {exc}")
                run.skip("query_failed")
                continue
            run.results.append(res)
            if args.verbose:
                log(f"  {sha[:10]} files={len(files)} gold={len(symbols)} "
                    f"cq sym={res.cq.symbol_recall:.2f} file={res.cq.file_recall:.2f} body={res.cq.body_recall:.2f} | "
                    f"rag sym={res.rag.symbol_recall:.2f} file={res.rag.file_recall:.2f} "
                    f"body={res.rag.body_recall:.2f} | {res.cq.latency_ms:.0f} ms")
        if ws is not None:
            run.source_lines = source_lines(ws)
        if args.english_per_repo > 0:
            ws = run_english(run, clone, ws, args, log)
    finally:
        if ws is not None:
            ws.close()
    langs = [language_for_path(f) or "" for r in (run.results or run.english) for f in r.case.files]
    run.language = max(sorted(set(langs)), key=langs.count) if langs else ""
    return run


def run_english(run: RepoRun, clone: Path, ws: Workspace | None, args, log) -> Workspace | None:
    """The plain-English questions of one repository, at its HEAD."""
    try:
        checkout(clone, run.head)
        if ws is None:
            ws = Workspace.open(clone)
        ws.index()
        ws.graph  # noqa: B018 - refreshed here, outside the timed calls
    except Exception as exc:  # noqa: BLE001
        log(f"  HEAD {run.head[:10]} failed to index: {type(exc).__name__}: {exc}")
        run.skip_english("head_index_failed")
        return ws
    for case in english_cases(ws, run, args.english_per_repo):
        try:
            res = answer(ws, case, args)
        except Exception as exc:  # noqa: BLE001 - reported, never hidden
            log(f"  english {case.symbols[0].node}: query failed: {type(exc).__name__}: {exc}")
            run.skip_english("query_failed")
            continue
        run.english.append(res)
        if args.verbose:
            log(f"  english {case.symbols[0].node}: cq file={res.cq.file_recall:.0f} sym={res.cq.symbol_recall:.0f} "
                f"body={res.cq.body_recall:.0f} | rag file={res.rag.file_recall:.0f} sym={res.rag.symbol_recall:.0f} "
                f"body={res.rag.body_recall:.0f} | {case.query[:90]}")
    return ws


def repo_limits(name: str, args) -> tuple[int, int]:
    """(cases, commits scanned) for one repository: ``--limit NAME=CASES[/SCAN]`` over the defaults."""
    cases, scan = args.cases_per_repo, args.max_scan
    for spec in args.limit:
        key, _, value = spec.partition("=")
        if key == name:
            c, _, sc = value.partition("/")
            cases = int(c) if c else cases
            scan = int(sc) if sc else scan
    return cases, scan


def source_lines(ws: Workspace) -> int:
    return sum(lines for _p, _lang, is_test, lines, _st in ci.load_files(ws.store) if not is_test)


# -- reporting -------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def summarize(results: list[CaseResult], budget: int) -> dict:
    def arm(get) -> dict:
        rs = [get(r) for r in results]
        lat = [a.latency_ms for a in rs]
        return {
            "file_recall": mean(a.file_recall for a in rs),
            "symbol_recall": mean(a.symbol_recall for a in rs),
            "symbol_recall_micro": (sum(len(a.hits) for a in rs) / max(1, sum(len(r.case.symbols) for r in results))),
            "body_recall": mean(a.body_recall for a in rs),
            "body_recall_micro": (sum(len(a.body_hits) for a in rs) / max(1, sum(len(r.case.symbols) for r in results))),
            "tokens": mean(a.tokens for a in rs),
            "baseline_tokens": mean(a.baseline_tokens for a in rs),
            "tokens_over_baseline": mean(a.tokens / a.baseline_tokens for a in rs if a.baseline_tokens),
            "p50_ms": pct(lat, 50),
            "p95_ms": pct(lat, 95),
            "under_half_budget": mean(1.0 if a.tokens < budget / 2 else 0.0 for a in rs),
        }

    cq, rag = arm(lambda r: r.cq), arm(lambda r: r.rag)
    return {
        "cases": len(results),
        "gold_files": mean(len(r.case.files) for r in results),
        "gold_symbols": mean(len(r.case.symbols) for r in results),
        "context_query": cq,
        "naive_rag": rag,
        "symbol_recall_vs_naive": cq["symbol_recall"] / rag["symbol_recall"] if rag["symbol_recall"] else float("inf"),
    }


def code_state() -> str:
    """Which MemStrata code measured: HEAD plus any uncommitted layer files."""
    here = Path(__file__).resolve().parents[1]
    try:
        head = git(here, "rev-parse", "--short", "HEAD").strip()
        dirty = [ln[3:] for ln in git(here, "status", "--porcelain", "--", "compressor", "indexer", "storage").splitlines()]
    except (subprocess.CalledProcessError, OSError):
        return "unknown"
    return head + (f" + uncommitted {', '.join(dirty)}" if dirty else "")


def language_label(language: str) -> str | None:
    return next((label for label, langs in LANGUAGE_ROWS if language in langs), None)


def commit_cases(run: RepoRun) -> list[CaseResult]:
    return run.results


def english_results(run: RepoRun) -> list[CaseResult]:
    return run.english


WIDTH = 153


def print_header(args, out) -> None:
    print(f"\nRetrieval quality at max_tokens={args.max_tokens} (cq = context_query, rag = naive BM25 over "
          f"40-line chunks)", file=out)
    print(f"memstrata code: {code_state()}; cases per repo <= {args.cases_per_repo}, "
          f"min query words {args.min_query_words}, max gold symbols {args.max_gold_symbols}, "
          f"English questions per repo <= {args.english_per_repo}; body = >= {BODY_SHARE:.0%} of a gold "
          f"symbol's non-blank lines in the slice", file=out)


def print_table(title: str, runs: list[RepoRun], get, args, out) -> dict | None:
    """One table: a row per repository, per language (Python/JS/TS/Go/Rust) and
    overall, for the cases ``get(run)`` returns; GUARD lines after it.
    Returns the overall summary (None without cases)."""

    def row(name: str, s: dict) -> str:
        c, r = s["context_query"], s["naive_rag"]
        return (f"{name:<10} {s['cases']:>5} {s['gold_symbols']:>5.1f} | "
                f"{c['file_recall']:>5.2f} {r['file_recall']:>5.2f} | "
                f"{c['symbol_recall']:>5.2f} {r['symbol_recall']:>5.2f} {s['symbol_recall_vs_naive']:>5.2f}x | "
                f"{c['body_recall']:>5.2f} {r['body_recall']:>5.2f} | "
                f"{c['tokens']:>6.0f} {c['baseline_tokens']:>7.0f} {c['tokens_over_baseline']:>5.2f} | "
                f"{r['tokens']:>6.0f} {r['baseline_tokens']:>7.0f} | "
                f"{c['p50_ms']:>6.1f} {c['p95_ms']:>6.1f} | {r['p50_ms']:>5.1f} | {c['under_half_budget']:>4.2f}")

    results = [r for run in runs for r in get(run)]
    print(f"\n{title}", file=out)
    if not results:
        print("  (no cases)", file=out)
        return None
    overall = summarize(results, args.max_tokens)
    print(f"{'':<10} {'':>5} {'gold':>5} | {'file recall':^11} | {'symbol recall':^18} | {'body recall':^11} | "
          f"{'cq tokens / baseline':^20} | {'rag tok / base':^14} | {'cq latency ms':^13} | {'rag':>5} | {'cq':>4}", file=out)
    print(f"{'repo':<10} {'cases':>5} {'syms':>5} | {'cq':>5} {'rag':>5} | {'cq':>5} {'rag':>5} {'ratio':>6} | "
          f"{'cq':>5} {'rag':>5} | "
          f"{'tokens':>6} {'base':>7} {'t/b':>5} | {'tokens':>6} {'base':>7} | {'p50':>6} {'p95':>6} | {'p50':>5} | {'<1/2':>4}",
          file=out)
    print("-" * WIDTH, file=out)
    for run in runs:
        if get(run):
            print(row(run.name, summarize(get(run), args.max_tokens)), file=out)
        else:
            print(f"{run.name:<10} {0:>5}  (no qualifying cases)", file=out)
    print("-" * WIDTH, file=out)
    for label, langs in LANGUAGE_ROWS:
        rs = [r for run in runs if run.language in langs for r in get(run)]
        if rs:
            print(row(label, summarize(rs, args.max_tokens)), file=out)
    print(row("overall", overall), file=out)
    print("(t/b = mean over cases of tokens / baseline_tokens; recall = mean over cases; <1/2 = share of cq slices "
          "under half the budget; micro (all gold symbols pooled): symbol "
          f"cq {overall['context_query']['symbol_recall_micro']:.2f} rag {overall['naive_rag']['symbol_recall_micro']:.2f}, "
          f"body cq {overall['context_query']['body_recall_micro']:.2f} rag {overall['naive_rag']['body_recall_micro']:.2f})",
          file=out)
    for name, below in guards(runs, get, args):
        print(f"GUARD {name}: context_query below the BM25 arm on {', '.join(below)}", file=out)
    return overall


def guards(runs: list[RepoRun], get, args) -> list[tuple[str, list[str]]]:
    """Repositories where the BM25 arm is ahead of cq on file, symbol or body recall."""
    out = []
    for run in runs:
        if not get(run):
            continue
        s = summarize(get(run), args.max_tokens)
        c, r = s["context_query"], s["naive_rag"]
        below = [f"{what} {c[key]:.3f} < {r[key]:.3f}" for what, key in RECALLS if c[key] < r[key]]
        if below:
            out.append((run.name, below))
    return out


def print_built(runs: list[RepoRun], out) -> None:
    print("\nCases built / skipped (commits scanned newest first):", file=out)
    for run in runs:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(run.skipped.items(), key=lambda kv: -kv[1]))
        print(f"  {run.name:<10} {run.language or '-':<10} {run.source_lines:>8,} lines  HEAD {run.head[:10]}  "
              f"scanned {run.scanned:>4}  built {len(run.results):>3}  "
              f"skipped {sum(run.skipped.values()):>4}: {reasons}", file=out)


def print_english_built(runs: list[RepoRun], out) -> None:
    print("\nEnglish questions (functions/methods at HEAD; qualified = documented, non-test, public, >= "
          f"{ENGLISH_MIN_LINES} lines):", file=out)
    for run in runs:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(run.english_skipped.items(), key=lambda kv: -kv[1]))
        print(f"  {run.name:<10} qualified {run.english_pool:>5}  asked {len(run.english):>3}  "
              f"still naming a part of the function {run.english_named:>3}  not qualified: {reasons}", file=out)
    examples = [(run.name, r.case.query) for run in runs for r in run.english[:2]]
    for name, q in examples[:6]:
        print(f"    e.g. [{name}] {q[:140]}", file=out)


def print_half(half: str, runs: list[RepoRun], args, out) -> tuple[dict | None, dict | None]:
    """Both tables of one half (commit cases, English questions). Returns their overall summaries."""
    names = ", ".join(run.name for run in runs)
    overall = print_table(f"{half} half, commit cases ({names})", runs, commit_cases, args, out)
    print_built(runs, out)
    english = None
    if args.english_per_repo > 0:
        english = print_table(f"{half} half, plain-English questions from docstrings ({names})",
                              runs, english_results, args, out)
        print_english_built(runs, out)
    return overall, english


def print_halves(what: str, dev: dict | None, check: dict | None, out) -> list[str]:
    """A line per figure, development half against check half; returns the figures flagged FITTED."""
    if not dev or not check:
        return []
    print(f"\nDevelopment half vs check half, {what} (FITTED: development cq more than {FITTED_GAP} above check):",
          file=out)
    fitted = []
    for label, key in RECALLS:
        d, c = dev["context_query"][key], check["context_query"][key]
        dr, cr = dev["naive_rag"][key], check["naive_rag"][key]
        flag = d - c > FITTED_GAP
        if flag:
            fitted.append(label)
        print(f"  {label:<14} cq: development {d:.3f}  check {c:.3f}  ({d - c:+.3f})   "
              f"rag: development {dr:.3f}  check {cr:.3f}  ({dr - cr:+.3f})  {'FITTED' if flag else 'ok'}", file=out)
    return fitted


def check_targets(runs: list[RepoRun], args) -> list[tuple[str, float, float, str]]:
    """The check half's targets: (what, measured, goal, ">=" or "<=")."""
    per_repo = {run.name: summarize(run.results, args.max_tokens) for run in runs if run.results}
    results = [r for run in runs for r in run.results]
    if not results:
        return []
    c = summarize(results, args.max_tokens)["context_query"]
    checks: list[tuple[str, float, float, str]] = [("overall body recall >= 0.60", c["body_recall"], 0.60, ">=")]
    for name, s in per_repo.items():
        checks.append((f"{name} body recall >= 0.45", s["context_query"]["body_recall"], 0.45, ">="))
    checks.append(("overall symbol recall >= 0.82", c["symbol_recall"], 0.82, ">="))
    for run in runs:
        if run.name in per_repo:
            goal = 0.92 if run.language == "python" else 0.90
            checks.append((f"{run.name} ({run.language or '-'}) file recall >= {goal:.2f}",
                           per_repo[run.name]["context_query"]["file_recall"], goal, ">="))
    ahead = guards(runs, commit_cases, args)
    named = "; ".join(f"{n}: " + ", ".join(b) for n, b in ahead) or "none"
    checks.append((f"BM25 ahead on no repository on file/symbol/body recall ({named})", float(len(ahead)), 0, "<="))
    return checks


def print_check_targets(runs: list[RepoRun], args, out, on_development: bool = False) -> list:
    checks = check_targets(runs, args)
    if not checks:
        return []
    where = ("the development half: no --check-repos given, so these figures are not held out" if on_development
             else "the check half")
    print(f"\nTargets on {where} (max_tokens {args.max_tokens}, commit cases):", file=out)
    rows = []
    for name, value, goal, op in checks:
        ok = value >= goal if op == ">=" else value <= goal
        rows.append({"target": name, "measured": value, "goal": goal, "op": op, "pass": ok})
        print(f"  {'PASS' if ok else 'MISS'}  {name:<72} measured {value:.3f}", file=out)
    return rows


LARGE_LINES = 300_000


def print_targets(runs: list[RepoRun], overall: dict, latency: dict | None, args, out) -> None:
    """Issue 10's targets at the bench's budget, each next to its figure."""
    c = overall["context_query"]
    checks: list[tuple[str, float | None, float, str]] = []
    below = []
    per_repo = {run.name: summarize(run.results, args.max_tokens) for run in runs if run.results}
    for name, s in per_repo.items():
        cq, rag = s["context_query"], s["naive_rag"]
        gap = min(cq["file_recall"] - rag["file_recall"], cq["symbol_recall"] - rag["symbol_recall"])
        if gap < 0:
            below.append(f"{name} {gap:+.3f}")
    checks.append((f"no repository below BM25 on either recall ({', '.join(below) or 'none below'})",
                   float(len(below)), 0, "<="))
    for run in runs:
        if run.name in per_repo and run.language == "python" and run.source_lines >= LARGE_LINES:
            cq = per_repo[run.name]["context_query"]
            checks.append((f"{run.name} (large Python, {run.source_lines:,} lines) symbol recall >= 0.55",
                           cq["symbol_recall"], 0.55, ">="))
            checks.append((f"{run.name} (large Python) file recall >= 0.85", cq["file_recall"], 0.85, ">="))
    checks.append(("overall symbol recall >= 0.85", c["symbol_recall"], 0.85, ">="))
    checks.append(("overall file recall >= 0.95", c["file_recall"], 0.95, ">="))
    for run in runs:
        if run.name in per_repo and run.language not in ("python", ""):
            checks.append((f"{run.name} ({run.language}) file recall >= 0.90",
                           per_repo[run.name]["context_query"]["file_recall"], 0.90, ">="))
    checks.append(("tokens / baseline_tokens <= 0.45 (issue 3, mean of ratios)", c["tokens_over_baseline"], 0.45, "<="))
    if latency:
        checks.append(("p95 latency on the large index <= 100 ms", latency["p95_ms"], 100.0, "<="))
        if "commit" in latency["by_style"]:
            checks.append(("  commit-message questions p95 <= 100 ms", latency["by_style"]["commit"]["p95_ms"],
                           100.0, "<="))
        checks.append((f"one-shot memstrata query wall p50 <= {ONESHOT_GOAL_S} s (issue 13)",
                       latency["oneshot"]["p50_s"], ONESHOT_GOAL_S, "<="))
    print(f"\nTargets (issue 10, max_tokens {args.max_tokens}):", file=out)
    for name, value, goal, op in checks:
        ok = value >= goal if op == ">=" else value <= goal
        print(f"  {'PASS' if ok else 'MISS'}  {name:<72} measured {value:.3f}", file=out)
    print(f"        share of cq slices under half the budget: {c['under_half_budget']:.3f}", file=out)


def print_failures(runs: list[RepoRun], n: int, out, get=commit_cases, what: str = "cases") -> None:
    if n <= 0 or not any(r.cq.symbol_recall < 1.0 for run in runs for r in get(run)):
        return
    print(f"\n{what[:1].upper()}{what[1:]} where context_query missed gold symbols (up to {n} per repo; "
          "body = share of the symbol's non-blank lines in the slice):", file=out)
    for run in runs:
        missed = [r for r in get(run) if r.cq.symbol_recall < 1.0]
        for r in missed[:n]:
            c = r.case
            print(f"\n[{run.name} {c.sha[:10]}] {c.query[:300]}", file=out)
            print(f"  gold files : {c.files}", file=out)
            for g in c.symbols:
                mark_cq = "cq+" if g.node in r.cq.hits else "cq-"
                mark_rag = "rag+" if g.node in r.rag.hits else "rag-"
                print(f"  gold symbol: {g.node} ({g.kind}, lines {g.start}-{g.end})  {mark_cq} {mark_rag}  "
                      f"body cq {r.cq.body_cover.get(g.node, 0):.2f} rag {r.rag.body_cover.get(g.node, 0):.2f}",
                      file=out)
            print(f"  cq sources : {r.cq.sources[:8]}{' ...' if len(r.cq.sources) > 8 else ''}", file=out)
            print(f"  cq full    : {r.cq.full[:6]}", file=out)
            print(f"  cq shown   : {len(r.cq.shown)} symbols, first {r.cq.shown[:8]}", file=out)
            print(f"  rag spans  : {r.rag.shown[:8]}", file=out)


# -- latency on a large index ------------------------------------------------------


def commit_questions(repo: Path, n: int, min_words: int) -> list[str]:
    """The newest ``n`` non-merge commit messages with enough content words, trailers removed."""
    repo = repo.resolve()
    out: list[str] = []
    for sha in git(repo, "rev-list", "--no-merges", f"--max-count={n * 5}", "HEAD").split():
        message = commit_message(repo, sha)
        if content_words(message) >= min_words:
            out.append(message)
            if len(out) >= n:
                break
    return out


def index_questions(graph, n: int, seed: int = 20240603) -> list[tuple[str, str]]:
    """``n`` (style, question) pairs drawn from an index itself: 70% first
    lines of docstrings ("docstring"), 30% "Qual and its callers" ("callers")."""
    rng = random.Random(seed)
    with_doc, funcs = [], []
    for node in sorted(graph.nodes()):
        d = graph.node(node)
        if d.get("type") != SYMBOL or graph.node(d["path"]).get("is_test"):
            continue
        if d["kind"] in ("function", "method"):
            funcs.append(node)
        first = next((ln.strip() for ln in (d.get("doc") or "").splitlines() if ln.strip()), "")
        if d["kind"] in ("function", "method", "class") and len(first.split()) >= 4:
            with_doc.append((node, first))
    queries = [("docstring", q) for _, q in rng.sample(with_doc, min(n * 7 // 10, len(with_doc)))]
    for node in rng.sample(funcs, min(n - len(queries), len(funcs))):
        queries.append(("callers", f"{graph.node(node)['qualname']} and its callers"))
    return queries


def latency_bench(path: Path, n: int, max_tokens: int, out, commits: list[str] = ()) -> dict:
    db = path / ".memstrata" / INDEX_FILE if path.is_dir() else path
    root = db.parent.parent
    store = Store(db, readonly=True)  # someone else's index: never written
    ws = Workspace(root, store)
    try:
        t0 = time.perf_counter()
        graph = ws.graph
        load_s = time.perf_counter() - t0
        queries = index_questions(graph, n) + [("commit", m) for m in commits]
        context_query(ws, queries[0][1], max_tokens=max_tokens)  # warm: name index, token ranks
        times: dict[str, list[float]] = {"docstring": [], "callers": [], "commit": []}
        for style, q in queries:
            t0 = time.perf_counter()
            context_query(ws, q, max_tokens=max_tokens)
            times[style].append((time.perf_counter() - t0) * 1000)
        every = times["docstring"] + times["callers"] + times["commit"]
        stats = graph.stats()
        oneshot = oneshot_bench(root, [q for _, q in queries], max_tokens)
        result = {
            "index": str(db), "files": stats["files"], "symbols": stats["symbols"], "graph_load_s": load_s,
            "queries": len(every), "p50_ms": pct(every, 50), "p95_ms": pct(every, 95), "max_ms": max(every),
            "by_style": {k: {"n": len(v), "p50_ms": pct(v, 50), "p95_ms": pct(v, 95)} for k, v in times.items() if v},
            "oneshot": oneshot,
            "examples": ([q for _, q in queries[:3]] + [q for s, q in queries if s == "callers"][:2]
                         + [q[:100] for s, q in queries if s == "commit"][:2]),
        }
    finally:
        ws.close()
    print(f"\nLatency on a large index: {db}", file=out)
    print(f"  {result['files']} files, {result['symbols']} symbols; graph load {load_s:.1f} s (not timed below)", file=out)
    print(f"  context_query at max_tokens={max_tokens}, {result['queries']} queries (warm): "
          f"p50 {result['p50_ms']:.1f} ms  p95 {result['p95_ms']:.1f} ms  max {result['max_ms']:.1f} ms", file=out)
    for k, v in result["by_style"].items():
        print(f"    {k:<10} n={v['n']:<3} p50 {v['p50_ms']:.1f} ms  p95 {v['p95_ms']:.1f} ms", file=out)
    print(f"  e.g. {result['examples']}", file=out)
    o = result["oneshot"]
    print(f"  one-shot `memstrata query` wall, {o['n']} processes: p50 {o['p50_s']:.2f} s  max {o['max_s']:.2f} s "
          f"(goal p50 <= {ONESHOT_GOAL_S} s); the first one {o['first_s']:.2f} s "
          f"({'built and saved the graph snapshot' if o['first_built'] else 'the snapshot was already there'})",
          file=out)
    return result


ONESHOT_GOAL_S = 0.5
ONESHOT_RUNS = 12


def oneshot_bench(root: Path, questions: list[str], max_tokens: int) -> dict:
    """Wall time of whole `memstrata query` processes, distinct questions."""
    snapshot = root / ".memstrata" / "graph.snapshot"
    before = snapshot.stat().st_mtime_ns if snapshot.exists() else None
    exe = Path(sys.executable).with_name("memstrata")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "memstrata"]
    walls = []
    picked = questions[:: max(1, len(questions) // (ONESHOT_RUNS + 1))][: ONESHOT_RUNS + 1]
    for q in picked:
        t0 = time.perf_counter()
        subprocess.run([*cmd, "query", q, "--project", str(root), "--max-tokens", str(max_tokens)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        walls.append(time.perf_counter() - t0)
    after = snapshot.stat().st_mtime_ns if snapshot.exists() else None
    rest = walls[1:] or walls
    return {"n": len(rest), "first_s": walls[0], "first_built": after != before,
            "p50_s": statistics.median(rest), "max_s": max(rest)}


# -- main --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", nargs="*", default=[], metavar="DIR",
                    help="git repositories with full history: the development half")
    ap.add_argument("--check-repos", nargs="*", default=[], metavar="DIR",
                    help="git repositories with full history: the check half (held out, reported apart)")
    ap.add_argument("--english-per-repo", type=int, default=20, metavar="N",
                    help="plain-English questions made from docstrings at HEAD, per repository (0: none)")
    ap.add_argument("--cases-per-repo", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--max-scan", type=int, default=4000, help="commits looked at per repository at most")
    ap.add_argument("--limit", action="append", default=[], metavar="NAME=CASES[/SCAN]",
                    help="per-repository case count and scan limit, e.g. sympy=40/1500 (repeatable)")
    ap.add_argument("--max-gold-symbols", type=int, default=10,
                    help="skip sweeping commits whose changes touch more symbols than this")
    ap.add_argument("--min-query-words", type=int, default=3,
                    help="skip commits whose message has fewer content words (0 keeps every message)")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "memstrata-quality"), help="where the per-repo checkouts live")
    ap.add_argument("--fresh", action="store_true", help="drop the scratch checkouts and their indexes first")
    ap.add_argument("--latency-index", type=Path, help="project (or index.db) of a large index to time queries on")
    ap.add_argument("--latency-queries", type=int, default=50)
    ap.add_argument("--latency-repo", type=Path,
                    help="git repository whose commit messages join the latency questions (e.g. sympy's history "
                         "for the sympy wheel)")
    ap.add_argument("--latency-commits", type=int, default=50, help="commit-message questions from --latency-repo")
    ap.add_argument("--show-failures", type=int, default=3,
                    help="missed cases printed per repository of the development half")
    ap.add_argument("--show-check-failures", action="store_true",
                    help="print the check half's missed cases too (off: that half is for measuring, and its "
                         "cases read while tuning would make it one more development half)")
    ap.add_argument("--json", type=Path, help="write every case and figure here")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case while running")
    args = ap.parse_args(argv)
    if not args.repos and not args.check_repos and not args.latency_index:
        ap.error("give --repos, --check-repos and/or --latency-index")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    out = sys.stdout
    halves: dict[str, list[RepoRun]] = {"development": [], "check": []}
    for half, repos in (("development", args.repos), ("check", args.check_repos)):
        for repo in repos:
            t0 = time.perf_counter()
            log(f"{Path(repo).name} ({half} half): building cases ...")
            run = run_repo(Path(repo), args, log, half)
            log(f"{run.name}: {len(run.results)} cases, {len(run.english)} English questions "
                f"in {time.perf_counter() - t0:.0f} s")
            halves[half].append(run)
    runs, check_runs = halves["development"], halves["check"]
    summaries: dict[str, dict[str, dict | None]] = {}
    if runs or check_runs:
        print_header(args, out)
    for half, label in (("development", "Development"), ("check", "Check")):
        if halves[half]:
            commit_overall, english_overall = print_half(label, halves[half], args, out)
            summaries[half] = {"commit": commit_overall, "english": english_overall}
    overall = summaries.get("development", {}).get("commit")
    fitted: dict[str, list[str]] = {}
    if runs and check_runs:
        for what, key in (("commit cases", "commit"), ("plain-English questions", "english")):
            fitted[key] = print_halves(what, summaries["development"][key], summaries["check"][key], out)
    shown = runs + check_runs if args.show_check_failures else runs
    print_failures(shown, args.show_failures, out)
    print_failures(shown, args.show_failures, out, english_results, "plain-English questions")
    latency = None
    if args.latency_index:
        commits = commit_questions(args.latency_repo, args.latency_commits, args.min_query_words) if args.latency_repo else []
        latency = latency_bench(args.latency_index, args.latency_queries, args.max_tokens, out, commits)
    if overall:
        print_targets(runs, overall, latency, args, out)
    targets = (print_check_targets(check_runs, args, out) if check_runs
               else print_check_targets(runs, args, out, on_development=True))
    if args.json:
        def repo_entry(run: RepoRun) -> dict:
            return {"head": run.head, "half": run.half, "language": run.language, "scanned": run.scanned,
                    "skipped": run.skipped,
                    "summary": summarize(run.results, args.max_tokens) if run.results else None,
                    "cases": [asdict(r) for r in run.results],
                    "english": {"qualified": run.english_pool, "naming_a_part": run.english_named,
                                "not_qualified": run.english_skipped,
                                "summary": summarize(run.english, args.max_tokens) if run.english else None,
                                "cases": [asdict(r) for r in run.english]}}

        payload = {
            "max_tokens": args.max_tokens,
            "body_share": BODY_SHARE,
            "repos": {run.name: repo_entry(run) for run in runs},
            "overall": overall,
            "check_repos": {run.name: repo_entry(run) for run in check_runs},
            "halves": summaries,  # half -> {"commit": overall summary, "english": overall summary}
            "fitted": fitted,  # figures where the development half is more than FITTED_GAP above the check half
            "targets_check": {"on": "check" if check_runs else "development", "rows": targets},
            "latency": latency,
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
