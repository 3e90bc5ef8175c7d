"""The layout as docs/architecture.md draws it, checked on every module.

- MemStrata's core layers import downward only:
  storage -> indexer -> compressor -> mcp_server -> harness.
- The core never imports a compatible product (kura, strata, stormbuffer).
- A product imports only storage's shared primitives, the shared JSON-RPC
  framing and transports in mcp_server, and (Kura) the indexer's file
  walking and watching; products never import each other.
- No import cycles, and no module outside a product's package is named
  after it.

Each rule is also run on a planted violation, so a checker that stopped
seeing anything would fail here too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
CORE = ["storage", "indexer", "compressor", "mcp_server", "harness"]
PRODUCTS = ["kura", "strata", "stormbuffer"]
# Process-level helpers of the distribution's root package, open to all.
ROOT_MODULES = {"memstrata", "memstrata.console"}
# What a product may use of the core.
PRODUCT_MAY_USE = {
    "memstrata.storage", "memstrata.storage.db", "memstrata.storage.migrations", "memstrata.storage.files",
    "memstrata.storage.text", "memstrata.storage.checked_file",
    "memstrata.mcp_server.jsonrpc", "memstrata.mcp_server.stdio",
    "memstrata.mcp_server.http", "memstrata.mcp_server.arguments", "memstrata.mcp_server.loopback",
}
# Kura walks, watches and (to chunk code at definition boundaries) parses like the indexer.
KURA_MAY_ALSO_USE = {"memstrata.indexer.scan", "memstrata.indexer.watcher", "memstrata.indexer.languages",
                     "memstrata.indexer.parse"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts and parts[0] == "memstrata":
        parts = parts[1:]
    return ".".join(["memstrata", *parts])


def package_files() -> list[Path]:
    files = []
    for top in [*CORE, *PRODUCTS, "memstrata"]:
        files += sorted((ROOT / top).rglob("*.py"))
    return files


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Modules of this distribution imported by ``path`` (outside ``if TYPE_CHECKING``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.add(alias.name)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.add(target)
                for alias in child.names:
                    found.add(f"{target}.{alias.name}")
            visit(child)

    visit(tree)
    return {m for m in found if m in known and m != name}


def import_graph() -> nx.DiGraph:
    files = package_files()
    known = {module_name(f) for f in files}
    graph = nx.DiGraph()
    for f in files:
        graph.add_node(module_name(f))
        for target in imports_of(f, known):
            graph.add_edge(module_name(f), target)
    return graph


def area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in CORE + PRODUCTS else "root"


def violations(graph: nx.DiGraph) -> list[str]:
    found = []
    for src, dst in graph.edges:
        a, b = area(src), area(dst)
        if src == "memstrata.__main__" or dst in ROOT_MODULES:
            continue
        if a == "root":
            found.append(f"{src} (root package) imports {dst}")
        elif a in CORE:
            if b in PRODUCTS:
                found.append(f"core module {src} imports product module {dst}")
            elif b in CORE and CORE.index(b) > CORE.index(a):
                found.append(f"{src} imports {dst}, a layer above it")
        else:  # a product
            if b == a:
                continue
            allowed = PRODUCT_MAY_USE | (KURA_MAY_ALSO_USE if a == "kura" else set())
            if b in PRODUCTS:
                found.append(f"product module {src} imports another product's {dst}")
            elif dst not in allowed:
                found.append(f"product module {src} imports {dst}, which is not a shared primitive")
    for cycle in nx.simple_cycles(graph):
        found.append("import cycle: " + " -> ".join(cycle + cycle[:1]))
    return found


def misnamed(paths: list[str]) -> list[str]:
    product_word = re.compile(r"(kura|(?<!mem)strata|stormbuffer|sbuf)", re.I)
    return [p for p in paths if p.split("/")[0] in CORE and product_word.search(p.split("/", 1)[1])]


def test_the_tree_follows_the_layout():
    assert violations(import_graph()) == []


def test_no_core_module_is_named_after_a_product():
    paths = [str(p.relative_to(ROOT)) for p in package_files()]
    assert misnamed(paths) == []


def test_every_package_folder_is_shipped():
    """Every folder holding modules is listed in pyproject's packages."""
    text = (ROOT / "pyproject.toml").read_text()
    for init in package_files():
        if init.name == "__init__.py":
            assert f'"{module_name(init)}"' in text, f"{module_name(init)} is not in pyproject.toml"


def test_the_checker_sees_planted_violations():
    graph = nx.DiGraph()
    graph.add_edges_from([
        ("memstrata.storage.db", "memstrata.indexer.graph"),          # upward
        ("memstrata.compressor.rank", "memstrata.strata.engine"),      # core -> product
        ("memstrata.kura.cli", "memstrata.strata.store"),              # product -> product
        ("memstrata.stormbuffer.cli", "memstrata.harness.cli"),        # product -> harness
        ("memstrata.strata.a", "memstrata.strata.b"), ("memstrata.strata.b", "memstrata.strata.a"),  # cycle
        ("memstrata.harness.cli", "memstrata.storage.db"),            # fine
        ("memstrata.kura.cli", "memstrata.indexer.scan"),             # fine for Kura
        ("memstrata.strata.cli", "memstrata.indexer.scan"),           # not for Strata
    ])
    found = violations(graph)
    assert len(found) == 6, found
    assert misnamed(["mcp_server/strata_engine.py", "storage/kura_store.py", "harness/proxy/app.py",
                     "memstrata/console.py"]) == ["mcp_server/strata_engine.py", "storage/kura_store.py"]
