"""``kura`` command-line flows, end to end in a temporary KURA_HOME (no daemon unless a test starts one)."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.timeout(180)

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def registry(kura):
    return json.loads((kura.home / "db.json").read_text())


def test_help(kura):
    for args in (("help",), ("--help",), ("-h",)):
        out = kura.ok(*args)
        assert "kura add <name> [PATH]" in out and "kura remote enable|disable" in out
    bad = kura.run("frobnicate")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


@pytest.mark.parametrize("command", ["add", "list", "remove", "edit", "stop", "port", "remote", "mcp"])
def test_help_of_one_command(kura, command):
    # Commands with required arguments must not answer --help with a usage error.
    for flag in ("--help", "-h"):
        out = kura.ok(command, flag)
        lines = out.splitlines()
        assert lines and all(line.startswith(f"kura {command} ") for line in lines), out
    assert kura.ok("list").lower().startswith("no databases")  # `add --help` added nothing
    bad = kura.run("frobnicate", "--help")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_add_list_edit_remove(kura, docs):
    out = kura.ok("add", "my notes", str(docs))
    assert 'added "my_notes"' in out and "3 files" in out
    out = kura.ok("add", "inbox db")
    assert (kura.home / "inbox_db" / "inbox").is_dir() and "drop files into" in out
    entries = registry(kura)
    assert [e["db"] for e in entries] == ["my_notes", "inbox_db"]
    assert all(set(e) == {"db", "createAt"} and RFC3339_UTC.match(e["createAt"]) for e in entries)
    assert (kura.home / "my_notes" / "data.db").is_file()
    assert not (kura.home / "my_notes" / "inbox").exists()

    listing = kura.ok("list")
    assert re.search(r"^my_notes\t\S+\t3 files, \d+ chunks", listing, re.M)
    assert re.search(r"^inbox_db\t\S+\t0 files, 0 chunks", listing, re.M)

    created = entries[0]["createAt"]
    assert 'renamed "my_notes" to "papers"' in kura.ok("edit", "my_notes", "papers")
    assert registry(kura)[0] == {"db": "papers", "createAt": created}
    assert (kura.home / "papers" / "data.db").is_file() and not (kura.home / "my_notes").exists()

    declined = kura.run("remove", "papers", input="n\n")
    assert declined.returncode == 1 and "cancelled" in declined.stderr
    assert kura.run("remove", "papers", input="").returncode == 1  # EOF is not a yes
    assert (kura.home / "papers").exists()
    assert 'removed "papers"' in kura.ok("remove", "papers", input="y\n")
    assert 'removed "inbox_db"' in kura.ok("remove", "inbox_db", "--yes")
    assert registry(kura) == [] and not (kura.home / "papers").exists()
    assert docs.joinpath("notes.md").is_file()  # a PATH database never deletes the user's files
    assert "no databases" in kura.ok("list")


@pytest.mark.parametrize("args,message", [
    (("add", "dup"), 'database "dup" already exists'),
    (("add", "x", "/nonexistent/folder"), "is not a folder"),
    (("add", "a/b"), "invalid database name"),
    (("add", ".hidden"), "invalid database name"),
    (("add", "   "), "database name is empty"),
    (("add", "db.json"), "reserved"),
    (("remove", "nope", "--yes"), 'database "nope" not exist'),
    (("edit", "nope", "x"), 'database "nope" not exist'),
    (("edit", "dup", "dup2"), 'database "dup2" already exists'),
])
def test_bad_input(kura, args, message):
    kura.ok("add", "dup")
    kura.ok("add", "dup2")
    proc = kura.run(*args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert [e["db"] for e in registry(kura)] == ["dup", "dup2"]


@pytest.mark.parametrize("args,message", [
    (("port", "set", "0"), "port must be from 1 to 65535"),
    (("port", "set", "65536"), "port must be from 1 to 65535"),
    (("port", "set", "-5"), "port must be from 1 to 65535"),
    (("port", "set", "abc"), "port must be a number"),
    (("port", "set"), "port must be a number"),
    (("port", "clear", "8080"), "takes no argument"),
    (("add", "-x"), "unknown option -x"),
    (("remove", "--force", "x"), "unknown option --force"),
])
def test_usage_errors_exit_2(kura, args, message):
    proc = kura.run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("kura: ") and message in first and "Traceback" not in proc.stderr


def test_port_and_remote_config_without_a_daemon(kura):
    assert "port set to 23456" in kura.ok("port", "set", "23456")
    assert json.loads((kura.home / "config.json").read_text()) == {"port": 23456}
    kura.ok("remote", "enable")
    assert json.loads((kura.home / "config.json").read_text()) == {"port": 23456, "remote": True}
    kura.ok("port", "clear")
    kura.ok("remote", "disable")
    assert json.loads((kura.home / "config.json").read_text()) == {}
    assert "not running" in kura.ok("stop")
    assert not (kura.home / "endpoint").exists()


def test_broken_registry_is_reported_not_a_traceback(kura):
    kura.home.mkdir(parents=True)
    (kura.home / "db.json").write_text("{not json")
    proc = kura.run("list")
    assert proc.returncode == 1 and "db.json is not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_failed_rewrite_leaves_the_old_file_and_no_temp_file(tmp_path):
    """Every rewrite of a home file goes through storage/files.py's atomic_write_text: on failure the
    temp file is removed (the old write_text_atomic left it behind) and the target is as it was."""
    from memstrata.kura.registry import write_text_atomic

    target = tmp_path / "endpoint"
    target.mkdir()  # os.replace onto a folder fails
    with pytest.raises(OSError):
        write_text_atomic(target, "http://127.0.0.1:1\n")
    assert target.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["endpoint"]
    (tmp_path / "db.json").write_text("[]\n")
    write_text_atomic(tmp_path / "db.json", '[{"db": "x"}]\n')
    assert (tmp_path / "db.json").read_text() == '[{"db": "x"}]\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.json", "endpoint"]


def test_an_add_killed_midway_leaves_nothing_in_the_way(kura, tmp_path):
    import fcntl
    import signal

    many = tmp_path / "many"
    many.mkdir()
    for k in range(3000):
        (many / f"note_{k}.md").write_text(f"# Note {k}\n\n" + "words about the topic at hand " * 40 + "\n")
    proc = kura.popen("add", "big", str(many))
    assert "indexing" in proc.stderr.readline()  # killed while it indexes, before it could clean up
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (kura.home / "big").is_dir() and not (kura.home / "db.json").exists()  # never registered

    # Running the same add again takes the folder back; so would `kura remove`.
    out = kura.run("add", "big", str(many), timeout=300)
    assert out.returncode == 0 and 'added "big"' in out.stdout and "interrupted" in out.stderr, out.stderr
    assert not (kura.home / "big" / ".adding").exists()
    kura.ok("remove", "big", "--yes")

    # An unregistered folder whose add still runs (its marker locked) is not taken.
    (kura.home / "busy").mkdir()
    with open(kura.home / "busy" / ".adding", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = kura.run("add", "busy")
        assert busy.returncode != 0 and "another `kura add busy` is adding this database now" in busy.stderr
    assert 'removed what an interrupted `kura add busy` left' in kura.ok("remove", "busy", "--yes")
    assert not (kura.home / "busy").exists()
    # A folder Kura did not make stays where it is.
    (kura.home / "mine").mkdir()
    assert "already exists; remove it or choose another name" in kura.run("add", "mine").stderr
