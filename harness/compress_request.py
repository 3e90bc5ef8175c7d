"""Find the project code pasted into a chat request and replace it with a slice.

What counts as **code context** (the only thing ever replaced):

* runs of lines inside *user* text (string content or ``text`` parts) or inside
  *tool results* (Anthropic ``tool_result`` blocks, OpenAI ``role: tool``
  messages) where every significant line occurs verbatim (after trimming
  whitespace and ``cat -n``-style line-number prefixes) in an indexed project
  file the text points at — by defining a symbol the index knows, or by naming
  the file's path;
* a run counts only with at least ``min_run_lines`` such lines; a fenced block
  whose whole body is one run is replaced together with its fence markers.

Everything else is left exactly as sent: system prompts, assistant turns, the
user's instructions (any line that is not project code breaks a run), images,
tool calls and their ids, and code that differs from the project's (a user's
edited copy is not "from the project").  The question for the slice is the
last user turn's non-code text.  If nothing qualifies, or the slice would not
be smaller than what it replaces, the request is forwarded byte for byte.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from memstrata.compressor import QueryError, context_query
from memstrata.compressor.tokens import count_tokens
from memstrata.storage import code_index as ci

OPENAI = "openai"
ANTHROPIC = "anthropic"

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_LINENO = re.compile(r"^\s*\d+(?:→|\t|: |\| )")
_DEFINES = re.compile(
    r"^\s*(?:\d+(?:→|\t|: |\| )\s*)?(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:public\s+|private\s+|protected\s+|static\s+|"
    r"abstract\s+|final\s+|async\s+)*"
    r"(?:def|class|function|func(?:\s*\([^)]*\))?|fn|interface|struct|enum|trait|type|module|impl)\s+"
    r"([A-Za-z_$][\w$]*)",
    re.M,
)
_PATHLIKE = re.compile(r"[\w.\-/]*[\w\-]\.[A-Za-z0-9]{1,6}\b")
_ELISION = frozenset({"...", "…", "# ...", "// ...", "/* ... */"})
QUESTION_CHARS = 2000
HINT_NAMES = 12
SLICE_OVERHEAD_TOKENS = 48  # the note and fence around the slice


@dataclass
class CompressionSettings:
    budget_ratio: float = 1.0   # slice budget = ratio x tokens replaced ...
    budget_cap: int = 4096      # ... capped
    min_tokens: int = 200       # replace nothing smaller than this in total
    min_run_lines: int = 4      # significant project lines a run needs


@dataclass
class Run:
    slot: tuple          # path to the text inside the body
    start: int           # char offsets into that text
    end: int
    files: list[str]
    lines: int
    names: list[str]     # definitions inside the run (query hints)
    tokens: int = 0


@dataclass
class CompressionResult:
    body: dict | None                     # the body to forward; None = forward unchanged
    reason: str                           # what happened, for logs and tests
    question: str | None = None
    replaced_tokens: int = 0
    replacement_tokens: int = 0
    runs: int = 0
    sources: list[str] = field(default_factory=list)
    slice_symbols: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.body is not None


# -- the body's text slots ----------------------------------------------------------


@dataclass
class Slot:
    path: tuple
    text: str
    role: str
    tool: bool
    index: int  # message index


def iter_slots(body: dict, api: str) -> Iterator[Slot]:
    """Editable text locations: user text and tool results, in message order."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        content = m.get("content")
        base = ("messages", i, "content")
        if api == OPENAI and role in ("tool", "function"):
            yield from _text_slots(content, base, role, True, i)
        elif role == "user":
            if isinstance(content, str):
                yield Slot(base, content, role, False, i)
            elif isinstance(content, list):
                for j, part in enumerate(content):
                    if not isinstance(part, dict):
                        continue
                    if part.get("type") == "text" and isinstance(part.get("text"), str):
                        yield Slot((*base, j, "text"), part["text"], role, False, i)
                    elif api == ANTHROPIC and part.get("type") == "tool_result":
                        yield from _text_slots(part.get("content"), (*base, j, "content"), role, True, i)


def _text_slots(content, base: tuple, role: str, tool: bool, i: int) -> Iterator[Slot]:
    if isinstance(content, str):
        yield Slot(base, content, role, tool, i)
    elif isinstance(content, list):
        for k, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                yield Slot((*base, k, "text"), part["text"], role, tool, i)


