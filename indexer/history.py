"""What the project's recent history changed: lines, with how many commits ago.

Code a project changed lately is likelier to be what a question is about
than code untouched for years: work comes in series (a fix, then its
follow-up; a feature over several commits), and an agent is usually asked
about the task at hand, whose files its user has been editing.  So the
ranking can use, per definition, how recently its lines changed.

The source is git, read from the project's own checkout: the newest
``RECENT_COMMITS`` commits reachable from HEAD (merges left out, their
changes come with the commits they merge) and the working tree's own
changes against HEAD.  Each commit's changed lines are carried forward
through every later commit, so that a line range always names lines of the
file *as it is now* (the text the index holds): lines a later commit
rewrote take the later age, lines it moved shift with it.  Ages count
commits: 0 is an uncommitted change, 1 the HEAD commit, 2 its parent, ...

Nothing here ever writes to the repository, runs a hook or a diff driver
(``--no-ext-diff``, ``--no-textconv``, no fsmonitor, no optional locks), or
follows a file outside the project folder (``--relative``, pathspec ``.``).
A folder that is not a git checkout, a git that is missing, refuses the
folder or takes too long, gives no history: everything then ranks as it
would without it.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import logging
import os
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

RECENT_COMMITS = 30  # commits of history read (beyond them, recency says little)
MAX_OUTPUT_BYTES = 32 * 1024 * 1024  # a history of mass rewrites is cut here: its newest part is what counts
GIT_TIMEOUT = 20.0  # seconds; a git that takes longer gives no history
HISTORY_NAME = "history"  # the derived object kept beside the index
_MAGIC = b"MSHIST01"
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class _Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int


@dataclass
class RecentChanges:
    """Changed line ranges per file (current coordinates, 1-based, inclusive)
    with their age in commits; ``head`` is the commit they were read at."""

    head: str | None = None
    worktree: str = ""  # digest of the working tree's diff against HEAD
    lines: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # path -> sorted (start, end, age)
    _ends: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    def age_of(self, path: str, start: int, end: int) -> int | None:
        """The age of the newest change inside lines ``start..end`` of ``path``, or None."""
        ranges = self.lines.get(path)
        if not ranges:
            return None
        ends = self._ends.get(path)
        if ends is None:
            ends = self._ends[path] = [e for _, e, _ in ranges]
        best = None
        # Ranges are sorted by start and never overlap, so the first one that
        # may reach ``start`` is found by its end.
        for i in range(bisect.bisect_left(ends, start), len(ranges)):
            s, e, age = ranges[i]
            if s > end:
                break
            if best is None or age < best:
                best = age
        return best

    def file_age(self, path: str) -> int | None:
        """The age of the newest change anywhere in ``path``, or None."""
        ranges = self.lines.get(path)
        return min(a for _, _, a in ranges) if ranges else None

    def state(self) -> dict:
        return {"head": self.head, "worktree": self.worktree,
                "lines": {p: [x for r in rs for x in r] for p, rs in self.lines.items()}}

    @classmethod
    def from_state(cls, state: object) -> RecentChanges | None:
        if not isinstance(state, dict) or not isinstance(state.get("lines"), dict):
            return None
        lines = {}
        for path, flat in state["lines"].items():
            if not isinstance(flat, list) or len(flat) % 3:
                return None
            lines[path] = [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
        return cls(state.get("head"), state.get("worktree") or "", lines)


def _git(root: Path, *args: str, limit: int = MAX_OUTPUT_BYTES) -> bytes | None:
    """Output of a read-only git command in ``root``; None when git is
    missing, fails or times out.  Output past ``limit`` bytes is cut off."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_EXTERNAL_DIFF"):
        env.pop(var, None)  # the project's own repository, whatever the caller's shell points at
    cmd = ["git", "-C", str(root), "-c", "core.fsmonitor=false", "-c", "core.quotepath=off",
           "-c", "diff.noprefix=false", "-c", "color.ui=false", *args]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, env=env)
    except OSError:
        return None
    # A git that hangs (a lock, a network filesystem) is killed; reading then ends.
    timer = threading.Timer(GIT_TIMEOUT, proc.kill)
    timer.daemon = True
    timer.start()
    chunks, size = [], 0
    try:
        assert proc.stdout is not None
        while size < limit:
            chunk = proc.stdout.read(min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        cut = size >= limit
        if cut:
            proc.kill()
        proc.wait()
    finally:
        timer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    if proc.returncode != 0 and not cut:
        return None  # failed, or killed for taking too long
    return b"".join(chunks)


def head_commit(root: Path) -> str | None:
    out = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", limit=4096)
    text = out.decode("ascii", "replace").strip() if out else ""
    return text if re.fullmatch(r"[0-9a-f]{40,64}", text) else None


_DIFF_OPTIONS = ("-U0", "--no-ext-diff", "--no-textconv", "--no-renames", "--no-color", "--relative")


def _parse_patches(data: bytes) -> list[dict[str, list[_Hunk]]]:
    """Per commit (in output order), the hunks of each file it changed.  A
    working-tree diff is one "commit".  A file's header lines come between
    its ``diff --git`` line and its first hunk; after that every line is
    hunk content until the next file or commit (an added line "++ x" reads
    "+++ x" there, and is no file name).  Files whose path git had to quote
    (control characters, quotes) are left out: they cannot be matched."""
    commits: list[dict[str, list[_Hunk]]] = []
    current: dict[str, list[_Hunk]] | None = None
    path: str | None = None
    in_header = False
    for line in data.split(b"\n"):
        if line.startswith(b"\x00commit"):
            current = {}
            commits.append(current)
            path, in_header = None, False
            continue
        if line.startswith(b"diff --git "):
            if current is None:
                current = {}
                commits.append(current)
            path, in_header = None, True
            continue
        if in_header and line.startswith(b"+++ "):
            target = line[4:]
            path = target[2:].decode("utf-8", "replace") if target.startswith(b"b/") else None
        elif line.startswith(b"@@ ") and (in_header or path is not None):
            in_header = False
            m = _HUNK.match(line)
            if m and path is not None and current is not None:
                current.setdefault(path, []).append(_Hunk(int(m[1]), int(m[2] or b"1"), int(m[3]), int(m[4] or b"1")))
    return commits


def _carry(ranges: list[list[int]], hunks: list[_Hunk]) -> list[list[int]]:
    """``ranges`` ([start, end, age] in the file's old lines) carried through
    one change of the file (``hunks`` sorted by old line): lines the change
    rewrote or removed drop out (its own lines take their place), a range it
    inserted lines into splits around them, and every piece shifts by what
    the hunks before it added or removed."""
    if not hunks:
        return ranges
    out: list[list[int]] = []
    for start, end, age in ranges:
        pieces = [(start, end)]
        for h in hunks:
            if h.old_len == 0:  # inserted after old line old_start
                pieces = [q for s, e in pieces for q in ((s, h.old_start), (h.old_start + 1, e))
                          if q[0] <= q[1]] if start <= h.old_start < end else pieces
            else:
                pieces = _remove(pieces, h.old_start, h.old_start + h.old_len - 1)
        for s, e in pieces:
            shift = _shift_before(hunks, s)
            out.append([s + shift, e + shift, age])
    return out


def _remove(pieces: list[tuple[int, int]], first: int, last: int) -> list[tuple[int, int]]:
    out = []
    for s, e in pieces:
        if e < first or s > last:
            out.append((s, e))
            continue
        if s < first:
            out.append((s, first - 1))
        if e > last:
            out.append((last + 1, e))
    return out


def _shift_before(hunks: list[_Hunk], line: int) -> int:
    """How far old line ``line`` (kept by every hunk) moves: what the hunks
    before it added minus what they removed."""
    shift = 0
    for h in hunks:
        if h.old_len == 0:
            if h.old_start < line:
                shift += h.new_len
        elif h.old_start + h.old_len - 1 < line:
            shift += h.new_len - h.old_len
    return shift


def _apply(state: dict[str, list[list[int]]], change: dict[str, list[_Hunk]], age: int) -> None:
    for path, hunks in change.items():
        hunks = sorted(hunks, key=lambda h: h.old_start)
        carried = _carry(state.get(path, []), hunks)
        carried += [[h.new_start, h.new_start + h.new_len - 1, age] for h in hunks if h.new_len > 0]
        state[path] = carried


def _normalised(state: dict[str, list[list[int]]], keep) -> dict[str, list[tuple[int, int, int]]]:
    """Sorted, non-overlapping ranges per kept file; where ranges overlap
    (a line changed again) the newest age wins."""
    out = {}
    for path, ranges in state.items():
        if ranges and keep(path):
            out[path] = _newest_per_line(ranges)
    return out


def _newest_per_line(ranges: list[list[int]]) -> list[tuple[int, int, int]]:
    """A sweep over the ranges' boundaries, keeping the smallest age active at
    each stretch (a heap with lazy removal): O(n log n) however they overlap."""
    events = sorted({b for s, e, _ in ranges for b in (max(1, s), e + 1)})
    by_start: dict[int, list[tuple[int, int]]] = {}
    for s, e, age in ranges:
        if e >= max(1, s):
            by_start.setdefault(max(1, s), []).append((age, e))
    heap: list[tuple[int, int]] = []
    merged: list[tuple[int, int, int]] = []
    for i, point in enumerate(events[:-1]):
        for item in by_start.get(point, ()):
            heapq.heappush(heap, item)
        while heap and heap[0][1] < point:
            heapq.heappop(heap)
        if not heap:
            continue
        age, stretch_end = heap[0][0], events[i + 1] - 1
        if merged and merged[-1][1] == point - 1 and merged[-1][2] == age:
            merged[-1] = (merged[-1][0], stretch_end, age)
        else:
            merged.append((point, stretch_end, age))
    return merged


def commit_changes(root: Path, head: str, commits: int = RECENT_COMMITS) -> list[dict[str, list[_Hunk]]] | None:
    """The hunks of the newest ``commits`` non-merge commits reachable from ``head``, newest first."""
    out = _git(root, "log", f"--max-count={commits}", "--no-merges", "-p", *_DIFF_OPTIONS,
               "--format=%x00commit %H", head, "--", ".")
    return None if out is None else _parse_patches(out)


def worktree_changes(root: Path) -> tuple[dict[str, list[_Hunk]], str] | None:
    """The working tree's changes against HEAD (one "commit"), and a digest of them."""
    out = _git(root, "diff", *_DIFF_OPTIONS, "HEAD", "--", ".")
    if out is None:
        return None
    parsed = _parse_patches(out)
    return (parsed[0] if parsed else {}), hashlib.blake2b(out, digest_size=12).hexdigest()


def recent_changes(root: Path, keep=lambda path: True, commits: int = RECENT_COMMITS,
                   head: str | None = None, worktree: bool = True,
                   changes: list[dict[str, list[_Hunk]]] | None = None) -> RecentChanges | None:
    """What the newest ``commits`` commits and the working tree changed, in
    the working tree's line numbers; ``keep(path)`` picks the files worth
    keeping (the indexed ones).  None when ``root`` has no usable git
    history.  ``head`` reads the history of that commit instead of HEAD
    (then ``worktree`` should be False: the working tree is another state);
    ``changes`` are that commit's :func:`commit_changes`, when already read."""
    head = head or head_commit(root)
    if head is None:
        return None
    if changes is None:
        changes = commit_changes(root, head, commits)
    if changes is None:
        return None
    wt: dict[str, list[_Hunk]] = {}
    digest = ""
    if worktree:
        found = worktree_changes(root)
        if found is not None:
            wt, digest = found
    state: dict[str, list[list[int]]] = {}
    n = len(changes)
    # Oldest first, so each commit's lines are carried through every later one.
    for i in range(n - 1, -1, -1):
        _apply(state, changes[i], i + 1)
    _apply(state, wt, 0)
    return RecentChanges(head, digest, _normalised(state, keep))


def save(store, changes: RecentChanges) -> bool:
    return store.save_derived(HISTORY_NAME, _MAGIC, changes.state())


def load(store) -> RecentChanges | None:
    return RecentChanges.from_state(store.load_derived(HISTORY_NAME, _MAGIC))
