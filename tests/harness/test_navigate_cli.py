"""`memstrata symbol`, `refs` and `outline` as a user runs them: real
subprocesses on an indexed copy of the Python fixture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def memstrata(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("memstrata")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "memstrata"]
    env = {**os.environ, "MEMSTRATA_HOME": str(cwd.parent / "home")}
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("cli") / "python_project"
    shutil.copytree(REPO / "fixtures" / "python_project", dest,
                    ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    assert memstrata("index", cwd=dest).returncode == 0
    return dest


def test_symbol(project: Path):
    r = memstrata("symbol", "AuthService.login", "--body", cwd=project)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "app/auth/service.py:20-29  method  app/auth/service.py::AuthService.login"
    source = (project / "app/auth/service.py").read_text().splitlines()
    assert lines[1:11] == source[19:29]

    r = memstrata("symbol", "Auth*", "--json", "--project", str(project), cwd=project.parent)
    out = json.loads(r.stdout)
    assert out["symbols"][0]["symbol"] == "app/auth/service.py::AuthService" and "body" not in out["symbols"][0]

    r = memstrata("symbol", "__init__", "--in", "app/auth", "--kind", "method", str(project), cwd=project.parent)
    assert r.returncode == 0 and r.stdout.startswith("app/auth/service.py:16-18  method")


def test_symbol_in_a_folder_named_from_the_current_directory(project: Path):
    # As outline's FILE: a path that exists from here is taken from here, else from the project.
    r = memstrata("symbol", "__init__", "--in", ".", "--kind", "method", cwd=project / "app" / "auth")
    assert r.returncode == 0 and r.stdout.startswith("app/auth/service.py:16-18  method"), r.stderr
    r = memstrata("symbol", "hash_password", "--in", "util", cwd=project / "app")
    assert r.returncode == 0 and r.stdout.startswith("app/util/crypto.py:"), r.stderr
    r = memstrata("symbol", "hash_password", "--in", "app/util", cwd=project / "app")
    assert r.returncode == 0 and r.stdout.startswith("app/util/crypto.py:"), r.stderr
    r = memstrata("symbol", "hash_password", "--in", ".", cwd=project / "app" / "auth")
    assert r.returncode == 2 and "names no symbol in app/auth" in r.stderr


def test_refs(project: Path):
    r = memstrata("refs", "app/util/crypto.py::hash_password", cwd=project / "app")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "app/auth/service.py:3  import  (module level): from ..util.crypto import hash_password, constant_time_eq",
        "app/auth/service.py:25  call    AuthService.login: ok = constant_time_eq(hash_password(password), stored)",
        "tests/test_auth.py:2  import  (module level): from app.util.crypto import hash_password",
        'tests/test_auth.py:6  call    test_login_accepts_right_password: svc = AuthService({"bob": hash_password("pw")})',
    ]
    assert "4 uses of app/util/crypto.py::hash_password" in r.stderr
    out = json.loads(memstrata("refs", "AuthService.login", "--json", "--max-results", "1", cwd=project).stdout)
    assert out["truncated"] and len(out["references"]) == 1


def test_outline(project: Path):
    r = memstrata("outline", "auth/service.py", cwd=project / "app")  # a path from the current folder
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "app/auth/service.py (python)",
        "  6-6    constant  MAX_ATTEMPTS",
        "  9-10   class     InvalidCredentials",
        "  13-32  class     AuthService",
        "    16-18  method    AuthService.__init__",
        "    20-29  method    AuthService.login",
        "    31-32  method    AuthService.logout",
    ]
    out = json.loads(memstrata("outline", "app/auth/service.py", "--depth", "1", "--json", cwd=project).stdout)
    assert [e["children"] for e in out["symbols"]] == [[], [], []] and out["deeper"] == 3
    shallow = memstrata("outline", "app/auth/service.py", "--depth", "1", cwd=project)
    assert shallow.stderr.strip() == ("-- and 3 definitions nested deeper than --depth 1: not listed "
                                      "(raise --depth to see them)")


def test_the_outline_of_a_file_with_syntax_errors_says_so(tmp_path: Path):
    """Indexed as far as it parses, such a file's outline can miss definitions; the outline says
    why, as ``status`` does, and a clean file's says nothing."""
    root = tmp_path / "broken_project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "broken.py").write_text("def good_before():\n    return 1\n\n\ndef half(:\n    pass\n")
    (root / "pkg" / "clean.py").write_text("def fine():\n    return 2\n")
    assert memstrata("index", cwd=root).returncode == 0
    r = memstrata("outline", "pkg/broken.py", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "good_before" in r.stdout
    assert "-- pkg/broken.py has syntax errors" in r.stderr
    assert "indexed as far as it parses, so definitions the errors hide are not listed" in r.stderr
    clean = memstrata("outline", "pkg/clean.py", cwd=root)
    assert clean.returncode == 0 and clean.stderr == ""


@pytest.mark.parametrize("args, message", [
    (("symbol", "logn"), "memstrata: no symbol matches 'logn'; did you mean login?"),
    (("symbol", ""), "memstrata: name is empty: give a symbol name such as 'AuthService.login', "
                     "or the start of one followed by '*'"),
    (("symbol", "login", "--kind", "widget"), "memstrata: kind must be one of function, method, class, interface, "
                                              "struct, enum, type, constant, module; got 'widget'"),
    (("refs", "__init__"), "memstrata: symbol '__init__' is ambiguous: it names"),
    (("outline", "/etc/passwd"), "memstrata: path is outside the project"),
    (("outline", "app/none.py"), "memstrata: app/none.py is not an indexed file of this project"),
])
def test_bad_input_is_one_line(project: Path, args, message):
    r = memstrata(*args, cwd=project)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(message) and r.stderr.count("\n") == 1, r.stderr


def test_a_file_the_index_left_out_is_said_why(tmp_path: Path):
    """Running `memstrata index` again would not outline a file no parser reads: the error says
    why the file is left out, not to index again."""
    dest = tmp_path / "proj"
    shutil.copytree(REPO / "fixtures" / "python_project", dest,
                    ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    (dest / "NOTES.txt").write_text("plain notes\n")
    (dest / "blob.py").write_bytes(b"\x00\x01\x02" * 100)
    assert memstrata("index", cwd=dest).returncode == 0
    for path, why in (("NOTES.txt", "it is no source file of a language MemStrata parses"),
                      ("blob.py", "it is binary")):
        r = memstrata("outline", path, cwd=dest)
        assert r.returncode == 2 and r.stderr == f"memstrata: {path} is not indexed: {why}\n", r.stderr
    r = memstrata("symbol", "login", "--in", "NOTES.txt", cwd=dest)
    assert r.returncode == 2 and "NOTES.txt is not indexed: it is no source file" in r.stderr, r.stderr


def test_never_indexed_folder_is_left_alone(tmp_path: Path):
    folder = tmp_path / "plain"
    folder.mkdir()
    r = memstrata("symbol", "x", cwd=folder)
    assert r.returncode == 2 and "not indexed yet (run memstrata index)" in r.stderr
    assert not (folder / ".memstrata").exists()
