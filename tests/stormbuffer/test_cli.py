"""The human ``sbuf`` commands, including the editor-based ones with a real $EDITOR process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstrata.stormbuffer.codec import parse_record

from .conftest import SBUF, assert_clean
from .helpers import editor_script, hand_written, snapshot


def test_help_and_version(sbuf):
    out = sbuf.ok("--help")
    for command in ("init", "approve", "invoke", "mcp --stdio", "reindex", "doctor"):
        assert command in out
    assert sbuf.ok("--version").startswith("sbuf ")
    assert sbuf.run("--project", "--global", "list").returncode == 2
    assert sbuf.run("frobnicate").returncode == 2


def test_every_option_says_what_it_does():
    # `sbuf search --help` listed --limit and --json with no word on what they take or do.
    import argparse

    from memstrata.stormbuffer.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    silent = [f"{name} {action.option_strings or action.dest}"
              for name, sub in subparsers.choices.items() for action in sub._actions
              if action.help is None and action.dest not in ("help", "id", "query")]
    assert silent == []


def test_init_is_idempotent_and_writes_the_marker(sbuf):
    assert sbuf.init() == f"Initialized project store at {sbuf.store}\n"
    assert sbuf.init() == f"Already initialized project store at {sbuf.store}\n"
    assert (sbuf.store / "store.toml").read_text() == 'format_version = 1\nscope = "project"\nvisibility = "private"\n'
    assert (sbuf.store / ".gitignore").read_text() == "*\n!.gitignore\n"
    assert "shared stores require project scope" in sbuf.fails("init", "--shared")
    assert "private" in sbuf.fails("--project", "init", "--shared")
    assert sbuf.ok("init") == f"Initialized global store at {sbuf.global_store}\n"
    assert (sbuf.cache / "stormbuffer" / "global.sqlite3").exists()


def test_shared_init(sbuf):
    assert sbuf.init("--shared") == f"Initialized project store at {sbuf.store} (shared)\n"
    assert sbuf.init() == f"Already initialized project store at {sbuf.store} (shared)\n"
    assert "!records/**/*.md" in (sbuf.store / ".gitignore").read_text()


def test_root_and_status_never_create_anything(sbuf):
    assert sbuf.ok("--project", "root") == f"{sbuf.store}\n"
    assert sbuf.ok("root") == f"{sbuf.global_store}\n"
    status = json.loads(sbuf.ok("--project", "status", "--json"))
    # "scope" is the store kind, not the record scope string (spec 7.5)
    assert status == {"scope": "project", "root": str(sbuf.store), "initialized": False,
                      "visibility": None, "record_count": 0}
    assert not sbuf.store.exists()
    sbuf.init()
    sbuf.active()
    sbuf.remember("Second", "second body\n")
    status = json.loads(sbuf.ok("--project", "status", "--json"))
    assert status["initialized"] is True and status["visibility"] == "private" and status["record_count"] == 2
    assert status["scope"] == "project"
    assert "scope: project:demo-project\n" in sbuf.ok("--project", "status")
    assert json.loads(sbuf.ok("status", "--json"))["scope"] == "global"
    assert "not initialized" in sbuf.fails("list")  # the global store is not


def test_list_show_search_context(sbuf):
    sbuf.init()
    active = sbuf.active()
    candidate = sbuf.remember("Deploy freeze", "no deploys on Friday\n")["record_id"]
    assert sbuf.ok("--project", "list") == f"{active}\tactive\tdecision\tproject:demo-project\tRelease constraint\n"
    assert candidate in sbuf.ok("--project", "list", "--all")
    assert sbuf.run("--project", "show", active).stdout == sbuf.record_file(active).read_bytes()
    assert "was not found" in sbuf.fails("--project", "show", "01a230eb-45de-7267-accc-0c45fa586a22")
    assert "is not a record identifier" in sbuf.fails("--project", "show", "nope")
    rows = sbuf.ok("--project", "search", "release").splitlines()
    assert len(rows) == 1 and rows[0].split("\t")[1] == active
    found = json.loads(sbuf.ok("--project", "search", "deploy", "--all", "--json"))
    assert [r["record_id"] for r in found] == [candidate] and found[0]["vector_distance"] is None
    context = json.loads(sbuf.ok("--project", "context", "release", "--budget", "2"))
    assert context["receipt"]["budget"] == 2 and context["blocks"][0]["text"] == "Releases ship"
    assert context["receipt"]["access"] == ["agent", "human"]  # the human CLI filters no access


def test_sync_reindex_doctor(sbuf):
    sbuf.init()
    sbuf.active()
    # approve wrote the file after its own sync; the next sync re-projects it, the one after finds nothing
    assert sbuf.ok("--project", "sync") == "synced 1 record files: 0 added, 1 updated, 0 removed, 0 invalid\n"
    assert sbuf.ok("--project", "sync") == "synced 1 record files: 0 added, 0 updated, 0 removed, 0 invalid\n"
    assert sbuf.ok("--project", "reindex") == "reindexed 1 record files (0 invalid)\n"
    assert "problem" not in sbuf.ok("--project", "doctor")
    (sbuf.records / "bad.md").write_text("not a record\n", encoding="utf-8")
    before = snapshot(sbuf.store)
    proc = sbuf.run("--project", "doctor")
    assert proc.returncode == 1
    assert "problem: records/bad.md: record must start with a `+++` line" in proc.stdout.decode()
    assert sbuf.run("--project", "sync").returncode == 1
    assert "invalid" in sbuf.fails("--project", "list")
    assert snapshot(sbuf.store) == before


def test_editor_add_is_a_human_record(sbuf, tmp_path):
    sbuf.init()
    editor = editor_script(tmp_path, "path.write_text(path.read_text().replace('title = \"\"', "
                                     "'title = \"Vault location\"') + 'The vault is in room 3.\\n')\n")
    out = sbuf.ok("--project", "add", env={**sbuf.env, "EDITOR": editor})
    record_id = out.strip()
    rec = parse_record(sbuf.record_file(record_id).read_bytes())
    assert rec.access == "human" and rec.status == "active" and rec.title == "Vault location"
    assert rec.sources[0].reference == "stormbuffer:cli" and rec.body == "The vault is in room 3.\n"
    assert sbuf.result("search", {"query": "vault"}) == []  # never reaches an agent
    assert record_id in sbuf.ok("--project", "search", "vault")


def test_editor_problems_save_nothing(sbuf, tmp_path):
    sbuf.init()
    env = {k: v for k, v in sbuf.env.items() if k not in ("EDITOR", "VISUAL")}
    assert "VISUAL or $EDITOR" in sbuf.fails("--project", "add", env=env)
    assert "status 3" in sbuf.fails("--project", "add", "--title", "T", "--body", "b",
                                    env={**env, "EDITOR": editor_script(tmp_path, "raise SystemExit(3)\n")})
    assert "invalid" in sbuf.fails("--project", "add", env={**env, "EDITOR": "true"})  # empty title and body
    broken = editor_script(tmp_path, "path.write_text('garbage')\n")
    err = sbuf.fails("--project", "add", "--title", "T", "--body", "b", env={**env, "EDITOR": broken})
    error, kept = err.splitlines()
    assert_clean(error, sbuf)
    assert sbuf.record_files() == []
    # what the person typed is kept, even when it does not parse
    assert kept.startswith("your edited text is kept in ")
    assert Path(kept.removeprefix("your edited text is kept in ")).read_text() == "garbage"


def _kept_drafts(sbuf) -> list[str]:
    return sorted(p.read_text() for p in (sbuf.root / "tmp").glob("sbuf-edit-*/record.md"))


def test_an_edit_refused_for_a_concurrent_change_keeps_the_persons_text(sbuf, tmp_path):
    # Two people (or a person and a script) edit one record: the second save is
    # refused as the spec says, and the text typed for it is kept and named.
    sbuf.init()
    active = sbuf.active()
    other = editor_script(tmp_path, "path.write_text(path.read_text().replace('Tuesdays', 'Sundays'))\n")
    meddle = editor_script(tmp_path, "import os, subprocess, sys\n"
                                     f"subprocess.run([{SBUF!r}, '--project', 'edit', {active!r}], check=True, "
                                     f"env={{**os.environ, 'EDITOR': {other!r}}})\n"
                                     "path.write_text(path.read_text() + 'Ten minutes of careful notes.\\n')\n")
    proc = sbuf.run("--project", "edit", active, env={**sbuf.env, "EDITOR": meddle})
    assert proc.returncode == 1
    error, kept = proc.stderr.decode().splitlines()
    assert error == "error: the record changed while it was open in the editor; nothing was saved"
    saved = sbuf.record_file(active).read_text()
    assert "Sundays" in saved and "careful notes" not in saved  # the acknowledged edit stays
    [draft] = _kept_drafts(sbuf)
    assert kept == f"your edited text is kept in {next((sbuf.root / 'tmp').glob('sbuf-edit-*/record.md'))}"
    assert "Tuesdays" in draft and draft.endswith("Ten minutes of careful notes.\n")


def test_the_editor_commands_say_what_happens_to_a_refused_edit(sbuf):
    for command in ("edit", "add", "propose", "supersede"):
        text = " ".join(sbuf.ok(command, "--help").split())
        assert "the record changed while it was open" in text and "the edited copy is kept" in text, command


def test_an_editor_that_gives_up_or_changes_nothing_keeps_nothing(sbuf, tmp_path):
    sbuf.init()
    active = sbuf.active()
    quit_ = editor_script(tmp_path, "path.write_text('half typed'); raise SystemExit(1)\n")
    assert "status 1" in sbuf.fails("--project", "edit", active, env={**sbuf.env, "EDITOR": quit_})
    assert sbuf.ok("--project", "edit", active, env={**sbuf.env, "EDITOR": "true"}) == f"{active}\tunchanged\n"
    assert _kept_drafts(sbuf) == []


def test_editor_propose_edit_supersede(sbuf, tmp_path):
    sbuf.init()
    env = {**sbuf.env, "EDITOR": "true"}
    out = sbuf.ok("--project", "propose", "--title", "Cache policy", "--kind", "decision",
                  "--body", "cache for an hour\n", env=env)
    candidate, outcome = out.strip().split("\t")
    assert outcome == "requires_approval"
    assert parse_record(sbuf.record_file(candidate).read_bytes()).sources[0].reference == "stormbuffer:cli/propose"

    active = sbuf.active()
    retitle = editor_script(tmp_path, "path.write_text(path.read_text().replace('Tuesdays', 'Mondays'))\n")
    assert sbuf.ok("--project", "edit", active, env={**sbuf.env, "EDITOR": retitle}) == f"{active}\tactive\n"
    assert "Mondays" in sbuf.record_file(active).read_text()

    meddle = editor_script(tmp_path, f"import pathlib\nrec = pathlib.Path({str(sbuf.record_file(active))!r})\n"
                                     "rec.write_text(rec.read_text().replace('Mondays', 'Sundays'))\n"
                                     "path.write_text(path.read_text().replace('Mondays', 'Fridays'))\n")
    assert "changed while it was open" in sbuf.fails("--project", "edit", active, env={**sbuf.env, "EDITOR": meddle})
    assert "Sundays" in sbuf.record_file(active).read_text()

    out = sbuf.ok("--project", "supersede", active, "--body", "Releases ship daily.\n", env=env)
    new = out.split("\t")[0]
    assert parse_record(sbuf.record_file(active).read_bytes()).status == "superseded"
    rec = parse_record(sbuf.record_file(new).read_bytes())
    assert rec.status == "active" and rec.supersedes == [active] and rec.body == "Releases ship daily.\n"
    assert "must be active" in sbuf.fails("--project", "edit", active, env=env)


def test_visual_wins_over_editor(sbuf, tmp_path):
    sbuf.init()
    visual = editor_script(tmp_path, "path.write_text(path.read_text() + 'from visual\\n')\n")
    env = {**sbuf.env, "VISUAL": visual, "EDITOR": editor_script(tmp_path, "raise SystemExit(9)\n")}
    record_id = sbuf.ok("--project", "add", "--title", "V", "--body", "", env=env).strip()
    assert parse_record(sbuf.record_file(record_id).read_bytes()).body == "from visual\n"


def test_human_commands_apply_no_access_filter(sbuf):
    sbuf.init()
    human = hand_written(sbuf.records, title="Human only", access="human")
    assert sbuf.ok("--project", "archive", human) == f"{human}\tarchived\n"
    assert sbuf.ok("--project", "restore", human) == f"{human}\tactive\n"


@pytest.mark.parametrize("args", [("mcp",), ("mcp", "--allow-writes")])
def test_mcp_subcommand_needs_stdio(sbuf, args):
    assert sbuf.run("--project", *args).returncode == 2


def test_mcp_subcommand_serves(sbuf, tmp_path):
    import subprocess
    sbuf.init()
    lines = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26",'
             b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
             b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    proc = subprocess.run([SBUF, "--project", "mcp", "--stdio"], input=lines, capture_output=True,
                          cwd=sbuf.project, env=sbuf.env, timeout=60)
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and [r["id"] for r in replies] == [1, 2]
    assert "project store" in replies[0]["result"]["instructions"]
    assert replies[0]["result"]["protocolVersion"] == "2025-03-26"