def set_path(root, path: tuple, value):
    """A copy of ``root`` with ``value`` at ``path``; only containers on the path are copied."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy = list(root) if isinstance(root, list) else dict(root)
    copy[head] = set_path(root[head], rest, value)
    return copy


# -- matching pasted code against the project --------------------------------------


def _norm(line: str) -> str:
    return _LINENO.sub("", line, count=1).strip()


def _significant(norm: str) -> bool:
    return len(norm) >= 4 and norm not in _ELISION and any(ch.isalnum() for ch in norm)


class ProjectMatcher:
    """Knows which project files a text points at and their lines (cached by content)."""

    def __init__(self, ws, cache_size: int = 512):
        self.ws = ws
        self._lines: dict[str, tuple[int, frozenset[str]]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._base_key: tuple | None = None
        self._base: dict[str, list[str]] = {}

    def candidate_files(self, text: str) -> list[str]:
        graph = self.ws.graph
        found: dict[str, int] = {}
        for name in set(_DEFINES.findall(text)):
            for node in graph.definitions(name):
                path = graph.file_of(node)
                found[path] = found.get(path, 0) + 1
        if "." in text:
            by_base = self._basenames(graph)
            for token in set(_PATHLIKE.findall(text)):
                token = token.lstrip("./")
                for path in by_base.get(token.rsplit("/", 1)[-1], ()):
                    if path == token or path.endswith("/" + token):
                        found[path] = found.get(path, 0) + 3
        return [p for p, _ in sorted(found.items(), key=lambda kv: -kv[1])[:8]]

    def _basenames(self, graph) -> dict[str, list[str]]:
        """File name -> project paths, rebuilt when the set of files changes."""
        files = graph.files()
        key = (id(graph), len(files), hash(tuple(files[:50])))
        with self._lock:
            if self._base_key == key:
                return self._base
        index: dict[str, list[str]] = {}
        for path in files:
            index.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        with self._lock:
            self._base_key, self._base = key, index
        return index

    def project_lines(self, paths: list[str]) -> frozenset[str]:
        if not paths:
            return frozenset()
        texts = ci.file_texts(self.ws.store, paths)
        out: set[str] = set()
        for path, text in texts.items():
            key = hash(text)
            with self._lock:
                hit = self._lines.get(path)
            if hit is None or hit[0] != key:
                lines = frozenset(n for n in (ln.strip() for ln in text.splitlines()) if _significant(n))
                hit = (key, lines)
                with self._lock:
                    if len(self._lines) >= self._cache_size:
                        self._lines.clear()
                    self._lines[path] = hit
            out |= hit[1]
        return frozenset(out)

    def runs(self, slot: Slot, min_lines: int) -> list[Run]:
        text = slot.text
        if text.count("\n") + 1 < min_lines:
            return []
        files = self.candidate_files(text)
        if not files:
            return []
        known = self.project_lines(files)
        lines = text.splitlines(keepends=True)
        offsets = [0]
        for ln in lines:
            offsets.append(offsets[-1] + len(ln))
        # 1 = project line, 0 = neutral (blank, brace, elision), -1 = other text, -2 = fence marker
        marks = []
        for ln in lines:
            n = _norm(ln)
            if _FENCE.match(ln):
                marks.append(-2)
            elif not _significant(n):
                marks.append(0)
            else:
                marks.append(1 if n in known else -1)
        runs = []
        i = 0
        while i < len(lines):
            if marks[i] != 1:
                i += 1
                continue
            j = i
            last = i
            while j < len(lines) and marks[j] >= 0:
                if marks[j] == 1:
                    last = j
                j += 1
            count = sum(1 for k in range(i, last + 1) if marks[k] == 1)
            if count >= min_lines:
                a, b = i, last
                # extend over neutral lines to the fence markers around a whole fenced body
                lo = a
                while lo > 0 and marks[lo - 1] == 0:
                    lo -= 1
                hi = b
                while hi + 1 < len(lines) and marks[hi + 1] == 0:
                    hi += 1
                if lo > 0 and marks[lo - 1] == -2 and hi + 1 < len(lines) and marks[hi + 1] == -2:
                    a, b = lo - 1, hi + 1
                body = text[offsets[a]:offsets[b + 1]]
                # keep the line break that separated the run from what follows
                end = offsets[b + 1]
                if body.endswith("\n") and b + 1 < len(lines):
                    end -= 1
                runs.append(Run(slot.path, offsets[a], end, self._files_of(body, files, known),
                                count, _DEFINES.findall(body)))
            i = j
        return runs

    def _files_of(self, body: str, files: list[str], known) -> list[str]:
        own = self.candidate_files(body)
        return [f for f in own if f in files] or files[:1]


# -- the compression ---------------------------------------------------------------


def question_of(body: dict, api: str, runs_by_slot: dict[tuple, list[Run]]) -> str | None:
    """The last user turn's text with the code runs taken out."""
    slots = [s for s in iter_slots(body, api) if not s.tool]
    by_msg: dict[int, list[Slot]] = {}
    for s in slots:
        by_msg.setdefault(s.index, []).append(s)
    for index in sorted(by_msg, reverse=True):
        parts = []
        for s in by_msg[index]:
            text = s.text
            for r in sorted(runs_by_slot.get(s.path, []), key=lambda r: r.start, reverse=True):
                text = text[:r.start] + text[r.end:]
            parts.append(text.strip())
        question = "\n".join(p for p in parts if p).strip()
        if question:
            return question[-QUESTION_CHARS:]
    return None


