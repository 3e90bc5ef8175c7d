"""Documents of a folder and how each is cut into search chunks (Kura databases).

- Which files: every regular file under the folder except hidden ones,
  vendored/generated directories, ``.gitignore``d paths, known binary
  extensions, symlinks that lead outside the folder, and files whose first
  8 KiB hold a NUL byte or invalid UTF-8.  Each one left out is reported
  with its reason, as MemStrata's scanner does.
- Prose (Markdown, plain text, anything unrecognised): one chunk per
  paragraph, paragraphs separated by blank lines; a Markdown heading joins
  the paragraph under it, a fenced code block is never cut at its blank
  lines, and a paragraph longer than :data:`MAX_PROSE_CHARS` is cut at
  sentence ends.
- CSV/TSV: one chunk per record (quoted newlines stay inside their record);
  a record longer than :data:`MAX_PROSE_CHARS` is cut like a long paragraph.
- Code (a language :mod:`indexer.languages` parses): one chunk per
  top-level definition, found by tree-sitter, with the comment lines right
  above it; a definition longer than :data:`MAX_CODE_CHARS` is cut into its
  nested definitions (a class into its methods), and the lines between
  definitions (imports, module code) are chunked like prose.

Chunks keep their text verbatim (no re-wrapping), are never blank, and come
out in file order; callers number them from 1.
"""

from __future__ import annotations

import codecs
import csv
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memstrata.indexer.languages import language_for_path, language_of
from memstrata.indexer.parse import parse_source
from memstrata.indexer.scan import (EXCLUDED, IGNORED, NAME_NOT_UTF8, OUTSIDE, UNREADABLE, PathFilter, is_excluded_dir,
                                    is_utf8_path, printable_path)

MAX_PROSE_CHARS = 1500
MAX_CODE_CHARS = 4000
# How documents are cut.  A store records the version its chunks were cut
# with; a full sync re-cuts every document of a store cut by another one, so a
# change here reaches existing databases, not only files edited afterwards.
# 2: a table record longer than MAX_PROSE_CHARS is cut like a long paragraph.
CHUNKING_VERSION = 2
# Small neighbouring gap paragraphs in code (an import block, a constant) are
# packed together up to this size rather than becoming one chunk each.
PACK_CHARS = 600
DEFAULT_MAX_DOC_BYTES = 8 * 1024 * 1024
BINARY_PROBE = 8192

# Skip reasons for documents (the scanner's EXCLUDED / IGNORED also apply).
BINARY = "binary"
HIDDEN = "hidden"
TOO_LARGE = "too_large"

BINARY_EXTENSIONS = frozenset(
    """
    png jpg jpeg gif bmp ico icns tif tiff webp heic psd svgz
    mp3 wav flac ogg m4a aac mp4 m4v mov avi mkv webm
    zip gz tgz bz2 xz zst 7z rar tar jar war whl egg apk dmg iso
    pdf doc docx xls xlsx ppt pptx odt ods odp epub
    exe dll so dylib a o obj lib bin class pyc pyo pyd wasm
    ttf otf woff woff2 eot
    sqlite sqlite3 db db-wal db-shm parquet feather npy npz pkl pickle h5
    """.split()
)
_TEMP_SUFFIXES = ("~", ".swp", ".swo", ".tmp", ".part", ".crdownload")


class SkipDocument(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True, frozen=True)
class Document:
    path: str  # relative to the folder, POSIX
    size: int
    mtime_ns: int


@dataclass(slots=True)
class Chunked:
    kind: str  # prose | table | code:<language>
    chunks: list[str]


# -- which files ------------------------------------------------------------------


