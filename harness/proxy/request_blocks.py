"""Where compressible code sits in a chat request, message by message.

Two kinds of piece, both attributed to a file so that an elision marker can
name the path and the lines to ask for:

* ``result``: a tool result holding a file's text -- ``cat -n`` / Claude
  Code ``Read`` form (``     12→code`` or ``    12<TAB>code``), numbered by
  the tool, with the path from the tool call's input; or unnumbered text
  that is a contiguous run of an indexed file's lines;
* ``paste``: code in a user's own text -- a fenced block whose body is a
  contiguous run of an indexed file's lines, or unfenced lines that are.

Everything else (system prompts, assistant turns, tool calls, images,
errors, code that is not verbatim project code) is never a piece.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from memstrata.compressor.block import Block
from memstrata.indexer.languages import language_for_path
from memstrata.indexer.scan import is_test_path

from .memo import SizedLRU
from .project_match import PATHLIKE, ProjectMatcher
from .tool_output import header_length

OPENAI = "openai"
ANTHROPIC = "anthropic"
RESPONSES = "responses"  # OpenAI's Responses API: compressed through its chat view (responses_api.py)
MODES = ("safe", "aggressive", "off")  # compression modes (proxy/compress_request.py)

_NUMBERED = re.compile(r"^( *)(\d{1,7})(→|\t)(.*)$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")  # CommonMark: a tab-indented ``` is not a fence
_PATH_KEYS = ("file_path", "path", "filename", "file", "target_file", "absolute_path", "relative_path", "uri")
MIN_NUMBERED_LINES = 3
_BARE_PATH = re.compile(r"^\s*[~.]?[\w.\-]*[/\\][^\s]*\s*$")
# Possessive blanks: a line of thousands of them took time quadratic in its length.
_LABEL_LINE = re.compile(r"^\s*+(?:#|//|--|/\*)?\s*+[\w.\-/]+\.\w{1,6}\s*+:?\s*+(?:\*/)?\s*+$")


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    path: str | None  # the file it names, as written
    text: str         # its input, as text


@dataclass(frozen=True)
class Slot:
    path: tuple       # where the text sits inside the message
    text: str
    tool_use_id: str | None = None   # set for tool results
    is_error: bool = False


@dataclass
class Found:
    slot: tuple
    start: int
    end: int          # char span of the code in the slot text
    kind: str         # result | paste
    block: Block
    tool_use_id: str | None = None


# -- walking a message ---------------------------------------------------------------


def message_slots(msg: dict, api: str) -> list[Slot]:
    """The text a compression may touch: user text and tool results, in order."""
    role = msg.get("role")
    content = msg.get("content")
    out: list[Slot] = []
    if api == OPENAI and role in ("tool", "function"):
        out.extend(_text_slots(content, ("content",), msg.get("tool_call_id") or msg.get("name") or ""))
    elif role == "user":
        if isinstance(content, str):
            out.append(Slot(("content",), content))
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    out.append(Slot(("content", j, "text"), part["text"]))
                elif api == ANTHROPIC and part.get("type") == "tool_result":
                    out.extend(_text_slots(part.get("content"), ("content", j, "content"),
                                           str(part.get("tool_use_id") or ""), part.get("is_error") is True))
    return out


def _text_slots(content, base: tuple, tool_use_id: str, is_error: bool = False) -> Iterator[Slot]:
    if isinstance(content, str):
        yield Slot(base, content, tool_use_id, is_error)
    elif isinstance(content, list):
        for k, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                yield Slot((*base, k, "text"), part["text"], tool_use_id, is_error)


def tool_uses(msg: dict, api: str) -> list[ToolUse]:
    if msg.get("role") != "assistant":
        return []
    out = []
    if api == ANTHROPIC and isinstance(msg.get("content"), list):
        for part in msg["content"]:
            if isinstance(part, dict) and part.get("type") == "tool_use":
                inp = part.get("input")
                out.append(ToolUse(str(part.get("id") or ""), str(part.get("name") or ""), _input_path(inp),
                                   _as_text(inp)))
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            try:
                inp = json.loads(args) if isinstance(args, str) else args
            except ValueError:
                inp = None
            out.append(ToolUse(str(call.get("id") or ""), str(fn.get("name") or ""), _input_path(inp),
                               args if isinstance(args, str) else _as_text(args)))
    return out


def _input_path(inp) -> str | None:
    if isinstance(inp, dict):
        for key in _PATH_KEYS:
            value = inp.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def _as_text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def assistant_text(msg: dict) -> str:
    """What an assistant turn says and asks tools for (later compressions keep what it names)."""
    content = msg.get("content")
    parts = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") == "tool_use":
                    parts.extend(_input_values(part.get("input")))
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            try:
                parts.extend(_input_values(json.loads(fn["arguments"])))
            except ValueError:
                parts.append(fn["arguments"])
    return "\n".join(parts)


def _input_values(value, depth: int = 0) -> list[str]:
    """The strings a tool input carries (a path, a pattern, an ``old_string``), without its keys:
    ``file_path`` or ``pattern`` would otherwise rank every definition about files or patterns.
    Paths are left out too: they say which file, not what in it, and the folders above the
    project would rank whatever shares their names."""
    if isinstance(value, str):
        return [] if _BARE_PATH.match(value) else [value]
    if depth > 8:
        return []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _input_values(v, depth + 1)]
    if isinstance(value, list):
        return [s for v in value for s in _input_values(v, depth + 1)]
    return []


def message_texts(msg: dict) -> Iterator[tuple[tuple, str]]:
    """Every text of a message the provider reads, with where it sits (for counting tokens)."""
    content = msg.get("content")
    if isinstance(content, str):
        yield ("content",), content
    elif isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                yield ("content", j, "text"), part["text"]
            elif part.get("type") == "tool_result":
                inner = part.get("content")
                if isinstance(inner, str):
                    yield ("content", j, "content"), inner
                elif isinstance(inner, list):
                    for k, p in enumerate(inner):
                        if isinstance(p, dict) and isinstance(p.get("text"), str):
                            yield ("content", j, "content", k, "text"), p["text"]
            elif part.get("type") == "tool_use":
                yield ("content", j, "input"), _as_text(part.get("input"))
    for n, call in enumerate(msg.get("tool_calls") or []):
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            yield ("tool_calls", n, "function", "arguments"), fn["arguments"]


# -- finding pieces ------------------------------------------------------------------


def find_in_result(slot: Slot, use: ToolUse | None, matcher: ProjectMatcher, min_lines: int) -> list[Found]:
    if slot.is_error or slot.text.count("\n") + 1 < min_lines:
        return []
    # A shell tool's status header (Codex's ``Exit code: 0`` / ``Wall time: ..`` / ``Output:``) is
    # the tool's packaging, not the command's text: the piece is what follows it, found and cut as
    # the same text sent bare, and the header is forwarded as it came (see .tool_output).
    head = header_length(slot.text)
    text = slot.text[head:] if head else slot.text
    return [dataclasses.replace(f, start=f.start + head, end=f.end + head) if head else f
            for f in _find_in_result(slot, text, use, matcher)]


def _find_in_result(slot: Slot, text: str, use: ToolUse | None, matcher: ProjectMatcher) -> list[Found]:
    lines, run = _lines_and_run(text)
    hint = use.path if use is not None else None
    if run is not None:
        a, b, numbers, code = run
        shown_path, language = _path_and_language(hint)
        project_path = None
        if language is None or hint is None:
            loc = matcher.locate_whole(code, matcher.candidate_files("\n".join(code), _hints(hint, use)),
                                       at=numbers[0] - 1)
            if loc is None:
                return []
            project_path = loc[0]
            language = language_for_path(project_path)
            shown_path = hint or project_path
            if language is None:
                return []
        block = Block(lines[a:b], code, numbers, language, shown_path,
                      is_test_path(_relative(project_path or shown_path)))
        return [Found(slot.path, *_span(lines, a, b), "result", block, slot.tool_use_id)]
    # Unnumbered: the whole result must be a run of an indexed file -- at the lines the command
    # printed when it says which (``sed -n '120,180p' file``), else at the one place it fits: its
    # markers name lines by number, and a run found at the wrong one of two places would send
    # the agent to lines it never saw.
    loc = matcher.locate_whole(lines, matcher.candidate_files(text, _hints(hint, use)), at=_printed_from(use))
    if loc is None:
        return []
    path, first = loc
    language = language_for_path(path)
    if language is None:
        return []
    lo, hi = _trim(lines)
    block = Block(lines[lo:hi], lines[lo:hi], [first + i + 1 for i in range(lo, hi)], language, hint or path,
                  is_test_path(path))
    return [Found(slot.path, *_span(lines, lo, hi), "result", block, slot.tool_use_id)]


def find_in_user_text(slot: Slot, matcher: ProjectMatcher, min_lines: int) -> list[Found]:
    text = slot.text
    if text.count("\n") + 1 < min_lines:
        return []
    lines = text.split("\n")
    offsets = _offsets(lines)
    found: list[Found] = []
    outside: list[int] = []  # lines not inside a fence
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        close = _closing_fence(lines, i, m.group(1)) if m else None
        if close is None:
            outside.append(i)
            i += 1
            continue
        body = lines[i + 1:close]
        if len(body) >= min_lines:
            hints = tuple(PATHLIKE.findall(m.group(2) + " " + " ".join(lines[max(0, i - 2):i])))
            body_text = "\n".join(body)
            candidates = matcher.candidate_files(body_text, hints + tuple(PATHLIKE.findall(body_text[:4000])))
            loc = matcher.locate_whole(body, candidates)
            if loc is not None:
                lo, hi = _trim(body)
                runs = [(lo, hi, loc[0], loc[1] + lo)]
            else:
                runs = _files_in_one_fence(body, matcher.segments(body, candidates, min_lines))
            for a, b, path, first in runs:
                language = language_for_path(path)
                if language is None:
                    continue
                block = Block(body[a:b], body[a:b], [first + k + 1 for k in range(b - a)], language, path,
                              is_test_path(path))
                found.append(Found(slot.path, offsets[i + 1 + a], _end(offsets, lines, i + 1 + b), "paste", block))
        i = close + 1
    # Unfenced runs of project lines, between the fences.
    for start, end in _spans(outside):
        chunk = lines[start:end]
        if len(chunk) < min_lines:
            continue
        chunk_text = "\n".join(chunk)
        candidates = matcher.candidate_files(chunk_text, tuple(PATHLIKE.findall(chunk_text[:2000])))
        for a, b, path, first in matcher.segments(chunk, candidates, min_lines):
            language = language_for_path(path)
            if language is None:
                continue
            block = Block(chunk[a:b], chunk[a:b], [first + k + 1 for k in range(b - a)], language, path,
                          is_test_path(path))
            found.append(Found(slot.path, offsets[start + a], _end(offsets, lines, start + b), "paste", block))
    found.sort(key=lambda f: f.start)
    return found


def _files_in_one_fence(body: list[str], segments: list[tuple[int, int, str, int]]) -> list[tuple[int, int, str, int]]:
    """Several files pasted in one fence count only when nothing else is in it: every line
    outside the runs of project lines is blank or a label naming a file."""
    covered = set()
    for a, b, _, _ in segments:
        covered.update(range(a, b))
    for k, line in enumerate(body):
        if k not in covered and line.strip() and not _LABEL_LINE.match(line):
            return []
    return segments


# A tool result's lines and numbered run, by its exact text: the same read comes back whole when
# an agent reads a file again, a conversation restarts from an earlier turn, or several agents
# read one file, and splitting and matching every line of it again costs about as much as the
# rest of finding it.  Bounded by the characters of the texts held: with their lines and runs an
# entry takes about five bytes a character beside its text (measured on sympy reads), so the bound
# is about 50 MB; it holds the last ~350 reads of 22 KB, the distance at which 32 concurrent agents
# of the proxy bench meet each other's reads of a file again.
MAX_RUN_CHARS = 8_000_000
_runs = SizedLRU(None, MAX_RUN_CHARS)


def _lines_and_run(text: str) -> tuple[list[str], tuple | None]:
    """``text``'s lines and :func:`_numbered_run` of them, remembered by the text.  The lists
    handed out are shared between hits: callers only read them (a Block slices its display lines,
    and its code and numbers are never changed)."""
    hit = _runs.get(text)
    if hit is None:
        lines = text.split("\n")
        hit = (lines, _numbered_run(lines))
        _runs.put(text, hit, len(text))
    return hit


def _numbered_run(lines: list[str]):
    """The longest run of consecutively numbered lines (the first of equally long ones):
    (first, end excl., numbers, code).  Every line is matched once, up front, and its number
    read by one comprehension; a read that is one run from top to bottom (the usual tool
    result) is recognised by one list comparison, anything else by where the numbering breaks."""
    found = list(map(_NUMBERED.match, lines))
    n = len(found)
    if not n:
        return None
    # An unnumbered line gets a number no line can follow, and that follows no line.
    nums = [int(m[2]) if m is not None else _NO_NUMBER for m in found]
    if nums[0] != _NO_NUMBER and nums == list(range(nums[0], nums[0] + n)):
        best = (0, n) if n >= MIN_NUMBERED_LINES else None
    else:
        best = None
        breaks = [k for k in range(1, n) if nums[k] != nums[k - 1] + 1]
        start = 0
        for end in breaks + [n]:
            if nums[start] != _NO_NUMBER and end - start >= MIN_NUMBERED_LINES \
                    and (best is None or end - start > best[1] - best[0]):
                best = (start, end)
            start = end
    if best is None:
        return None
    i, j = best
    return i, j, nums[i:j], [m[4] for m in found[i:j]]


_NO_NUMBER = -10


def _closing_fence(lines: list[str], i: int, marker: str) -> int | None:
    for k in range(i + 1, len(lines)):
        m = _FENCE.match(lines[k])
        if m and m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker) and not m.group(2).strip():
            return k
    return None


def _spans(indices: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in indices:
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def _span(lines: list[str], a: int, b: int) -> tuple[int, int]:
    """Char offsets of lines ``a`` to ``b`` (excl.) in the text ``lines`` were split from, their
    last line break left out (as :func:`_offsets` and :func:`_end` give them): a tool result
    needs only where its run starts and ends, not every line's offset."""
    start = sum(map(len, lines[:a])) + a
    return start, (start + sum(map(len, lines[a:b])) + b - a - 1 if b else 0)


