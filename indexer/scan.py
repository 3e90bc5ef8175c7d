"""Which files of a project get indexed, and why the others do not.

The walk never follows directory symlinks (so symlink loops cannot trap it),
honours ``.gitignore`` files at every level, skips vendored and generated
directories, and reports every source file it leaves out with a reason.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .languages import language_for_path

if TYPE_CHECKING:
    import pathspec

DEFAULT_MAX_FILE_BYTES = 1024 * 1024
INDEX_DIR = ".memstrata"

EXCLUDED_DIRS = frozenset(
    {
        INDEX_DIR, ".git", ".hg", ".svn", "node_modules", "bower_components", ".venv", "venv",
        "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
        "dist", "build", "target", "vendor", "third_party", ".next", ".nuxt", ".gradle",
        ".idea", ".vscode", "site-packages", ".terraform", ".cache",
    }
)

# Skip reasons, as stored and reported.
BINARY = "binary"
TOO_LARGE = "too_large"
UNREADABLE = "unreadable"
IGNORED = "gitignored"
EXCLUDED = "excluded_dir"
UNSUPPORTED = "unsupported_language"
OUTSIDE = "symlink_outside_project"
VANISHED = "vanished"
PARSE_TIMEOUT = "parse_timeout"  # the parser could not finish the file in time (see indexer/parse.py)
NAME_NOT_UTF8 = "name_not_utf8"
NOT_A_FILE = "not_a_regular_file"  # a FIFO, socket or device named like source: never opened (a FIFO would block)


@dataclass(slots=True, frozen=True)
class Candidate:
    path: str  # project-relative, POSIX
    language: str
    size: int
    mtime_ns: int
    link_to: str | None = None  # a symlink's target inside the project (project-relative)


@dataclass(slots=True)
class ScanResult:
    files: list[Candidate] = field(default_factory=list)
    skipped: list[tuple[str, str, int | None]] = field(default_factory=list)  # (path, reason, size)

    def skipped_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, reason, _ in self.skipped:
            counts[reason] = counts.get(reason, 0) + 1
        return counts


def _gitignore_spec(lines: list[str]) -> pathspec.PathSpec:
    # pathspec is imported when a project's files are walked, not by every process that only
    # needs this module's names: a one-shot query answered by the daemon pays its start up, and
    # pathspec's import is about 28 ms of it.
    import pathspec

    from .ignore_patterns import bound

    # A cloned repository's .gitignore is input like its code: matched in time linear in a name.
    return bound(pathspec.GitIgnoreSpec.from_lines(lines))


class _Ignores:
    """The stack of .gitignore specs that apply to the directory being walked."""

    def __init__(self, root: Path):
        self.root = root
        self.specs: list[tuple[str, pathspec.PathSpec]] = []
        for rel in (".git/info/exclude",):
            self._load("", root / rel)

    def _load(self, prefix: str, file: Path) -> bool:
        try:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return False
        spec = _gitignore_spec(lines)
        self.specs.append((prefix, spec))
        return True

    def push_dir(self, rel_dir: str, abs_dir: Path) -> bool:
        prefix = rel_dir + "/" if rel_dir else ""
        return self._load(prefix, abs_dir / ".gitignore")

    def pop(self) -> None:
        self.specs.pop()

    def ignored(self, rel: str, is_dir: bool) -> bool:
        result = False
        for prefix, spec in self.specs:
            if prefix and not rel.startswith(prefix):
                continue
            sub = rel[len(prefix):] + ("/" if is_dir else "")
            # Later (deeper) files override earlier ones, negations included.
            r = spec.check_file(sub)
            if r.include is not None:
                result = r.include
        return result


def is_excluded_dir(name: str) -> bool:
    return name in EXCLUDED_DIRS or name.endswith(".egg-info")


def scan_project(root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> ScanResult:
    root = root.resolve()
    result = ScanResult()
    ignores = _Ignores(root)
    _walk(root, "", str(root), ignores, max_file_bytes, result)
    result.files.sort(key=lambda c: c.path)
    return result


def _walk(root: Path, rel_dir: str, abs_dir: str, ignores: _Ignores, cap: int, out: ScanResult) -> None:
    try:
        entries = sorted(os.scandir(abs_dir), key=_entry_name)
    except OSError:
        out.skipped.append((rel_dir or ".", UNREADABLE, None))
        return
    # Most directories have no .gitignore: its name in the listing spares a
    # failed open per directory (a third of the walk on deep, wide trees).
    pushed = any(e.name == ".gitignore" for e in entries) and ignores.push_dir(rel_dir, Path(abs_dir))
    try:
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not is_utf8_path(entry.name):
                # The index, its answers and the MCP wire all carry paths as UTF-8 text; a name
                # that is not (bytes a Latin-1 or Shift-JIS system wrote) is reported, shown with
                # U+FFFD for its undecodable bytes, and left out with everything under it.
                out.skipped.append((printable_path(rel), NAME_NOT_UTF8, None))
                continue
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                out.skipped.append((rel, UNREADABLE, None))
                continue
            if is_link and _is_dir_link(entry):
                # Never walked (no loops): one inside the project is walked under its real path;
                # one leading outside is reported as such, like a file symlink leading outside.
                if not _inside(root, entry.path):
                    out.skipped.append((rel + "/", OUTSIDE, None))
                continue
            if is_dir:
                if is_excluded_dir(entry.name):
                    out.skipped.append((rel + "/", EXCLUDED, None))
                elif ignores.ignored(rel, is_dir=True):
                    out.skipped.append((rel + "/", IGNORED, None))
                else:
                    _walk(root, rel, entry.path, ignores, cap, out)
                continue
            _consider_file(root, rel, entry, is_link, ignores, cap, out)
    finally:
        if pushed:
            ignores.pop()


def _entry_name(entry: os.DirEntry) -> str:
    return entry.name


def _is_dir_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:  # a dangling link or a loop: _consider_file reports it
        return False


def _inside(root: Path, path: str) -> bool:
    return link_target(root, path) is not None


def is_utf8_path(path: str) -> bool:
    """Whether a path from the file system is valid UTF-8 (Python keeps undecodable bytes of a
    name as lone surrogates, which no UTF-8 encoder, SQLite's included, accepts)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_not_utf8(rel: str) -> str:
    """The path down to the first name in ``rel`` that is not UTF-8, as the walk lists it (it
    enters nothing under such a folder)."""
    parts = rel.split("/")
    for i, part in enumerate(parts):
        if not is_utf8_path(part):
            return printable_path("/".join(parts[: i + 1]))
    return printable_path(rel)


def printable_path(path: str) -> str:
    """``path`` with each undecodable byte of its name shown as U+FFFD."""
    return os.fsencode(path).decode("utf-8", "replace")


def _consider_file(root, rel, entry, is_link, ignores, cap, out: ScanResult) -> None:
    language = language_for_path(entry.name)
    if ignores.ignored(rel, is_dir=False):
        if language:
            out.skipped.append((rel, IGNORED, None))
        return
    if language is None:
        out.skipped.append((rel, UNSUPPORTED, None))
        return
    link = link_target(root, entry.path) if is_link else None
    if is_link and link is None:
        # A symlinked file is indexed only when it points inside the project; one pointing
        # outside is never opened, whether its target exists or not (as the watcher lists it).
        out.skipped.append((rel, OUTSIDE, None))
        return
    try:
        st = os.stat(entry.path)  # follows file symlinks; ELOOP on a loop
    except OSError:
        out.skipped.append((rel, UNREADABLE if is_link else VANISHED, None))
        return
    if not stat.S_ISREG(st.st_mode):
        out.skipped.append((rel, NOT_A_FILE, None))
        return
    if st.st_size > cap:
        out.skipped.append((rel, TOO_LARGE, st.st_size))
        return
    out.files.append(Candidate(rel, language, st.st_size, st.st_mtime_ns, link))


def link_target(root: Path, path: str) -> str | None:
    """The project-relative path ``path`` resolves to (a symlink's target), None outside the project."""
    try:
        return Path(os.path.realpath(path)).relative_to(root).as_posix()
    except ValueError:
        return None


# -- reading one file ---------------------------------------------------------

_BINARY_PROBE = 8192


class SkipFile(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def decode_source(data: bytes) -> tuple[str, str]:
    """Bytes of a source file -> (text, encoding name); raises SkipFile for binaries.

    UTF-8 first (with or without BOM).  Files that are mostly UTF-8 with a few
    stray bytes keep their UTF-8 text with U+FFFD in place of the bad bytes;
    anything else is read as Windows-1252, whose decoding never fails.
    """
    if b"\x00" in data[:_BINARY_PROBE]:
        raise SkipFile(BINARY)
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace"), "utf-8-sig"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    high = sum(1 for b in data if b >= 0x80)
    if high and bad * 4 < high:  # most high bytes formed valid UTF-8 sequences
        return text, "utf-8+replaced"
    if _looks_binary(data):
        raise SkipFile(BINARY)
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def _looks_binary(data: bytes) -> bool:
    probe = data[:_BINARY_PROBE]
    if not probe:
        return False
    control = sum(1 for b in probe if b < 0x20 and b not in (9, 10, 12, 13))
    return control * 20 > len(probe)


# Test scaffolding: helpers only the tests import, in the common spellings.
_SCAFFOLDING = {"testutil", "testutils", "test_util", "test_utils", "test-util", "test-utils",
                "testhelper", "testhelpers", "test_helpers", "test-helpers"}
_TEST_DIRS = {"test", "tests", "__tests__", "spec", "specs", "testing", "testdata", *_SCAFFOLDING,
              # what JavaScript test runners read beside the code: Jest's manual mocks, the
              # input/output pairs of codemod tests, fixtures
              "__mocks__", "__testfixtures__", "__fixtures__"}
# A monorepo's package of scaffolding is named for its project (`shop-test-utils/`).
_SCAFFOLDING_SUFFIXES = tuple(sep + s for sep in "-_" for s in _SCAFFOLDING)
# The same scaffolding as one file beside the code (`src/test-utils.ts`, `testutil.go`,
# `TestUtils.java`); a `test_utils.py` already is a test by its prefix.
_TEST_STEMS = {"conftest", "tests", "test",
               *(f"{t}{s}" for t in ("test", "test-", "Test") for s in ("util", "utils", "helper", "helpers")),
               *(f"{t}{s}" for t in ("test", "Test") for s in ("Util", "Utils", "Helper", "Helpers"))}


# A .NET solution's test project is a folder named for the project it tests (`Shop.Tests/`,
# `Shop.UnitTests/`); folder names are compared without case (PHP and .NET write `Tests/`).
_TEST_PROJECT_SUFFIXES = (".tests", ".test", ".unittests", ".integrationtests", ".functionaltests", ".specs",
                          ".testing", ".testutils")


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    for part in parts[:-1]:
        folder = part.lower()
        if folder in _TEST_DIRS or folder.endswith(_SCAFFOLDING_SUFFIXES) or folder.endswith(_TEST_PROJECT_SUFFIXES):
            return True
    name = parts[-1]
    stem = name.rsplit(".", 1)[0]
    return (
        stem.startswith("test_")
        # `.test-d` / `.spec-d`: TypeScript type tests (tsd, vitest's typecheck), which
        # assert what the declarations accept and are run by the test tools only
        # `_tests`: a file of unit tests the module beside it pulls in (Rust's
        # `#[cfg(test)] mod dispatcher_tests;`), named as the language names such a module
        or stem.endswith(("_test", "_tests", "_spec", "Test", "Tests", ".test", ".spec", ".test-d", ".spec-d"))
        or stem in _TEST_STEMS
    )


# Rust keeps unit tests inside the source file they test, in a module the
# language's convention names `tests` (`#[cfg(test)] mod tests { .. }`); what
# such a module holds is test code although its file is not.
_TEST_MODULE_LANGUAGES = {"rust"}


def shared_dirs(a: str, b: str) -> int:
    """How many leading directories two project paths have in common (``a/b/x.py`` and
    ``a/c/y.py``: 1)."""
    da, db = a.split("/")[:-1], b.split("/")[:-1]
    shared = 0
    while shared < min(len(da), len(db)) and da[shared] == db[shared]:
        shared += 1
    return shared


def is_test_module(language: str | None, kind: str, name: str) -> bool:
    """Whether a definition is a module of inline tests inside a source file."""
    return (language in _TEST_MODULE_LANGUAGES and kind == "module"
            and (name in ("test", "tests") or name.startswith("test_") or name.endswith("_test")
                 or name.endswith("_tests")))


class PathFilter:
    """Classifies single paths the way :func:`scan_project` would (for the watcher).

    ``.gitignore`` specs are cached per directory; call :meth:`clear` when a
    ``.gitignore`` changes.
    """

    def __init__(self, root: Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES):
        self.root = root.resolve()
        self.cap = max_file_bytes
        self._specs: dict[str, pathspec.PathSpec | None] = {}

    def clear(self) -> None:
        self._specs.clear()

    def _spec(self, rel_dir: str) -> pathspec.PathSpec | None:
        if rel_dir not in self._specs:
            file = self.root / rel_dir / ".gitignore" if rel_dir else self.root / ".gitignore"
            try:
                lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
                self._specs[rel_dir] = _gitignore_spec(lines)
            except OSError:
                self._specs[rel_dir] = None
        return self._specs[rel_dir]

    def _ignored(self, rel: str, is_dir: bool) -> bool:
        parts = rel.split("/")
        result = False
        for depth in range(len(parts)):
            rel_dir = "/".join(parts[:depth])
            spec = self._spec(rel_dir)
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            r = spec.check_file(sub)
            if r.include is not None:
                result = r.include
        return result

    def excluded_reason(self, rel: str) -> str | None:
        """Why ``rel`` (a file path) is outside the index, or None if it belongs in it."""
        entry = self.excluded_entry(rel)
        return None if entry is None else entry[1]

    def excluded_entry(self, rel: str) -> tuple[str | None, str] | None:
        """(what a full scan lists for it, or None when it lists nothing; why) when ``rel`` (a
        file path) is outside the index, or None if it belongs in it.  As the walk lists them:
        a file in an excluded or ignored folder as the folder (``build/``, never entered), an
        ignored file only when its language is one the index reads."""
        if not is_utf8_path(rel):
            return _first_not_utf8(rel), NAME_NOT_UTF8
        parts = rel.split("/")
        held = self.folder_entry("/".join(parts[:-1])) if len(parts) > 1 else None
        if held is not None:
            return held
        path = os.path.join(self.root, rel)
        if os.path.islink(path) and os.path.isdir(path):  # a folder link, never walked (see _walk)
            return None if _inside(self.root, path) else (rel + "/", OUTSIDE)
        language = language_for_path(parts[-1])
        if self._ignored(rel, is_dir=False):
            return (rel if language else None), IGNORED
        if language is None:
            return rel, UNSUPPORTED
        if not _inside(self.root, path):  # a file link, or a path through a folder link, leading outside
            return rel, OUTSIDE
        return None

    def folder_entry(self, rel: str) -> tuple[str, str] | None:
        """(what a full scan lists, why) for the folder ``rel`` when the walk does not enter it."""
        if not is_utf8_path(rel):
            return _first_not_utf8(rel), NAME_NOT_UTF8
        parts = rel.split("/")
        for i, part in enumerate(parts):
            folder = "/".join(parts[: i + 1])
            if is_excluded_dir(part):
                return folder + "/", EXCLUDED
            if self._ignored(folder, is_dir=True):
                return folder + "/", IGNORED
        return None