class DocumentFilter(PathFilter):
    """Decides for one relative path whether it is a document of the folder.

    ``reserved``: a folder never indexed (the Kura home, when a registered folder holds it:
    the daemon's own log and databases would otherwise be indexed, and every write to them
    would wake the watcher for another write)."""

    def __init__(self, root: Path, reserved: Path | None = None):
        super().__init__(root)
        self._reserved: str | None = None
        if reserved is not None:
            try:
                self._reserved = reserved.resolve().relative_to(self.root).as_posix()
            except ValueError:
                pass  # outside the folder: nothing to keep out

    def _in_reserved(self, rel: str) -> bool:
        r = self._reserved
        return r is not None and (r == "." or rel == r or rel.startswith(r + "/"))

    def excluded_reason(self, rel: str) -> str | None:
        if self._in_reserved(rel):
            return EXCLUDED
        parts = rel.split("/")
        for i, part in enumerate(parts[:-1]):
            if part.startswith("."):
                return HIDDEN
            if is_excluded_dir(part):
                return EXCLUDED
            if self._ignored("/".join(parts[: i + 1]), is_dir=True):
                return IGNORED
        name = parts[-1]
        if name.startswith(".") or name.endswith(_TEMP_SUFFIXES):
            return HIDDEN
        if _extension(name) in BINARY_EXTENSIONS:
            return BINARY
        if self._ignored(rel, is_dir=False):
            return IGNORED
        return None

    def dir_excluded_reason(self, rel_dir: str) -> str | None:
        if self._in_reserved(rel_dir):
            return EXCLUDED
        name = rel_dir.rsplit("/", 1)[-1]
        if name.startswith("."):
            return HIDDEN
        if is_excluded_dir(name):
            return EXCLUDED
        return IGNORED if self._ignored(rel_dir, is_dir=True) else None

    def dir_excluded(self, rel_dir: str) -> bool:
        return self.dir_excluded_reason(rel_dir) is not None


def _extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot + 1:].lower() if dot > 0 else ""


OnSkip = Callable[[str, str], None]
"""Called with (relative path, reason) for each entry a walk leaves out; folders end with "/"."""


def walk_documents(root: Path, flt: DocumentFilter | None = None,
                   on_skip: OnSkip | None = None) -> Iterator[Document]:
    """Every document under ``root``: directory symlinks are never followed,
    file symlinks only when they lead to a file inside ``root``."""
    root = root.resolve()
    flt = flt or DocumentFilter(root)
    skip = on_skip or (lambda _rel, _reason: None)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(root / rel_dir if rel_dir else root), key=lambda e: e.name)
        except OSError:
            skip(f"{rel_dir}/" if rel_dir else "./", UNREADABLE)
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not is_utf8_path(entry.name):  # stored and served as UTF-8 text: reported, left out
                skip(printable_path(rel), NAME_NOT_UTF8)
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    reason = flt.dir_excluded_reason(rel)
                    if reason is None:
                        stack.append(rel)
                    else:
                        skip(rel + "/", reason)
                    continue
                reason = flt.excluded_reason(rel)
                if reason is None and entry.is_symlink() and not is_inside(root, rel):
                    reason = OUTSIDE
                if reason is not None:
                    skip(rel, reason)
                    continue
                st = entry.stat()  # follows a file symlink (to a target inside root)
                regular = entry.is_file()
            except OSError:
                skip(rel, UNREADABLE)
                continue
            if regular:
                yield Document(rel, st.st_size, st.st_mtime_ns)


def is_inside(root: Path, rel: str) -> bool:
    """Whether ``root/rel``, every symlink on the way resolved, stays inside ``root`` (resolved)."""
    real = os.path.realpath(root / rel)
    base = str(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def stat_document(root: Path, rel: str) -> os.stat_result:
    """The stat of one document; SkipDocument when it resolves outside ``root``."""
    if not is_inside(root, rel):
        raise SkipDocument(OUTSIDE)
    return os.stat(root / rel)


def decode_document(data: bytes) -> str:
    """Bytes -> text, or SkipDocument(BINARY) when the first 8 KiB hold a NUL
    byte or bytes that are not UTF-8.  Bad bytes further in become U+FFFD."""
    probe = data[:BINARY_PROBE]
    if b"\x00" in probe:
        raise SkipDocument(BINARY)
    try:
        # final=False: a character cut by the probe boundary is not an error.
        codecs.getincrementaldecoder("utf-8")().decode(probe, final=len(data) <= BINARY_PROBE)
    except UnicodeDecodeError:
        raise SkipDocument(BINARY) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[3:]
    return data.decode("utf-8", "replace")


# -- how a file is cut ---------------------------------------------------------------


def chunk_document(path: str, text: str) -> Chunked:
    ext = _extension(path.rsplit("/", 1)[-1])
    if ext in ("csv", "tsv"):
        return Chunked("table", table_chunks(text, "\t" if ext == "tsv" else ","))
    language = language_for_path(path)
    if language is not None:
        language = language_of(path, language, text.encode("utf-8", "replace"))
        return Chunked(f"code:{language}", code_chunks(path, language, text))
    return Chunked("prose", prose_chunks(text, markdown=ext in ("md", "markdown", "mdx", "rst")))


_BLANK = re.compile(r"\n(?:[ \t]*\n)+")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)", re.M)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"')\]]*\s+")


def paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, keeping fenced code blocks whole."""
    blocks = [b for b in _BLANK.split(text.replace("\r\n", "\n").replace("\r", "\n"))]
    merged: list[str] = []
    open_fence = False
    for block in blocks:
        if open_fence:
            merged[-1] += "\n\n" + block
        else:
            merged.append(block)
        if len(_FENCE.findall(block)) % 2:
            open_fence = not open_fence
    return [b.strip("\n") for b in merged if b.strip()]


def prose_chunks(text: str, *, markdown: bool = True, max_chars: int = MAX_PROSE_CHARS) -> list[str]:
    out: list[str] = []
    pending_heading: str | None = None
    for para in paragraphs(text):
        if markdown and _HEADING.match(para) and "\n" not in para.strip():
            # A heading alone says little; it travels with the paragraph under it.
            pending_heading = para if pending_heading is None else pending_heading + "\n\n" + para
            continue
        if pending_heading is not None:
            para = pending_heading + "\n\n" + para
            pending_heading = None
        out.extend(split_long(para, max_chars))
    if pending_heading is not None:
        out.append(pending_heading)
    return out


def split_long(text: str, max_chars: int) -> list[str]:
    """``text`` if it fits, else pieces cut at sentence ends (then lines, then spaces)."""
    if len(text) <= max_chars:
        return [text]
    for splitter in (_SENTENCE_END, re.compile(r"\n"), re.compile(r"\s+")):
        pieces = _pack(_split_keep(text, splitter), max_chars)
        if all(len(p) <= max_chars for p in pieces):
            return pieces
    return [text[i:i + max_chars] for i in range(0, len(text), max_chars)]


def _split_keep(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Split after each match, the separator staying with the piece before it."""
    pieces, start = [], 0
    for m in pattern.finditer(text):
        pieces.append(text[start:m.end()])
        start = m.end()
    pieces.append(text[start:])
    return [p for p in pieces if p]


def _pack(pieces: list[str], max_chars: int) -> list[str]:
    out: list[str] = []
    buf = ""
    for piece in pieces:
        if buf and len(buf) + len(piece) > max_chars:
            out.append(buf.rstrip())
            buf = ""
        buf += piece
    if buf.strip():
        out.append(buf.rstrip())
    return [p for p in out if p.strip()]


def table_chunks(text: str, delimiter: str) -> list[str]:
    """One chunk per CSV/TSV record, as written in the file.

    Every kind of chunk is bounded, whatever the file holds: a record with a
    field of megabytes (an export with a document in a cell, a line that is no
    CSV at all) is cut as a long paragraph is, so a search never answers with
    a chunk of megabytes.
    """
    return [piece for record in _table_records(text, delimiter) for piece in split_long(record, MAX_PROSE_CHARS)]


