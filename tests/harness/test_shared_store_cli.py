"""``--store URL`` and ``--project-name NAME`` from the command line: many
projects in one database, and every wrong URL or password answered with one
sentence (exit 2, no traceback, never the password)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from ..shared_store_helpers import dbname, pg_cli_env

SECRET = "s3cret-Never-Shown"


@pytest.fixture
def env(cli_env):
    return pg_cli_env(cli_env)


def status(run_cli, url, name, env, **kw) -> dict:
    return json.loads(run_cli("status", "--store", url, "--project-name", name, "--json", env=env, **kw).stdout)


def query(run_cli, url, name, env, text: str) -> dict:
    return json.loads(run_cli("query", text, "--store", url, "--project-name", name, "--json", env=env).stdout)


# -- many projects in one database ---------------------------------------------------------

def test_two_projects_in_one_database_each_answer_their_own(project_copy, run_cli, pg_url, env, tmp_path):
    python_root, go_root = project_copy("python_project"), project_copy("go_project")
    # No --project-name: each is stored under its folder's name.
    run_cli("index", str(python_root), "--store", pg_url, env=env)
    run_cli("index", "--store", pg_url, env=env, cwd=go_root)

    elsewhere = tmp_path / "reader"
    elsewhere.mkdir()
    py = status(run_cli, pg_url, "python_project", env, cwd=elsewhere)
    go = status(run_cli, pg_url, "go_project", env, cwd=elsewhere)
    assert (py["status"], set(py["languages"]), py["project"]) == ("ready", {"python"}, "python_project")
    assert (go["status"], set(go["languages"]), go["project"]) == ("ready", {"go"}, "go_project")

    py_slice = query(run_cli, pg_url, "python_project", env, "AuthService.login and its callers")
    assert "def login" in py_slice["context"]
    assert all(s.endswith(".py") for s in py_slice["sources"])
    go_slice = query(run_cli, pg_url, "go_project", env, "AuthService.login and its callers")
    assert go_slice["sources"] and all(s.endswith(".go") or s == "go.mod" for s in go_slice["sources"])

    # Inside a checkout the name defaults to the folder's, as when it was indexed.
    inside = json.loads(run_cli("status", "--store", pg_url, "--json", env=env, cwd=python_root).stdout)
    assert {k: inside[k] for k in ("project", "files_indexed", "symbols")} == \
        {k: py[k] for k in ("project", "files_indexed", "symbols")}


def test_project_name_names_the_project_and_an_unknown_one_lists_the_known(project_copy, run_cli, pg_url, env):
    root = project_copy("python_project")
    run_cli("index", str(root), "--store", pg_url, "--project-name", "billing api", env=env)
    run_cli("index", str(project_copy("go_project")), "--store", pg_url, env=env)
    assert status(run_cli, pg_url, "billing api", env)["files_indexed"] == 10

    for command in (("status",), ("query", "login"), ("symbol", "login")):
        proc = run_cli(*command, "--store", pg_url, "--project-name", "no-such-project", check=False, env=env)
        assert proc.returncode == 2, proc
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "no project 'no-such-project'" in lines[0]
        assert "billing api" in lines[0] and "go_project" in lines[0]
        assert "python_project" not in lines[0]  # it was stored under its given name only
        assert proc.stdout == ""


def test_environment_variable_names_the_store(project_copy, run_cli, pg_url, env):
    root = project_copy("python_project")
    run_cli("index", str(root), env={**env, "MEMSTRATA_STORE": pg_url})
    assert not (root / ".memstrata").exists()
    assert status(run_cli, pg_url, "python_project", env)["files_indexed"] == 10
    # An explicit --store sqlite wins over the environment.
    run_cli("index", str(root), "--store", "sqlite", env={**env, "MEMSTRATA_STORE": pg_url})
    assert (root / ".memstrata" / "index.db").is_file()


# -- wrong URLs and passwords ----------------------------------------------------------------

def bad_urls(pg_cluster, pg_url) -> dict[str, str]:
    db, port = dbname(pg_url), pg_cluster.port
    user = pg_cluster.user
    return {
        "wrong password": pg_cluster.url(db, password=SECRET),
        "password in the query string": f"postgresql://{user}@127.0.0.1:{port}/{db}?password={SECRET}",
        "no password": pg_cluster.url(db, password=False),
        "closed port": f"postgresql://{user}:{SECRET}@127.0.0.1:1/{db}",
        "unknown host": f"postgresql://{user}:{SECRET}@no-such-host.invalid:{port}/{db}",
        "unknown database": pg_cluster.url("no_such_database", password=True).replace(pg_cluster.password,
                                                                                      SECRET),
        "right password, unknown database": pg_cluster.url("no_such_database"),
        "not postgresql": f"mysql://{user}:{SECRET}@127.0.0.1:{port}/{db}",
        "garbage": f"{SECRET}%%not a url",
        "unclosed bracket": f"postgresql://{user}:{SECRET}@[::1/{db}",
        "port out of range": f"postgresql://{user}:{SECRET}@127.0.0.1:99999/{db}",
        "bad option": f"postgresql://{user}:{quote(SECRET)}@127.0.0.1:{port}/{db}?sslmode=bogus",
    }


CASES = ["wrong password", "password in the query string", "no password", "closed port", "unknown host",
         "unknown database", "right password, unknown database", "not postgresql", "garbage",
         "unclosed bracket", "port out of range", "bad option"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", [("index",), ("status",), ("query", "login"), ("symbol", "login")])
def test_a_bad_url_or_password_is_one_sentence_without_the_secret(case, command, pg_cluster, pg_url,
                                                                   project_copy, run_cli, env):
    root = project_copy("python_project")
    url = bad_urls(pg_cluster, pg_url)[case]
    proc = run_cli(*command, str(root), "--store", url, "--project-name", "p", check=False, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and proc.stdout == "", out
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memstrata: "), out
    assert SECRET not in out and quote(SECRET) not in out and pg_cluster.password not in out
    assert not (root / ".memstrata").exists()


def test_a_wrong_password_from_the_environment_is_not_shown(pg_cluster, pg_url, project_copy, run_cli, env):
    root = project_copy("python_project")
    url = pg_cluster.url(dbname(pg_url), password=False)
    proc = run_cli("index", str(root), "--store", url, check=False, env={**env, "PGPASSWORD": SECRET})
    assert proc.returncode == 2 and "password" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    # The right one from the environment works: credentials need not be in the URL.
    run_cli("index", str(root), "--store", url, env={**env, "PGPASSWORD": pg_cluster.password})
