"""The distribution as a user installs it: build the wheel, look inside, install it.

No network: the wheel is built with the setuptools of the running
environment (``--no-build-isolation``), installed with ``--no-deps
--no-index`` into a fresh virtual environment, and that environment borrows
the running one's third-party packages through a ``.pth`` line (a path
listed in a ``.pth`` file is not itself scanned for ``.pth`` files, so the
editable install of the checkout stays invisible there: what runs is the
wheel).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SCRIPTS = sorted(PYPROJECT["project"]["scripts"])
LAYERS = ("storage", "indexer", "compressor", "mcp_server", "harness")
PRODUCTS = ("kura", "strata", "stormbuffer")


def _source_copy(dest: Path) -> Path:
    """What the sdist would hold: pyproject, README, the package root, the layers and the products."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("memstrata", *LAYERS, *PRODUCTS):
        shutil.copytree(REPO / folder, dest / folder, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = _source_copy(tmp / "src")
    out = tmp / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("memstrata-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel; returns its bin/ folder."""
    root = tmp_path_factory.mktemp("venv") / "v"
    venv.EnvBuilder(with_pip=False).create(root)
    py = root / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_borrowed_deps.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
         str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return root / "bin"


def test_wheel_installs_one_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"memstrata"}
    for package in (*LAYERS, *PRODUCTS, "harness/cli", "harness/proxy", "harness/dashboard"):
        assert f"memstrata/{package}/__init__.py" in names
    assert "memstrata/__main__.py" in names


def test_wheel_carries_every_query_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    queries = sorted(p.name for p in (REPO / "indexer" / "queries").glob("*.scm"))
    assert queries
    for q in queries:
        assert f"memstrata/indexer/queries/{q}" in names


def test_wheel_ships_no_test_support(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "stub_provider" in n or "/tests/" in n or n.startswith("tests/")]


def test_console_scripts_point_into_the_package(wheel):
    for script, target in PYPROJECT["project"]["scripts"].items():
        assert target.startswith("memstrata."), (script, target)


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_console_script_runs_from_the_wheel(installed, script, tmp_path):
    exe = installed / script
    assert exe.exists(), f"{script} was not installed"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for flag in ("--help", "--version"):
        proc = subprocess.run([str(exe), flag], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, (script, flag, proc.stdout, proc.stderr)
        assert proc.stdout.strip(), (script, flag)
        assert "Traceback" not in proc.stderr
    # --version names the installed distribution's version (pyproject reads
    # it from memstrata/__init__.py; the wheel's metadata must agree).
    version = subprocess.run([str(installed / "python"), "-c",
                              "import importlib.metadata as m; print(m.version('memstrata'))"],
                             env=env, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert version and version != "0.0.0"
    assert version in proc.stdout


def test_the_wheel_is_what_runs(installed, tmp_path):
    """Imports resolve inside the fresh venv; the old generic names are gone."""
    code = (
        "import importlib.util, memstrata, memstrata.indexer.languages as l;"
        "print(memstrata.__file__); print(l.__file__);"
        "print([n for n in ('storage','indexer','compressor','mcp_server','harness')"
        " if importlib.util.find_spec(n)])"
    )
    out = subprocess.check_output([str(installed / "python"), "-c", code], cwd=tmp_path, text=True)
    pkg, languages, generic = out.splitlines()
    venv_root = str(installed.parent)
    assert pkg.startswith(venv_root) and languages.startswith(venv_root)
    assert generic == "[]"
    proc = subprocess.run([str(installed / "python"), "-m", "memstrata", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("memstrata ")


def test_installed_package_parses_with_its_bundled_queries(installed, tmp_path):
    """The query files are found from the installed package (not the checkout)."""
    project = tmp_path / "p"
    shutil.copytree(REPO / "fixtures" / "python_project", project)
    proc = subprocess.run([str(installed / "memstrata"), "index", str(project), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"parsed"' in proc.stdout