def _table_records(text: str, delimiter: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    consumed: list[int] = []

    def feed() -> Iterator[str]:
        for i, line in enumerate(lines):
            consumed.append(i)
            yield line

    out: list[str] = []
    start = 0
    reader = csv.reader(feed(), delimiter=delimiter, strict=False)
    try:
        for _row in reader:
            end = consumed[-1] + 1
            record = "\n".join(lines[start:end])
            if record.strip():
                out.append(record)
            start = end
    except csv.Error:
        # Unparseable from here on (e.g. an unterminated quote): one line each.
        out.extend(line for line in lines[start:] if line.strip())
    return out


def code_chunks(path: str, language: str, text: str) -> list[str]:
    """Whole definitions where possible; see the module docstring."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    try:
        symbols = parse_source(path, language, "\n".join(lines).encode("utf-8")).symbols
    except Exception:  # a grammar problem must not lose the file
        symbols = []
    spans = sorted({(s.start_line - 1, s.end_line) for s in symbols}, key=lambda sp: (sp[0], -sp[1]))
    out: list[str] = []
    _cut(lines, 0, len(lines), spans, out)
    return [c for c in out if c.strip()]


def _cut(lines: list[str], start: int, end: int, spans: list[tuple[int, int]], out: list[str]) -> None:
    """Chunk lines[start:end] given all definition spans (0-based, end-exclusive)."""
    inner = [sp for sp in spans if sp[0] >= start and sp[1] <= end and sp != (start, end)]
    outer: list[tuple[int, int]] = []
    for sp in inner:
        if outer and sp[0] < outer[-1][1]:
            continue  # nested in (or overlapping) the previous outer definition
        outer.append(sp)
    gap_start = start
    for def_start, def_end in outer:
        head = _leading_comments(lines, gap_start, def_start)
        _gap(lines, gap_start, head, out)
        body_len = sum(len(line) + 1 for line in lines[head:def_end])
        if body_len <= MAX_CODE_CHARS:
            out.append("\n".join(lines[head:def_end]).strip("\n"))
        elif any(sp[0] >= def_start and sp[1] <= def_end and sp != (def_start, def_end) for sp in inner):
            # Header (signature, docstring, fields) and the nested definitions.
            _cut_nested(lines, head, def_start, def_end, inner, out)
        else:
            out.extend(split_long("\n".join(lines[head:def_end]).strip("\n"), MAX_CODE_CHARS))
        gap_start = def_end
    _gap(lines, gap_start, end, out)


def _cut_nested(lines, head, def_start, def_end, spans, out) -> None:
    nested = [sp for sp in spans if sp[0] >= def_start and sp[1] <= def_end and sp != (def_start, def_end)]
    first = min(sp[0] for sp in nested)
    first = _leading_comments(lines, def_start + 1, first)
    # The lines up to the first nested definition name the container, so
    # they stay one chunk even if short.
    out.extend(split_long("\n".join(lines[head:first]).strip("\n"), MAX_CODE_CHARS))
    _cut(lines, first, def_end, spans, out)


def _leading_comments(lines: list[str], lo: int, def_start: int) -> int:
    """Index of the first line of the comment block directly above ``def_start``."""
    i = def_start
    while i > lo and lines[i - 1].strip().startswith(("#", "//", "/*", "*", "--", ";")) \
            and not lines[i - 1].strip().startswith("#!"):
        i -= 1
    return i


def _gap(lines: list[str], start: int, end: int, out: list[str]) -> None:
    if start >= end:
        return
    paras = paragraphs("\n".join(lines[start:end]))
    buf = ""
    for para in paras:
        if buf and len(buf) + len(para) + 2 > PACK_CHARS:
            out.extend(split_long(buf, MAX_CODE_CHARS))
            buf = ""
        buf = f"{buf}\n\n{para}" if buf else para
    if buf:
        out.extend(split_long(buf, MAX_CODE_CHARS))


def read_document(root: Path, rel: str, max_bytes: int = DEFAULT_MAX_DOC_BYTES) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of one document; SkipDocument when it is too large
    or resolves outside ``root``."""
    st = stat_document(root, rel)
    if st.st_size > max_bytes:
        raise SkipDocument(TOO_LARGE)
    with open(root / rel, "rb") as fh:
        return fh.read(), st


__all__ = [
    "Document", "Chunked", "DocumentFilter", "SkipDocument", "walk_documents", "decode_document",
    "read_document", "stat_document", "is_inside", "OnSkip", "chunk_document", "prose_chunks", "table_chunks", "code_chunks", "paragraphs",
    "split_long", "MAX_PROSE_CHARS", "MAX_CODE_CHARS", "CHUNKING_VERSION", "BINARY", "HIDDEN", "TOO_LARGE",
    "BINARY_EXTENSIONS",
]