Slicer = Callable[[str, int, bool], object]


def compress(body: dict, api: str, matcher: ProjectMatcher, settings: CompressionSettings,
             slicer: Slicer | None = None) -> CompressionResult:
    """Replace the project code in ``body`` with a slice; see the module docstring."""
    if not isinstance(body.get("messages"), list):
        return CompressionResult(None, "no messages")
    runs: list[Run] = []
    for slot in iter_slots(body, api):
        runs.extend(matcher.runs(slot, settings.min_run_lines))
    if not runs:
        return CompressionResult(None, "no project code in the request")
    texts = {}
    for slot in iter_slots(body, api):
        texts[slot.path] = slot.text
    for r in runs:
        r.tokens = count_tokens(texts[r.slot][r.start:r.end])
    replaced = sum(r.tokens for r in runs)
    if replaced < settings.min_tokens:
        return CompressionResult(None, f"only {replaced} tokens of project code", replaced_tokens=replaced)
    by_slot: dict[tuple, list[Run]] = {}
    for r in runs:
        by_slot.setdefault(r.slot, []).append(r)
    question = question_of(body, api, by_slot)
    if not question:
        return CompressionResult(None, "no question text", replaced_tokens=replaced)
    budget = min(int(replaced * settings.budget_ratio), settings.budget_cap) - SLICE_OVERHEAD_TOKENS
    if budget < 64:
        return CompressionResult(None, "budget too small", question=question, replaced_tokens=replaced)
    files = list(dict.fromkeys(f for r in runs for f in r.files))
    include_tests = any("test" in f.lower() for f in files)
    slicer = slicer or (lambda q, b, t: context_query(matcher.ws, q, max_tokens=b, include_tests=t))
    # The question first; if it names nothing in the project ("why does this
    # fail?"), the names the pasted code defines are the best seeds left.
    hints = list(dict.fromkeys(n for r in runs for n in r.names))[:HINT_NAMES]
    sl = None
    for query in (question, question + "\n" + " ".join(hints)) if hints else (question,):
        try:
            sl = slicer(query, budget, include_tests)
        except QueryError:
            sl = None
        if sl is not None and sl.context.strip() and sl.sources:
            break
        sl = None
    if sl is None:
        return CompressionResult(None, "empty slice", question=question, replaced_tokens=replaced)

    first = runs[0]
    fence = "~~~~" if "```" in sl.context else "```"
    lines_total = sum(r.lines for r in runs)
    replacement = {
        id(first): (f"[memstrata: {lines_total} lines of project code ({', '.join(files[:6])}"
                    f"{', ...' if len(files) > 6 else ''}) replaced by the project context relevant to this "
                    f"request]\n{fence}\n{sl.context.rstrip()}\n{fence}")
    }
    for r in runs[1:]:
        replacement[id(r)] = f"[memstrata: {r.lines} lines of {', '.join(r.files[:3])} folded into the project context above]"
    new_tokens = sum(count_tokens(t) for t in replacement.values())
    if new_tokens >= replaced:
        return CompressionResult(None, "slice not smaller", question=question, replaced_tokens=replaced,
                                 replacement_tokens=new_tokens)

    out = body
    for path, slot_runs in by_slot.items():
        text = texts[path]
        for r in sorted(slot_runs, key=lambda r: r.start, reverse=True):
            text = text[:r.start] + replacement[id(r)] + text[r.end:]
        out = set_path(out, path, text)
    return CompressionResult(out, "compressed", question=question, replaced_tokens=replaced,
                             replacement_tokens=new_tokens, runs=len(runs), sources=list(sl.sources),
                             slice_symbols=list(getattr(sl, "symbols", []) or []))