def _offsets(lines: list[str]) -> list[int]:
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln) + 1)
    return offsets


def _end(offsets: list[int], lines: list[str], b: int) -> int:
    """Char offset just after line ``b - 1`` (its line break excluded)."""
    return offsets[b] - 1 if b > 0 else 0


def _trim(lines: list[str]) -> tuple[int, int]:
    lo, hi = 0, len(lines)
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return lo, hi


def _path_and_language(path: str | None) -> tuple[str | None, str | None]:
    if not path:
        return None, None
    return path, language_for_path(path)


def _hints(path: str | None, use: ToolUse | None) -> tuple[str, ...]:
    hints = [path] if path else []
    if use is not None and use.text:
        hints.extend(PATHLIKE.findall(use.text[:2000]))
    return tuple(hints)


# ``sed -n '120,180p' file`` (Codex's usual way to read part of a file; ``120,$p`` to the end).
_SED_RANGE = re.compile(r"""\bsed\s+-n\s+(?:'|\\?")?\s*(\d+)\s*,\s*(?:\d+|\$)\s*p\b""")


def _printed_from(use: ToolUse | None) -> int | None:
    """The 0-based file line an unnumbered read starts at, when its command printed one range of
    lines with ``sed -n 'A,Bp'``; None when it says nothing of where (``cat``) or names several."""
    if use is None or "sed" not in use.text:
        return None
    found = _SED_RANGE.findall(use.text)
    if len(found) != 1:
        return None
    return max(int(found[0]) - 1, 0)


def _relative(path: str) -> str:
    return path.replace("\\", "/").lstrip("/")
