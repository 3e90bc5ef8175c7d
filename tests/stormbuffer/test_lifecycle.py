"""Candidates, approval, replacement, archive and the store scopes, end to end.

Agent-side calls go through ``sbuf invoke`` (the protocol every agent path
uses); approvals, rejections and restores only exist as ``sbuf`` commands.
"""

from __future__ import annotations

import tomllib

from memstrata.stormbuffer.codec import parse_record, render_record

from .conftest import SOURCE
from .helpers import hand_written, snapshot


def front(path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8").split("+++\n")[1])


def test_remember_creates_a_candidate_that_recall_skips_until_approved(sbuf):
    sbuf.init()
    proposal = sbuf.remember()
    assert proposal == {"outcome": "requires_approval", "record_id": proposal["record_id"], "related_id": None,
                        "status": "candidate", "message": "candidate awaits explicit approval"}
    record_id = proposal["record_id"]
    path = sbuf.record_file(record_id)
    meta = front(path)
    assert meta["status"] == "candidate" and meta["access"] == "agent" and meta["scope"] == "project:demo-project"
    assert meta["sources"] == [SOURCE] and path.read_text().endswith("+++\n\nReleases ship on Tuesdays.\n")
    assert sbuf.result("context", {"query": "release constraint"})["blocks"] == []
    assert sbuf.result("get", {"id": record_id})["status"] == "candidate"
    assert sbuf.ok("--project", "list") == ""
    assert sbuf.ok("--project", "list", "--all").startswith(f"{record_id}\tcandidate\tdecision\tproject:demo-project")

    assert sbuf.ok("--project", "approve", record_id) == f"{record_id}\taccepted\tactive\n"
    result = sbuf.result("context", {"query": "release constraint", "budget": 256})
    (block,) = result["blocks"]
    assert block["record_id"] == record_id and block["chunk_id"] == f"{record_id}:0"
    assert block["text"] == "Releases ship on Tuesdays." and block["ranking_reasons"] == ["lexical:exact_title"]
    assert block["text_role"] == "untrusted_record_text" and block["token_count"] == 4
    receipt = result["receipt"]
    assert receipt["current_scope"] == "project:demo-project" and receipt["scopes"] == ["project:demo-project",
                                                                                          "global"]
    assert receipt["statuses"] == ["active"] and receipt["access"] == ["agent"] and receipt["used_tokens"] == 4
    assert receipt["index_version"] == 4 and receipt["retrieval_mode"] == "lexical"
    assert receipt["budget_unit"] == "whitespace_tokens" and receipt["embedding_version"] is None

    err = sbuf.fails("--project", "approve", record_id)
    assert err == (f"error: could not update candidate: repository operation failed: record {record_id} must be "
                   "a candidate, not active\n")


def test_a_duplicate_of_a_candidate_names_it_and_writes_nothing(sbuf):
    sbuf.init()
    first = sbuf.remember()
    assert first["outcome"] == "requires_approval"
    files = sbuf.record_files()
    dup = sbuf.remember(title="RELEASE   constraint")
    assert dup == {"outcome": "duplicate_of", "record_id": dup["record_id"], "related_id": first["record_id"],
                   "status": "candidate", "message": "proposal matches an existing memory"}
    assert sbuf.record_files() == files


def test_duplicates_are_not_written_and_conflicts_are(sbuf):
    sbuf.init()
    first = sbuf.active()
    dup = sbuf.remember(body="  releases   SHIP on Tuesdays.  ")
    assert dup["outcome"] == "duplicate_of" and dup["related_id"] == first and dup["status"] == "active"
    assert dup["message"] == "proposal matches an existing memory"
    assert set(dup) == {"outcome", "record_id", "related_id", "status", "message"} and dup["record_id"] != first
    assert not sbuf.record_file(dup["record_id"]).exists()
    conflict = sbuf.remember(body="Releases ship on Thursdays.\n")
    assert conflict["outcome"] == "conflicts_with" and conflict["related_id"] == first
    assert conflict["status"] == "candidate" and sbuf.record_file(conflict["record_id"]).exists()
    # the seed snapshot does not activate a candidate that still overlaps
    assert sbuf.ok("--project", "approve", conflict["record_id"]) == \
        f"{conflict['record_id']}\tconflicts_with\tcandidate\n"
    assert front(sbuf.record_file(conflict["record_id"]))["status"] == "candidate"
    assert sbuf.ok("--project", "reject", conflict["record_id"]) == f"{conflict['record_id']}\taccepted\tarchived\n"
    # other kinds or titles do not overlap
    assert sbuf.remember(kind="fact")["outcome"] == "requires_approval"


def test_update_makes_a_linked_candidate_and_approval_supersedes_atomically(sbuf):
    sbuf.init()
    old = sbuf.active(tags=["release"])
    old_bytes = sbuf.record_file(old).read_bytes()
    source = {"kind": "issue", "reference": "#42", "actor": "release-manager"}
    proposal = sbuf.result("update", {"id": old, "body": "Releases ship on Wednesdays.\n", "source": source})
    assert proposal["outcome"] == "requires_approval" and proposal["related_id"] == old
    assert proposal["message"] == "replacement candidate awaits explicit approval"
    new = proposal["record_id"]
    assert sbuf.record_file(old).read_bytes() == old_bytes  # the active record is untouched
    meta = front(sbuf.record_file(new))
    assert meta["supersedes"] == [old] and meta["sources"] == [source] and meta["tags"] == ["release"]
    assert meta["title"] == "Release constraint" and meta["status"] == "candidate"

    assert sbuf.ok("--project", "approve", new) == f"{new}\taccepted\tactive\n"
    assert front(sbuf.record_file(old))["status"] == "superseded"
    assert front(sbuf.record_file(new))["status"] == "active"
    assert not (sbuf.store / "locks" / "supersede.toml").exists()
    blocks = sbuf.result("context", {"query": "release constraint"})["blocks"]
    assert [b["record_id"] for b in blocks] == [new]
    # superseded is terminal
    assert "must be" in sbuf.fails("--project", "restore", old)


def test_two_agents_updating_one_record_are_told_apart_to_the_person_approving(sbuf):
    # Both replacements carry the record's title with other bodies, so each overlaps the
    # other and neither is activated (the seed's rule); the person is told which record
    # blocks the approval and how to go on, on stderr, with stdout as the seed prints it.
    sbuf.init()
    old = sbuf.active()
    first = sbuf.result("update", {"id": old, "body": "Releases ship on Wednesdays.\n", "source": SOURCE})
    second = sbuf.result("update", {"id": old, "body": "Releases ship on Thursdays.\n", "source": SOURCE})
    assert second["outcome"] == "conflicts_with" and second["related_id"] == first["record_id"]
    a, b = first["record_id"], second["record_id"]
    proc = sbuf.run("--project", "approve", a)
    assert proc.returncode == 0 and proc.stdout.decode() == f"{a}\tconflicts_with\tcandidate\n"
    assert proc.stderr.decode() == (f"note: not approved: record {b} has the same title; reject one of "
                                    "the two (`sbuf reject ID`) to approve the other\n")
    assert sbuf.ok("--project", "reject", b) == f"{b}\taccepted\tarchived\n"
    proc = sbuf.run("--project", "approve", a)
    assert proc.stdout.decode() == f"{a}\taccepted\tactive\n" and proc.stderr == b""
    assert front(sbuf.record_file(old))["status"] == "superseded"


def test_update_inherits_a_missing_body(sbuf):
    sbuf.init()
    old = sbuf.active()
    proposal = sbuf.result("update", {"id": old, "title": "Release day", "source": SOURCE})
    new = parse_record(sbuf.record_file(proposal["record_id"]).read_bytes())
    assert new.body == "Releases ship on Tuesdays.\n" and new.title == "Release day"


def test_forget_archives_and_restore_brings_back(sbuf):
    sbuf.init()
    record_id = sbuf.active()
    assert sbuf.result("archive", {"id": record_id}) == {"outcome": "accepted", "id": record_id,
                                                          "status": "archived"}
    assert sbuf.record_file(record_id).exists() and front(sbuf.record_file(record_id))["status"] == "archived"
    assert sbuf.result("context", {"query": "release constraint"})["blocks"] == []
    assert sbuf.result("get", {"id": record_id})["status"] == "archived"
    assert sbuf.error("archive", {"version": 1, "id": record_id})["code"] == "invalid_state"
    assert sbuf.ok("--project", "restore", record_id) == f"{record_id}\tactive\n"
    assert sbuf.result("context", {"query": "release constraint"})["blocks"][0]["record_id"] == record_id
    assert sbuf.ok("--project", "archive", record_id) == f"{record_id}\tarchived\n"


def test_project_reads_include_the_global_store_and_writes_stay_local(sbuf):
    sbuf.init()
    sbuf.ok("init")
    glob = sbuf.result("remember", {"title": "Release constraint", "kind": "decision",
                                    "body": "Global rule: no releases in August.\n", "source": SOURCE},
                       project=False)["record_id"]
    assert front(sbuf.record_file(glob, sbuf.global_store))["scope"] == "global"
    assert sbuf.ok("approve", glob) == f"{glob}\taccepted\tactive\n"
    local = sbuf.active(title="Release checklist", body="Run the release checklist first.\n")

    blocks = sbuf.result("context", {"query": "release constraint"})["blocks"]
    # scope rank dominates: the project record outranks the global exact-title match
    assert [b["record_id"] for b in blocks] == [local, glob]
    assert blocks[1]["ranking_reasons"] == ["lexical:exact_title"] and blocks[1]["score"] > blocks[0]["score"]
    assert sbuf.result("get", {"id": glob})["scope"] == "global"
    assert sbuf.error("get", {"version": 1, "id": glob, "scope": "project:demo-project"})["code"] == "not_found"
    assert sbuf.error("archive", {"version": 1, "id": glob})["code"] == "not_found"
    assert sbuf.error("update", {"version": 1, "id": glob, "source": SOURCE})["code"] == "not_found"
    # global mode sees only the global store
    assert [b["record_id"] for b in sbuf.result("context", {"query": "release"}, project=False)["blocks"]] == [glob]
    assert sbuf.ok("--project", "list") .startswith(local) and glob not in sbuf.ok("--project", "list")


def test_project_scope_comes_from_the_folder_name(sbuf):
    folder = sbuf.root / "work" / "my app"
    (folder / "sub" / "dir").mkdir(parents=True)
    sbuf.ok("--project", "init", cwd=folder)
    out = sbuf.ok("--project", "root", cwd=folder / "sub" / "dir")
    assert out.strip() == str(folder / ".sbuf")
    assert "scope: project:my-app\n" in sbuf.ok("--project", "status", cwd=folder / "sub")


def test_invoke_propose_and_supersede(sbuf):
    sbuf.init()
    proposal = sbuf.result("propose", {"record": {"title": "Proposed", "kind": "procedure", "body": "do it\n",
                                                  "sources": [SOURCE]}})
    assert proposal["outcome"] == "requires_approval"
    assert front(sbuf.record_file(proposal["record_id"]))["status"] == "candidate"
    old = sbuf.active()
    replaced = sbuf.result("supersede", {"id": old, "body": "Releases ship on Mondays.\n"})
    assert replaced["outcome"] == "accepted" and replaced["status"] == "active"
    assert front(sbuf.record_file(old))["status"] == "superseded"
    assert front(sbuf.record_file(replaced["id"]))["supersedes"] == [old]


def test_an_interrupted_supersession_is_completed_by_the_next_read(sbuf):
    sbuf.init()
    old = sbuf.active()
    new = sbuf.result("update", {"id": old, "body": "Releases ship on Fridays.\n", "source": SOURCE})["record_id"]
    # As if `sbuf approve` was killed after writing its journal and before touching either file:
    old_rec = parse_record(sbuf.record_file(old).read_bytes())
    new_rec = parse_record(sbuf.record_file(new).read_bytes())
    from memstrata.stormbuffer.codec import toml_string
    writes = [(f"{old}.md", render_record(old_rec.evolve(status="superseded"))),
              (f"{new}.md", render_record(new_rec.evolve(status="active")))]
    lines = ["format_version = 1"]
    for rel, data in writes:
        lines += ["", "[[writes]]", f"file = {toml_string(rel)}", f"content = {toml_string(data.decode())}"]
    (sbuf.store / "locks" / "supersede.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    blocks = sbuf.result("context", {"query": "release constraint"})["blocks"]
    assert [b["record_id"] for b in blocks] == [new]
    assert front(sbuf.record_file(old))["status"] == "superseded"
    assert not (sbuf.store / "locks" / "supersede.toml").exists()


def test_a_journal_naming_files_outside_records_is_refused(sbuf):
    sbuf.init()
    sbuf.active()
    (sbuf.store / "locks" / "supersede.toml").write_text(
        'format_version = 1\n\n[[writes]]\nfile = "../store.toml"\ncontent = "x"\n', encoding="utf-8")
    before = snapshot(sbuf.store)
    err = sbuf.error("remember", {"version": 1, "title": "T", "kind": "fact", "body": "b", "source": SOURCE})
    assert err["code"] == "conflict"
    assert snapshot(sbuf.store) == before


def test_hand_edits_additions_and_deletions_are_seen_by_the_next_read(sbuf):
    sbuf.init()
    record_id = sbuf.active()
    path = sbuf.record_file(record_id)
    path.write_text(path.read_text().replace("Tuesdays", "Saturdays"), encoding="utf-8")
    assert "Saturdays" in sbuf.result("get", {"id": record_id})["body"]
    nested = sbuf.records / "team" / "notes"
    nested.mkdir(parents=True)
    extra = hand_written(nested, title="Runbook", body="restart the worker pool\n", name="runbook.md")
    assert sbuf.result("search", {"query": "worker pool"})[0]["record_id"] == extra
    (nested / "runbook.md").unlink()
    assert sbuf.result("search", {"query": "worker pool"}) == []
    (sbuf.store / "index.sqlite3").unlink()
    assert sbuf.result("get", {"id": record_id})["id"] == record_id  # a deleted index is rebuilt


def test_restore_and_archive_only_move_the_state_their_command_names(sbuf):
    # restore makes an *archived* record active; a candidate (here a replacement)
    # becomes active only through approve, which supersedes the record it replaces
    sbuf.init()
    old = sbuf.active()
    new = sbuf.result("update", {"id": old, "body": "Releases ship on Fridays.", "source": SOURCE})["record_id"]
    before = snapshot(sbuf.store / "records")
    err = sbuf.fails("--project", "restore", new)
    assert err == (f"error: could not update record: repository operation failed: record {new} "
                   "must be archived, not candidate\n")
    err = sbuf.fails("--project", "archive", new)
    assert err.endswith(f"record {new} must be active, not candidate\n")
    assert snapshot(sbuf.store / "records") == before
    # a record already in the target state stays the lifecycle's no-op
    assert sbuf.ok("--project", "restore", old) == f"{old}\tactive\n"
    assert sbuf.ok("--project", "approve", new) == f"{new}\taccepted\tactive\n"
    assert front(sbuf.record_file(old))["status"] == "superseded"
    assert sbuf.fails("--project", "archive", old).endswith(f"must be active, not superseded\n")
