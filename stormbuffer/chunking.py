"""A record body cut into retrieval chunks of at most 160 words (Stormbuffer's rules).

1. The body is split into sections line by line: a fenced block is one
   atomic section; an ATX heading ends the current section and moves the
   heading path (the heading line itself is in no chunk); a blank line ends
   the current section; a list-start line (``- ``, ``* ``, ``+ ``, or a first
   word ending in ``.``) opens an atomic section that runs to the next blank
   line.
2. Sections are packed: atomic ones stand alone whatever their length, a
   plain section over 160 words is cut into 160-word pieces, and consecutive
   plain sections under the same heading path are joined with a blank line
   (counted as one word) while they fit in 160 words.

Each chunk's retrieval text (what full-text search sees) is the title, the
heading path, aliases, tags and file name, then the chunk text; only the
chunk text is ever quoted back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHUNK_WORDS = 160
_HEADING = re.compile(r"(#{1,6})\s(.*)")


@dataclass(slots=True)
class Section:
    heading: str
    text: str
    atomic: bool


@dataclass(slots=True, frozen=True)
class Chunk:
    ordinal: int
    heading: str
    text: str


def _is_list_start(stripped: str) -> bool:
    if stripped.startswith(("- ", "* ", "+ ")):
        return True
    first = stripped.split(" ", 1)[0]
    return first.endswith(".")


def sections(body: str) -> list[Section]:
    lines = [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]
    out: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: list[str] = []

    def path() -> str:
        return " / ".join(text for _, text in stack)

    def flush() -> None:
        if current:
            out.append(Section(path(), "\n".join(current), False))
            current.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            flush()
            fence = stripped[0] * 3
            block = [line]
            i += 1
            while i < len(lines):
                block.append(lines[i])
                i += 1
                if lines[i - 1].lstrip().startswith(fence):
                    break
            out.append(Section(path(), "\n".join(block), True))
            continue
        heading = _HEADING.fullmatch(stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).strip().rstrip("#").strip()))
            i += 1
            continue
        if not stripped.strip():
            flush()
            i += 1
            continue
        if _is_list_start(stripped):
            flush()
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out.append(Section(path(), "\n".join(block), True))
            continue
        current.append(line)
        i += 1
    flush()
    return out


def chunk_body(body: str) -> list[Chunk]:
    pieces: list[tuple[str, str]] = []
    pending: list[object] | None = None  # [heading, text, words]

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            pieces.append((pending[0], pending[1]))  # type: ignore[arg-type]
            pending = None

    for sec in sections(body):
        words = sec.text.split()
        if sec.atomic:
            flush()
            pieces.append((sec.heading, sec.text))
        elif len(words) > MAX_CHUNK_WORDS:
            flush()
            for start in range(0, len(words), MAX_CHUNK_WORDS):
                pieces.append((sec.heading, " ".join(words[start:start + MAX_CHUNK_WORDS])))
        elif (pending is not None and pending[0] == sec.heading
              and pending[2] + 1 + len(words) <= MAX_CHUNK_WORDS):  # type: ignore[operator]
            pending[1] = f"{pending[1]}\n\n{sec.text}"
            pending[2] += 1 + len(words)  # type: ignore[operator]
        else:
            flush()
            pending = [sec.heading, sec.text, len(words)]
    flush()
    kept = [(h, t) for h, t in pieces if t.split()]
    return [Chunk(n, h, t) for n, (h, t) in enumerate(kept)]


def retrieval_text(title: str, heading: str, aliases: list[str], tags: list[str], file_name: str,
                   text: str) -> str:
    return "\n".join((title, heading, " ".join(aliases), " ".join(tags), file_name, text))


__all__ = ["MAX_CHUNK_WORDS", "Section", "Chunk", "sections", "chunk_body", "retrieval_text"]
