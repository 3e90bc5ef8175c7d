"""How much of each repository's internal import graph the index resolves.

For each repository (a working folder, or a git repository -- bare clones
included -- checked out at HEAD into ``--scratch``) the project is indexed
cold and every import fact is classified by a criterion that does not use
the indexer's resolver, only the project's own manifests and the import's
spelling:

* Python: relative imports (``from . import x``); absolute imports whose
  first segment is a top-level package of the project (a directory with an
  ``__init__.py`` whose parent has none, wherever it sits).
* JavaScript/TypeScript: relative specifiers (``./x``, ``../x``); bare
  specifiers matching a ``paths`` pattern of any tsconfig/jsconfig in the
  tree, or naming an existing file under a ``baseUrl``; bare specifiers
  naming a workspace package (``package.json`` ``workspaces``,
  ``pnpm-workspace.yaml``, ``lerna.json``) or one of its subpaths.
  Specifiers of non-source assets (``./a.css``, ``./x.json``, ``./C.vue``)
  are counted apart: they never name an indexed file.
* Go: import paths under the module path of a ``go.mod`` in the tree.
* Rust: ``crate::``, ``super::``, ``self::`` paths, ``mod x;`` declarations,
  ``use child::..`` of a module the same file declares, and
  ``use other_crate::..`` naming a member crate of a Cargo workspace (or
  the package itself, as its tests, examples and benches spell it).

An import is *resolved* when the index stored a ``target_path`` for it.
Printed per repository and language: import statements (distinct file, line,
module), internal ones, resolved ones and the share; then the unresolved
internal imports counted by pattern class (criterion and the spelling's
shape) with two example specifiers each.

Re-exports: every named import (``from m import n``, ``import { n }``,
``use a::n``) whose resolved file does not define ``n`` itself but is not
the module ``n`` either (a barrel, a package ``__init__``, a ``mod.rs``
with ``pub use``) counts once, when ``n`` is defined at the top level of
some project file of the same language; it is *followed* when the graph
(``CodeGraph``'s member lookup, the one references use) leads from that
file to a definition of ``n`` in another file.

    python bench/resolution.py /work/corpora/repos/click /work/corpora/repos/tokio

Needs no commit history: only HEAD is indexed.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from memstrata.indexer.graph import CodeGraph, symbol_id
from memstrata.indexer.project import index_dir
from memstrata.indexer.workspace import Workspace
from memstrata.storage import code_index as ci

_SKIP_DIRS = {".git", ".memstrata", "node_modules", "target", "dist", "build", ".venv", "venv", "__pycache__"}
_JS = ("javascript", "typescript", "tsx")
_JS_SOURCE_EXT = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")
# Extensions that name something other than an indexed JS/TS source file.
_ASSET = re.compile(r"\.(css|scss|sass|less|json|vue|svelte|svg|png|jpe?g|gif|html|md|txt|wasm|node|yaml|yml)$")


# -- checkout --------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def materialise(repo: Path, scratch: Path) -> Path:
    """A folder holding ``repo``'s files at HEAD: the folder itself when it is
    not a git repository, else a shared clone under ``scratch`` (the corpus
    repository is never written)."""
    name = repo.name  # as given: a corpus folder may be a symlink to a mirror named otherwise
    repo = repo.resolve()
    if not ((repo / ".git").exists() or ((repo / "HEAD").is_file() and (repo / "objects").is_dir())):
        return repo
    head = git(repo, "rev-parse", "HEAD").strip()
    dest = scratch / name
    if not (dest / ".git").exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(dest)], check=True)
    git(dest, "checkout", "--quiet", "--force", "--detach", head)

    return dest


# -- the project's manifests ------------------------------------------------------------


def _walk(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        yield ("" if rel == "." else rel), filenames


def _json(path: Path) -> dict | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # tsconfig allows comments and trailing commas (strings kept whole: "@x/*")
    text = re.sub(r'("(?:\\.|[^"\\\n])*")|/\*.*?\*/|//[^\n]*|,(?=\s*[}\]])', lambda m: m.group(1) or "", text, flags=re.S)
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _toml_section(text: str, header: str) -> str | None:
    m = re.search(r"^\[" + re.escape(header) + r"\][^\n]*\n?(.*?)(?=^\[|\Z)", text, re.M | re.S)
    return m.group(1) if m else None


def _toml_name(section: str | None) -> str | None:
    if section is None:
        return None
    m = re.search(r"^\s*name\s*=\s*[\"']([^\"']+)[\"']", section, re.M)
    return m.group(1) if m else None


@dataclass
class Manifests:
    py_packages: set[str] = field(default_factory=set)
    go_modules: list[str] = field(default_factory=list)
    ts_patterns: list[str] = field(default_factory=list)
    base_urls: list[str] = field(default_factory=list)
    js_packages: set[str] = field(default_factory=set)
    rust_crates: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)


def read_manifests(root: Path) -> Manifests:
    m = Manifests()
    dirs: dict[str, list[str]] = {}
    for rel, names in _walk(root):
        dirs[rel] = names
        for n in names:
            m.files.add(posixpath.join(rel, n) if rel else n)
    for rel, names in dirs.items():
        # Python: a package whose parent is no package is importable by its name.
        if "__init__.py" in names and rel and "__init__.py" not in dirs.get(posixpath.dirname(rel), []):
            m.py_packages.add(posixpath.basename(rel))
        if "go.mod" in names:
            text = (root / rel / "go.mod").read_text(encoding="utf-8", errors="replace")
            mod = re.search(r"^\s*module\s+\"?([^\s\"]+)", text, re.M)
            if mod:
                m.go_modules.append(mod.group(1))
        for n in names:
            if re.fullmatch(r"(ts|js)config(\..*)?\.json", n):
                data = _json(root / rel / n) or {}
                options = data.get("compilerOptions") or {}
                if isinstance(options.get("paths"), dict):
                    m.ts_patterns += [p for p in options["paths"] if isinstance(p, str)]
                if isinstance(options.get("baseUrl"), str):
                    m.base_urls.append(posixpath.normpath(posixpath.join(rel, options["baseUrl"])))
    # JS workspaces: the root manifest's globs, pnpm's and lerna's.
    globs: list[str] = []
    root_pkg = _json(root / "package.json") or {}
    ws = root_pkg.get("workspaces")
    if isinstance(ws, dict):
        ws = ws.get("packages")
    if isinstance(ws, list):
        globs += [g for g in ws if isinstance(g, str)]
    try:
        pnpm = (root / "pnpm-workspace.yaml").read_text(encoding="utf-8")
        globs += re.findall(r"^\s*-\s*[\"']?([^\"'\n#]+?)[\"']?\s*$", pnpm, re.M)
    except OSError:
        pass
    lerna = _json(root / "lerna.json") or {}
    if isinstance(lerna.get("packages"), list):
        globs += [g for g in lerna["packages"] if isinstance(g, str)]
    if isinstance(root_pkg.get("name"), str):
        m.js_packages.add(root_pkg["name"])  # a package may import itself by name
    for rel, names in dirs.items():
        if "package.json" not in names or not rel:
            continue
        if any(fnmatch.fnmatch(rel, g.rstrip("/").removeprefix("./")) for g in globs if not g.startswith("!")):
            name = (_json(root / rel / "package.json") or {}).get("name")
            if isinstance(name, str):
                m.js_packages.add(name)
    # Rust: members of every Cargo workspace in the tree, and lone packages.
    for rel, names in dirs.items():
        if "Cargo.toml" not in names:
            continue
        text = (root / rel / "Cargo.toml").read_text(encoding="utf-8", errors="replace")
        members: list[str] = []
        workspace = _toml_section(text, "workspace")
        if workspace is not None:
            arr = re.search(r"members\s*=\s*\[(.*?)\]", workspace, re.S)
            if arr:
                members = re.findall(r"[\"']([^\"']+)[\"']", arr.group(1))
        if _toml_section(text, "package") is not None:
            members.append(".")
        for pattern in members:
            for d in dirs:
                if fnmatch.fnmatch(d, posixpath.normpath(posixpath.join(rel, pattern))) or (
                    pattern == "." and d == rel):
                    if "Cargo.toml" not in dirs[d]:
                        continue
                    ctext = (root / d / "Cargo.toml").read_text(encoding="utf-8", errors="replace")
                    for name in (_toml_name(_toml_section(ctext, "lib")), _toml_name(_toml_section(ctext, "package"))):
                        if name:
                            m.rust_crates.add(name.replace("-", "_"))
    return m


# -- classification ------------------------------------------------------------------


def _spelling(module: str) -> str:
    """The shape of a JS/TS specifier: its extension, or that it has none."""
    last = module.rsplit("/", 1)[-1]
    if last in (".", ".."):
        return "directory"
    ext = posixpath.splitext(last)[1]
    return f"'{ext}' file" if ext else "no extension"


def classify(language: str, path: str, module: str, name: str | None, m: Manifests,
             declared: set[str]) -> tuple[str, str] | None:
    """(criterion, shape) when the import names a project file, else None;
    criterion "asset" marks a project file that is never indexed."""
    if language == "python":
        if module.startswith("."):
            level = len(module) - len(module.lstrip("."))
            return "relative", ("from . import name" if module == "." * level else f"relative {'.' * level}module")
        head = module.split(".", 1)[0]
        if head in m.py_packages:
            return "package", ("import package" if "." not in module else "package.submodule")
        return None
    if language in _JS:
        spec = module.split("?", 1)[0]
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            if _ASSET.search(spec):
                return "asset", _spelling(spec)
            probe = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
            stem = re.sub(r"\.(m|c)?(j|t)sx?$", "", probe)
            if not any(c in m.files for c in (probe, *(x + e for x in (probe, stem, probe + "/index")
                                                     for e in (*_JS_SOURCE_EXT, ".d.ts")))):
                return "asset", "absent from the checkout (build output)"
            return "relative", _spelling(spec)
        for pattern in m.ts_patterns:
            head, star, tail = pattern.partition("*")
            if (star and spec.startswith(head) and spec.endswith(tail)) or spec == pattern:
                return "tsconfig paths", pattern
        for pkg in m.js_packages:
            if spec == pkg:
                return "workspace package", "package entry"
            if spec.startswith(pkg + "/"):
                return "workspace package", "package subpath"
        for base in m.base_urls:
            probe = posixpath.normpath(posixpath.join(base, spec))
            if any(probe + e in m.files for e in ("", *_JS_SOURCE_EXT)) or any(
                    f"{probe}/index{e}" in m.files for e in _JS_SOURCE_EXT):
                return "baseUrl", _spelling(spec)
        return None
    if language == "go":
        for mod in m.go_modules:
            if module == mod or module.startswith(mod + "/"):
                return "module package", "module root" if module == mod else "subpackage"
        return None
    if language == "rust":
        head = module.split("::", 1)[0]
        if head == "self" and name is None and module.count("::") == 1:
            return "mod declaration", "mod x;"
        if head in ("crate", "super", "self"):
            depth = module.count("::") + (1 if name not in (None, "*") else 0)
            return f"{head}::", f"{depth} segment{'s' if depth != 1 else ''}" + (" glob" if name == "*" else "")
        if head in declared:
            return "child module", "use child::item"
        if head in m.rust_crates:
            return "workspace crate", ("crate root item" if "::" not in module and name is not None else "crate module path")
        return None
    return None


# -- measure -------------------------------------------------------------------------------


@dataclass
class LangStats:
    statements: int = 0
    internal: int = 0
    resolved: int = 0
    assets: int = 0
    reexports: int = 0
    followed: int = 0
    missing: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=lambda: defaultdict(list))
    unfollowed: Counter = field(default_factory=Counter)
    unfollowed_examples: dict = field(default_factory=lambda: defaultdict(list))


def measure(root: Path) -> tuple[dict[str, LangStats], float]:
    shutil.rmtree(index_dir(root), ignore_errors=True)  # always cold: resolution rules are not versioned
    started = time.perf_counter()
    with Workspace.open(root) as ws:
        ws.index()
        seconds = time.perf_counter() - started
        store = ws.store
        languages = {p: lang for p, lang, *_ in ci.load_files(store)}
        imports = ci.load_imports(store)
        graph = CodeGraph.load(store)
    m = read_manifests(root)
    declared: dict[str, set[str]] = defaultdict(set)
    for path, module, name, _alias, _line, _t in imports:
        if languages.get(path) == "rust" and name is None and module.startswith("self::") and module.count("::") == 1:
            declared[path].add(module[6:])
    top_level: dict[str, set[str]] = defaultdict(set)  # language -> names defined at a file's top level
    for node in graph.nodes():
        data = graph.node(node)
        if data.get("type") == "symbol" and "." not in data["qualname"]:
            top_level[languages.get(data["path"], "")].add(data["name"])

    stats: dict[str, LangStats] = defaultdict(LangStats)
    statements: dict[tuple, list] = {}
    for row in imports:
        path, module, name, alias, line, target = row
        language = languages.get(path)
        if language is None:
            continue
        statements.setdefault((path, line, module), []).append(row)
    for (path, line, module), rows in statements.items():
        language = languages[path]
        label = "typescript" if language == "tsx" else language
        s = stats[label]
        s.statements += 1
        cls = classify(language, path, module, rows[0][2], m, declared[path])
        if cls is None:
            continue
        if cls[0] == "asset":
            s.assets += 1
            continue
        s.internal += 1
        if any(r[5] is not None for r in rows):
            s.resolved += 1
        else:
            key = f"{cls[0]}: {cls[1]}"
            s.missing[key] += 1
            if len(s.examples[key]) < 2 and module not in s.examples[key]:
                s.examples[key].append(module)
        for _p, module, name, _a, _l, target in rows:
            if target is None or name in (None, "*", "default") or target not in graph:
                continue
            stem = posixpath.splitext(posixpath.basename(target))[0]
            parent = posixpath.basename(posixpath.dirname(target))
            if stem == name or (stem in ("__init__", "mod", "index", "lib") and parent == name):
                continue  # the import names the module itself
            if symbol_id(target, name) in graph or name not in top_level[language]:
                continue  # defined right there, or not a project definition
            if language == "rust" and not _rust_module_is(module, target):
                continue  # `use a::ext_crate_mod::Name`: the path leaves the project
            s.reexports += 1
            hit = graph._member(target, name)  # the lookup references go through
            if hit is not None and graph.file_of(hit) != target:
                s.followed += 1
            else:
                key = f"{cls[0]} -> {posixpath.basename(target)}"
                s.unfollowed[key] += 1
                if len(s.unfollowed_examples[key]) < 2:
                    s.unfollowed_examples[key].append(f"{target}: {name}")
    return dict(stats), seconds


def _rust_module_is(module: str, target: str) -> bool:
    """Whether ``target`` is the module the path ``module`` names (its last
    segment is the file's module), rather than an ancestor of it."""
    last = module.rsplit("::", 1)[-1]
    stem = posixpath.splitext(posixpath.basename(target))[0]
    if stem in ("lib", "main"):
        return last in ("crate", "self", "super") or "::" not in module
    if stem == "mod":
        stem = posixpath.basename(posixpath.dirname(target))
    return last == stem or last in ("self", "super")


def pct(a: int, b: int) -> str:
    return f"{a / b:6.1%}" if b else "     -"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repos", nargs="+", help="git repositories (bare clones too) or plain folders")
    ap.add_argument("--scratch", default=str(Path(tempfile.gettempdir()) / "memstrata-resolution"),
                    help="where git repositories are checked out")
    ap.add_argument("--patterns", type=int, default=8, help="unresolved pattern classes shown per language")
    args = ap.parse_args(argv)
    out = sys.stdout
    totals: dict[str, LangStats] = defaultdict(LangStats)
    rows: list[tuple[str, str, LangStats]] = []
    for repo in args.repos:
        repo_path = Path(repo)
        if not repo_path.is_dir():
            print(f"{repo}: not a folder", file=sys.stderr)
            return 2
        checkout = materialise(repo_path, Path(args.scratch))
        stats, seconds = measure(checkout)
        print(f"# {repo_path.name}: indexed in {seconds:.1f} s", file=sys.stderr)
        for lang in sorted(stats):
            s = stats[lang]
            if s.internal or s.reexports:
                rows.append((repo_path.name, lang, s))
            t = totals[lang]
            for f in ("statements", "internal", "resolved", "assets", "reexports", "followed"):
                setattr(t, f, getattr(t, f) + getattr(s, f))
            t.missing.update(s.missing)
    header = (f"{'repository':<12} {'language':<11} {'imports':>8} {'internal':>9} {'resolved':>9} {'share':>7}"
              f" {'assets':>7} {'re-exp':>7} {'followed':>9} {'share':>7}")
    print(header, file=out)
    print("-" * len(header), file=out)
    for name, lang, s in rows:
        print(f"{name:<12} {lang:<11} {s.statements:>8} {s.internal:>9} {s.resolved:>9} {pct(s.resolved, s.internal)}"
              f" {s.assets:>7} {s.reexports:>7} {s.followed:>9} {pct(s.followed, s.reexports)}", file=out)
    print("-" * len(header), file=out)
    for lang in sorted(totals):
        t = totals[lang]
        if t.internal or t.reexports:
            print(f"{'all':<12} {lang:<11} {t.statements:>8} {t.internal:>9} {t.resolved:>9} {pct(t.resolved, t.internal)}"
                  f" {t.assets:>7} {t.reexports:>7} {t.followed:>9} {pct(t.followed, t.reexports)}", file=out)
    print("\nunresolved internal imports by pattern class (count, examples):", file=out)
    for name, lang, s in rows:
        for key, n in s.missing.most_common(args.patterns):
            print(f"  {name:<12} {lang:<11} {n:>6}  {key:<40} {', '.join(s.examples[key])}", file=out)
    print("\nre-exported names the graph does not follow (count, examples):", file=out)
    for name, lang, s in rows:
        for key, n in s.unfollowed.most_common(args.patterns):
            print(f"  {name:<12} {lang:<11} {n:>6}  {key:<40} {'; '.join(s.unfollowed_examples[key])}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
