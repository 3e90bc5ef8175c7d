"""Which indexed project file a pasted text comes from, and at which line.

The proxy only compresses code it can attribute: a pasted block (or an
unnumbered tool result) counts as project code when its lines are a
contiguous run of an indexed file's lines, verbatim (trailing whitespace
aside).  A user's edited copy, code from another project, or generated code
never matches, so it is never touched.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from memstrata.compressor.chances import named_packages, symbol_chances
from memstrata.storage import StoreError
from memstrata.storage import code_index as ci

# A definition is read on its own line: whitespace that may cross lines (`\s`) let every line
# start scan the rest of a text of blank lines or of `public` lines, quadratic in a pasted file.
_SPACE, _SPACES = r"[^\S\n]*", r"[^\S\n]+"
_DEFINES = re.compile(
    rf"^{_SPACE}(?:\d+(?:→|\t|: |\| ){_SPACE})?(?:export{_SPACES})?(?:default{_SPACES})?"
    rf"(?:pub(?:\([^)\n]*\))?{_SPACES})?(?:public{_SPACES}|private{_SPACES}|"
    rf"protected{_SPACES}|static{_SPACES}|abstract{_SPACES}|final{_SPACES}|async{_SPACES})*"
    rf"(?:def|class|function|func(?:{_SPACE}\([^)\n]*\))?|fn|interface|struct|enum|trait|type|module|impl){_SPACES}"
    r"([A-Za-z_$][\w$]*)",
    re.M,
)
# A match starts only where a run of path characters starts (found from there if anywhere in it):
# tried from every position of a long run, it took time quadratic in the run's length.
PATHLIKE = re.compile(r"(?<![\w.\-/])[\w.\-/]*[\w\-]\.[A-Za-z0-9]{1,6}\b")
MAX_CANDIDATES = 8
MAX_ANCHOR_POSITIONS = 64
# A request names a module by its name as a plain word: a commit scope ("fix(config): ..."), "the
# css plugin", "the no-unused rule", "assets" for asset.ts.  Words keep their hyphens and
# underscores, so a part of a longer name ("query-core", "__VITE_ASSET__") names nothing.
_WORD = re.compile(r"[a-z0-9][a-z0-9_-]*[a-z0-9]")
MIN_MODULE_NAME = 3
# Names that say where code sits rather than what it does (a package's entry or barrel file):
# "the main loop" or "index the files" is not about main.py or index.ts.
_PLACE_NAMES = frozenset({"index", "mod", "lib", "main", "init", "setup"})


class ProjectMatcher:
    """Finds the project files a text points at and where it sits in them (file lines cached)."""

    def __init__(self, ws, cache_size: int = 256):
        self.ws = ws
        self._lock = threading.Lock()
        self._files: OrderedDict[str, tuple[int, list[str], dict[str, list[int]]]] = OrderedDict()
        self._cache_size = cache_size
        self._base_key: tuple | None = None
        self._base: dict[str, list[str]] = {}
        self._chances: OrderedDict[tuple[str, str], tuple[int, dict[str, float]]] = OrderedDict()

    def file_chances(self, question: str, path: str) -> dict[str, float]:
        """qualname -> the project ranking's chance that the definition of file ``path`` (as a
        tool or the user wrote it: relative, absolute) is what ``question`` needs (see
        :func:`compressor.chances.symbol_chances`); empty for an empty question, a path that is
        no indexed file, or when the index cannot answer."""
        if not question.strip() or not path:
            return {}
        key = (question, path)
        with self._lock:
            hit = self._chances.get(key)
            if hit is not None and hit[0] == id(self.ws.graph):
                self._chances.move_to_end(key)
                return hit[1]
        try:
            graph = self.ws.graph
            files = self.resolve_path(path)
            chances = symbol_chances(self.ws, question) if len(files) == 1 else {}
        except (StoreError, RuntimeError):  # a refreshing graph or a busy index: the block ranks alone
            return {}
        prefix = f"{files[0]}::" if files else ""
        mine = {node[len(prefix):]: p for node, p in chances.items() if node.startswith(prefix)}
        with self._lock:
            self._chances[key] = (id(graph), mine)
            while len(self._chances) > self._cache_size:
                self._chances.popitem(last=False)
        return mine

    def names_file(self, question: str, path: str) -> bool:
        """Whether ``question`` names the file ``path`` (a tool or the user wrote it: relative,
        absolute): by its path or its file name (``ser.rs`` names every ``ser.rs``), by the name
        of the module it is, as a word (see :func:`says_module`), or by its package, in a commit
        scope (``fix(codegen,http): ...``, see :func:`compressor.analyze.scope_packages`)."""
        if not path:
            return False
        try:
            by_base = self._basenames(self.ws.graph)
            files = self.resolve_path(path, by_base)
        except (StoreError, RuntimeError):  # a refreshing graph or a busy index
            return False
        if len(files) != 1:
            return False
        base = files[0].rsplit("/", 1)[-1]
        if says_module(question, base):
            return True
        try:
            packages = named_packages(self.ws, question)
        except (StoreError, RuntimeError):  # a refreshing graph or a busy index
            packages = []
        if any(files[0].startswith(d) for d in packages):
            return True
        return "." in question and any(files[0] in self.resolve_path(token, by_base)
                                       for token in PATHLIKE.findall(question) if token.rsplit("/", 1)[-1] == base)

    # -- candidates ---------------------------------------------------------------

    def candidate_files(self, text: str, hints: tuple[str, ...] = ()) -> list[str]:
        """Project files ``text`` points at: paths it (or ``hints``) names, files defining what it defines."""
        graph = self.ws.graph
        found: dict[str, int] = {}
        by_base = self._basenames(graph)
        head = text[:4000]
        for token in [*hints, *(PATHLIKE.findall(head) if "." in head else ())]:
            for path in self.resolve_path(token, by_base):
                found[path] = found.get(path, 0) + 5
        for name in set(_DEFINES.findall(text)):
            try:
                nodes = graph.definitions(name)
            except RuntimeError:  # the graph is being refreshed by the watcher: skip this name
                continue
            for node in nodes[:MAX_CANDIDATES * 4]:
                path = node.split("::", 1)[0]
                found[path] = found.get(path, 0) + 1
        return [p for p, _ in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_CANDIDATES]]

    def resolve_path(self, token: str, by_base: dict[str, list[str]] | None = None) -> list[str]:
        """Indexed paths a written path (relative, absolute, ``./x``) can mean."""
        if by_base is None:
            by_base = self._basenames(self.ws.graph)
        token = token.strip().strip("'\"`").replace("\\", "/")
        if not token:
            return []
        root = str(self.ws.root).replace("\\", "/").rstrip("/") + "/"
        if token.startswith(root):
            token = token[len(root):]
        token = token.lstrip("./")
        same_name = by_base.get(token.rsplit("/", 1)[-1], ())
        if token in same_name:
            # The path of an indexed file as it is: that file, not also every file whose path ends
            # the same way (tests/lib/x.js beside lib/x.js, in a test tree that mirrors the source).
            return [token]
        return [p for p in same_name if p.endswith("/" + token) or token.endswith("/" + p)]

    def _basenames(self, graph) -> dict[str, list[str]]:
        files = graph.files()
        key = (id(graph), getattr(graph, "version", 0), len(files))
        with self._lock:
            if self._base_key == key:
                return self._base
        index: dict[str, list[str]] = {}
        for path in files:
            index.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        with self._lock:
            self._base_key, self._base = key, index
        return index

    # -- file lines -----------------------------------------------------------------

    def file_lines(self, path: str) -> tuple[list[str], dict[str, list[int]]] | None:
        """The indexed text of ``path`` as lines, and where each line occurs; None when the file
        is not indexed or differs on disk from its index row (an edit the index has not caught up
        with): a paste of the indexed text is then not the file any more, and the line numbers
        of its markers would send an agent to the wrong lines."""
        if self.ws.changed_on_disk([path]):
            return None
        texts = ci.file_texts(self.ws.store, [path])
        text = texts.get(path)
        if text is None:
            return None
        key = hash(text)
        with self._lock:
            hit = self._files.get(path)
            if hit is not None and hit[0] == key:
                self._files.move_to_end(path)
                return hit[1], hit[2]
        lines = [ln.rstrip() for ln in text.split("\n")]
        where: dict[str, list[int]] = {}
        for i, ln in enumerate(lines):
            if ln.strip():
                where.setdefault(ln, []).append(i)
        with self._lock:
            self._files[path] = (key, lines, where)
            while len(self._files) > self._cache_size:
                self._files.popitem(last=False)
        return lines, where

    # -- locating ---------------------------------------------------------------------

    def locate_whole(self, lines: list[str], candidates: list[str], at: int | None = None) -> tuple[str, int] | None:
        """(path, 0-based first line) of the file whose lines ``lines`` are, contiguously and verbatim
        (blank lines around them aside).  A run that fits a file at two places (a range of
        repeated code) is located only with ``at``, the line the reader says it starts at (a
        numbered read's first number, ``sed -n 'A,Bp'``): it must fit there; without it the run is
        nowhere, as a line number guessed between two places can be wrong."""
        body = [ln.rstrip() for ln in lines]
        lo, hi = 0, len(body)
        while lo < hi and not body[lo].strip():
            lo += 1
        while hi > lo and not body[hi - 1].strip():
            hi -= 1
        if hi - lo < 2:
            return None
        for path in candidates:
            got = self.file_lines(path)
            if got is None:
                continue
            file_lines, where = got
            if at is not None:
                if file_lines[at + lo:at + hi] == body[lo:hi]:
                    return path, at
                continue
            # Anchored on the body's rarest line: every place the run can start at is tried, so a
            # second fit is seen, however common the run's first line is in the file.
            k = lo
            positions = where.get(body[lo], ())
            for j in range(lo + 1, hi):
                if len(positions) <= 1:
                    break
                if body[j].strip() and len(here := where.get(body[j], ())) < len(positions):
                    k, positions = j, here
            if len(positions) > MAX_ANCHOR_POSITIONS:
                continue  # a run of lines each repeated all over the file: no place to tell
            fits = [start for p in positions
                    if (start := p - (k - lo)) >= 0 and file_lines[start:start + hi - lo] == body[lo:hi]]
            if len(fits) == 1:
                return path, fits[0] - lo
            if fits:
                return None  # two places: which one the agent saw is unknown
        return None

    def segments(self, lines: list[str], candidates: list[str], min_lines: int) -> list[tuple[int, int, str, int]]:
        """Runs of ``lines`` that are contiguous lines of a candidate file: (start, end excl., path, file offset)."""
        body = [ln.rstrip() for ln in lines]
        files = []
        for path in candidates:
            got = self.file_lines(path)
            if got is not None:
                files.append((path, got[0], got[1]))
        out = []
        i = 0
        while i < len(body) and files:
            best = None
            if body[i].strip():
                for path, file_lines, where in files:
                    for p in where.get(body[i], ())[:MAX_ANCHOR_POSITIONS]:
                        k = 0
                        while i + k < len(body) and p + k < len(file_lines) and body[i + k] == file_lines[p + k]:
                            k += 1
                        if best is None or k > best[1]:
                            best = (p, k, path)
            if best is not None:
                p, k, path = best
                end = i + k
                while end > i and not body[end - 1].strip():
                    end -= 1
                if sum(1 for ln in body[i:end] if ln.strip()) >= min_lines:
                    out.append((i, end, path, p))
                    i = end
                    continue
            i += 1
        return out


def says_module(question: str, base: str) -> bool:
    """Whether ``question`` says the module name of the file called ``base`` as a word of its own,
    in the singular or the plural (``assets`` for ``asset.ts``, ``error`` for ``errors.py``).  The
    name is the file name without its last extension; one with a dot left (``vite.config.ts``)
    or a place name (see ``_PLACE_NAMES``) is never said."""
    stem = base.rsplit(".", 1)[0].lower()
    if len(stem) < MIN_MODULE_NAME or stem in _PLACE_NAMES or not _WORD.fullmatch(stem):
        return False
    forms = {stem, stem + "s", stem + "es"}
    if stem.endswith("s"):
        forms.add(stem[:-1])
    return any(word in forms for word in _WORD.findall(question.lower()))
