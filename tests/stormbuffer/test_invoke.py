"""``sbuf invoke``: every error code of the version-1 protocol, from the input that triggers it.

Each case runs the real console script with a real store in temporary XDG
folders and checks the envelope, the exit code, an empty stderr and that no
message carries a path or a traceback.
"""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from memstrata.stormbuffer.records import new_id

from .conftest import SOURCE, assert_clean
from .helpers import add_human_record, hand_written, read_only, snapshot

V = {"version": 1}


def code_and_message(sbuf, op, request, **kw):
    err = sbuf.error(op, request, **kw)
    return err["code"], err["message"]


# -- transport --------------------------------------------------------------------


def test_success_envelope_is_one_sorted_compact_line(sbuf):
    sbuf.init()
    envelope, proc = sbuf.invoke("context", {"version": 1, "query": "release constraint", "budget": 256})
    assert envelope["ok"] is True and set(envelope["result"]) == {"contract", "blocks", "receipt"}
    line = proc.stdout.decode().rstrip("\n")
    assert line == json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert list(envelope) == sorted(envelope)


@pytest.mark.parametrize("data", [b"xx", b"", b"{} {}", b'{"version":1', b"\xff\xfe{}", b"NaN",
                                  b'{"version": 1, "query": "\\ud800"}',
                                  # serde_json refuses a number past f64's range and a 128th nested container
                                  b'{"version": 1, "query": "x", "limit": 1e400}',
                                  b'{"version": 1, "query": "x", "scopes": ' + b"[" * 127 + b"]" * 127 + b"}"])
def test_invalid_json(sbuf, data):
    sbuf.init()
    assert code_and_message(sbuf, "search", data) == ("invalid_json", "stdin must contain one JSON object")


def test_minus_zero_is_no_integer_as_serde_json_reads_it(sbuf):
    # serde_json reads the literal -0 as the float -0.0; 126 nested arrays are still JSON to it.
    sbuf.init()
    assert code_and_message(sbuf, "context", b'{"version": 1, "query": "q", "limit": -0}') == (
        "invalid_request", "field `limit` must be an integer")
    deep = b'{"version": 1, "query": "q", "scopes": ' + b"[" * 126 + b"]" * 126 + b"}"
    assert code_and_message(sbuf, "context", deep) == ("invalid_request", "field `scopes` must hold scope strings")


def test_input_too_large(sbuf):
    sbuf.init()
    big = json.dumps({"version": 1, "query": "x" * 262_144}).encode()
    assert code_and_message(sbuf, "search", big) == ("input_too_large", "request exceeds the bounded input limit")
    exact = b" " * (262_144 - len(b'{"version":1,"query":"q"}')) + b'{"version":1,"query":"q"}'
    assert sbuf.invoke("search", exact)[0]["ok"] is True  # exactly at the limit is fine


@pytest.mark.parametrize("request_, message", [
    ([1], "request must be a JSON object"),
    ('"text"', "request must be a JSON object"),
    ({}, "request must include integer version 1"),
    ({"version": "1"}, "request must include integer version 1"),
    ({"version": 1.0}, "request must include integer version 1"),
    ({"version": -1}, "request must include integer version 1"),
    ({"version": True}, "request must include integer version 1"),
    ({"version": 1, "operation": "search"}, "request operation does not match the command operation"),
    ({"version": 1, "query": "q", "colour": "red"}, "request contains an unknown field"),
])
def test_request_map_checks(sbuf, request_, message):
    sbuf.init()
    assert code_and_message(sbuf, "context", request_) == ("invalid_request", message)


def test_unsupported_version_and_order_of_checks(sbuf):
    sbuf.init()
    assert code_and_message(sbuf, "context", {"version": 2, "query": "q"})[0] == "unsupported_version"
    # version is checked before the operation name, the operation before the keys
    assert code_and_message(sbuf, "approve", {"version": 2})[0] == "unsupported_version"
    assert code_and_message(sbuf, "approve", {"version": 1, "path": "/etc"})[0] == "unknown_operation"
    assert code_and_message(sbuf, "search", {"version": 1, "operation": "get", "path": "x"})[0] == "invalid_request"


@pytest.mark.parametrize("operation", ["approve", "restore", "reindex", "delete", "sql"])
def test_unknown_operation_echoes_the_name(sbuf, operation):
    sbuf.init()
    envelope, _ = sbuf.invoke(operation, V)
    assert envelope == {"version": 1, "operation": operation, "ok": False,
                        "error": {"code": "unknown_operation",
                                  "message": "operation is not supported by protocol version 1"}}


@pytest.mark.parametrize("key", ["path", "root", "store", "db_path", "file", "filename", "profile"])
def test_path_like_keys_are_denied_without_echo(sbuf, key):
    sbuf.init()
    secret = "/etc/shadow-and-more"
    envelope, proc = sbuf.invoke("search", {"version": 1, "query": "q", key: secret})
    assert envelope["error"] == {"code": "path_denied",
                                 "message": "filesystem paths are not accepted by the invocation protocol"}
    assert secret.encode() not in proc.stdout


@pytest.mark.parametrize("key", ["Path", "ROOT", "Store", "DB_PATH", "db_Path", "File", "Filename", "PROFILE"])
def test_path_like_names_are_matched_case_sensitively(sbuf, key):
    """Stormbuffer's ensure_keys compares the key as written: ``Path`` is no path, just unknown."""
    sbuf.init()
    assert code_and_message(sbuf, "search", {"version": 1, "query": "q", key: 2}) == \
        ("invalid_request", "request contains an unknown field")
    fields = {"title": "T", "kind": "fact", "body": "b", "source": {**SOURCE, key: "x"}}
    assert code_and_message(sbuf, "remember", {**V, **fields}) == \
        ("invalid_request", "request contains an unknown field")
    record = {"title": "T", "kind": "fact", "body": "b", "sources": [SOURCE], key: "x"}
    assert code_and_message(sbuf, "propose", {"version": 1, "record": record}) == \
        ("invalid_request", "request contains an unknown field")


def test_keys_are_checked_in_sorted_order(sbuf):
    sbuf.init()
    # "colour" < "path": the unknown field is reported first
    assert code_and_message(sbuf, "search", {"version": 1, "query": "q", "path": "x", "colour": 1})[0] == \
        "invalid_request"
    assert code_and_message(sbuf, "search", {"version": 1, "query": "q", "path": "x", "zebra": 1})[0] == \
        "path_denied"


@pytest.mark.parametrize("fields, message", [
    ({}, "field `query` must be a bounded string"),  # missing: the wrong-type sentence (spec 7.5)
    ({"query": ""}, "field `query` must be a bounded string"),
    ({"query": 7}, "field `query` must be a bounded string"),
    ({"query": "é" * 1025}, "query is too long"),
    ({"query": "q", "limit": "5"}, "field `limit` must be an integer"),
    ({"query": "q", "limit": -1}, "field `limit` must be an integer"),
    ({"query": "q", "budget": 2.5}, "field `budget` must be an integer"),
    ({"query": "q", "scope": "global", "scopes": ["global"]}, "use either scope or scopes, not both"),
    ({"query": "q", "scopes": []}, "scope filter is out of bounds"),
    ({"query": "q", "scopes": ["global"] * 17}, "scope filter is out of bounds"),
    ({"query": "q", "scopes": "global"}, "field `scopes` must be an array"),
    ({"query": "q", "scopes": [1]}, "field `scopes` must hold scope strings"),
    ({"query": "q", "scope": 3}, "scope must be a string"),
    ({"query": "q", "scope": None}, "scope must be a string"),
    ({"query": "q", "access": "robot"}, "access must be `agent` or `human`"),
])
def test_context_field_errors(sbuf, fields, message):
    sbuf.init()
    assert code_and_message(sbuf, "context", {**V, **fields}) == ("invalid_request", message)


def test_limits_and_budgets_are_clamped_not_refused(sbuf):
    sbuf.init()
    for n in range(3):
        sbuf.active(title=f"Deploy note {n}", body=f"deploy steps number {n} with words here\n")
    result = sbuf.result("context", {"query": "deploy", "limit": 0, "budget": 100_000})
    assert len(result["blocks"]) == 1 and result["receipt"]["budget"] == 4096
    result = sbuf.result("context", {"query": "deploy", "limit": 10_000, "budget": 0})
    assert result["receipt"]["budget"] == 1 and result["receipt"]["used_tokens"] == 1
    assert result["receipt"]["truncated"] is True and len(result["blocks"]) == 1
    assert result["receipt"]["omitted_results"] == 2
    assert sbuf.result("search", {"query": "deploy", "limit": 2}) and \
        len(sbuf.result("search", {"query": "deploy", "limit": 2})) == 2
    access_ignored = sbuf.result("context", {"query": "deploy", "access": 5})
    assert access_ignored["receipt"]["access"] == ["agent"]
    assert sbuf.result("context", {"query": "   "})["blocks"] == []


@pytest.mark.parametrize("fields, message", [
    ({"title": "T", "kind": "fact", "body": "b", "source": "chat"}, "source must be an object"),
    ({"kind": "fact", "body": "b", "source": SOURCE}, "field `title` is required"),
    ({"title": "", "kind": "fact", "body": "b", "source": SOURCE}, "field `title` must be a bounded string"),
    ({"title": "T", "body": "b", "source": SOURCE}, "field `kind` is required"),
    ({"title": "T", "kind": "musing", "body": "b", "source": SOURCE}, "kind is invalid"),
    ({"title": "T", "kind": "fact", "scope": "project:a b", "body": "b", "source": SOURCE}, "scope is invalid"),
    ({"title": "T", "kind": "fact", "tags": "x", "body": "b", "source": SOURCE}, "field `tags` must be an array"),
    ({"title": "T", "kind": "fact", "tags": ["t"] * 129, "body": "b", "source": SOURCE},
     "record collection is too large"),
    ({"title": "T", "kind": "fact", "aliases": ["x" * 513], "body": "b", "source": SOURCE},
     "record collection contains an invalid string"),
    ({"title": "T", "kind": "fact", "tags": [""], "body": "b", "source": SOURCE},
     "record collection contains an invalid string"),
    ({"title": "T", "kind": "fact", "body": "b", "source": {**SOURCE, "when": "now"}},
     "request contains an unknown field"),
    ({"title": "T", "kind": "fact", "body": "b", "source": {"reference": "r", "actor": "a"}},
     "source kind is required"),
    ({"title": "T", "kind": "fact", "body": "b", "source": {**SOURCE, "kind": "rumour"}}, "source kind is invalid"),
    ({"title": "T", "kind": "fact", "body": "b", "source": {**SOURCE, "reference": "r" * 2049}},
     "source reference is invalid"),
    ({"title": "T", "kind": "fact", "body": "b", "source": {**SOURCE, "actor": "a" * 257}},
     "source actor is invalid"),
    ({"title": "T", "kind": "fact", "source": SOURCE}, "field `body` is required"),
    ({"title": "T", "kind": "fact", "body": "b" * 65_537, "source": SOURCE}, "field `body` must be a bounded string"),
    ({"title": "T", "kind": "fact", "body": "b", "source": SOURCE, "status": "active"},
     "request contains an unknown field"),
    ({"title": "T", "kind": "fact", "body": "b", "source": SOURCE, "access": "agent"},
     "request contains an unknown field"),
])
def test_remember_field_errors(sbuf, fields, message):
    sbuf.init()
    assert code_and_message(sbuf, "remember", {**V, **fields}) == ("invalid_request", message)
    assert sbuf.record_files() == []


def test_source_key_that_looks_like_a_path(sbuf):
    sbuf.init()
    fields = {"title": "T", "kind": "fact", "body": "b", "source": {**SOURCE, "file": "/etc/passwd"}}
    assert code_and_message(sbuf, "remember", {**V, **fields})[0] == "path_denied"


def test_invalid_outcomes_are_ok_and_write_nothing(sbuf):
    sbuf.init()
    no_source = sbuf.result("remember", {"title": "T", "kind": "fact", "body": "b"})
    assert no_source["outcome"] == "invalid" and no_source["status"] is None and no_source["related_id"] is None
    assert no_source["message"] == ("invalid record record: field `sources` is invalid: must contain at least "
                                    "one source")
    blank = sbuf.result("remember", {"title": " padded", "kind": "fact", "body": "b", "source": SOURCE})
    assert blank["outcome"] == "invalid" and "field `title`" in blank["message"]
    inferred = sbuf.result("remember", {"title": "T", "kind": "fact", "body": "b",
                                        "source": {**SOURCE, "actor": "inference"}})
    assert inferred["outcome"] == "invalid"
    assert sbuf.record_files() == []


@pytest.mark.parametrize("extra", [{"actor": "human"}, {"actor": "user"}, {"approved": True},
                                   {"approved": False}, {"approved": None}])
def test_agent_writes_never_claim_approval(sbuf, extra):
    sbuf.init()
    fields = {"title": "T", "kind": "fact", "body": "b", "source": SOURCE, **extra}
    assert code_and_message(sbuf, "remember", {**V, **fields}) == \
        ("permission_denied", "agent writes always require explicit human approval")
    assert code_and_message(sbuf, "update", {**V, "id": new_id(), **extra})[0] == "permission_denied"
    assert sbuf.record_files() == []
    assert sbuf.result("remember", {**fields, **({"actor": "agent"} if "actor" in extra else {})}
                       if "approved" not in extra else {"title": "T", "kind": "fact", "body": "b",
                                                        "source": SOURCE})["outcome"] == "requires_approval"


def test_human_access_is_refused(sbuf):
    sbuf.init()
    for op, request in (("context", {"query": "q"}), ("search", {"query": "q"}), ("get", {"id": new_id()}),
                        ("archive", {"id": new_id()})):
        assert code_and_message(sbuf, op, {**V, **request, "access": "human"}) == \
            ("permission_denied", "the invoke protocol is limited to agent-readable records")
    assert code_and_message(sbuf, "propose", {**V, "access": "human"}) == \
        ("permission_denied", "invoke proposals always require explicit human approval")
    assert code_and_message(sbuf, "propose", {**V, "status": "active"}) == \
        ("permission_denied", "invoke proposals always require explicit human approval")
    assert code_and_message(sbuf, "supersede", {**V, "id": new_id(), "access": "human"}) == \
        ("permission_denied", "agent invocations may only write agent-accessible records")


def test_ids(sbuf):
    sbuf.init()
    assert code_and_message(sbuf, "get", {**V, "id": "not-a-uuid"}) == \
        ("invalid_request", "id must be a valid record identifier")
    assert code_and_message(sbuf, "get", {**V, "id": "00000000-0000-0000-0000-000000000000"})[0] == \
        "invalid_request"
    assert code_and_message(sbuf, "get", V) == ("invalid_request", "field `id` must be a bounded string")
    assert code_and_message(sbuf, "archive", V) == ("invalid_request", "field `id` must be a bounded string")
    assert code_and_message(sbuf, "update", {**V, "source": SOURCE}) == \
        ("invalid_request", "field `id` must be a bounded string")
    record_id = sbuf.active()
    # any UUID spelling finds the record
    assert sbuf.result("get", {"id": "{" + record_id.upper() + "}"})["id"] == record_id
    assert code_and_message(sbuf, "get", {**V, "id": new_id()}) == ("not_found", "record was not found")
    assert code_and_message(sbuf, "archive", {**V, "id": new_id()})[0] == "not_found"
    assert code_and_message(sbuf, "update", {**V, "id": new_id(), "source": SOURCE})[0] == "not_found"


def test_scope_filters(sbuf):
    sbuf.init()
    record_id = sbuf.active()
    for scope in ("project:other", "nope", "", "global:x"):
        assert code_and_message(sbuf, "context", {**V, "query": "q", "scope": scope}) == \
            ("scope_denied", "requested scope is outside the selected store boundary")
    assert code_and_message(sbuf, "get", {**V, "id": record_id, "scopes": ["project:demo-project", "x"]})[0] == \
        "scope_denied"
    only_global = sbuf.result("context", {"query": "release", "scope": "global"})
    assert only_global["blocks"] == [] and only_global["receipt"]["scopes"] == ["global"]
    # global mode: the project scope is outside the view
    assert code_and_message(sbuf, "context", {**V, "query": "q", "scope": "project:demo-project"},
                            project=False)[0] == "scope_denied"


def test_writes_must_carry_the_store_scope(sbuf):
    sbuf.init()
    assert code_and_message(sbuf, "remember", {**V, "title": "T", "kind": "fact", "body": "b", "source": SOURCE,
                                               "scope": "global"}) == \
        ("scope_denied", "record is outside the selected scope")
    assert sbuf.record_files() == []


def test_record_scope_outside_the_view(sbuf):
    sbuf.init()
    foreign = hand_written(sbuf.records, scope="project:renamed-folder")
    assert code_and_message(sbuf, "get", {**V, "id": foreign}) == \
        ("scope_denied", "record is outside the selected scope")
    assert code_and_message(sbuf, "archive", {**V, "id": foreign})[0] == "scope_denied"


def test_human_records_are_not_available_to_agents(sbuf):
    sbuf.init()
    human = add_human_record(sbuf, title="Passwords", body="the vault lives in the safe\n")
    assert code_and_message(sbuf, "get", {**V, "id": human}) == \
        ("access_denied", "record is not available to this access class")
    assert code_and_message(sbuf, "update", {**V, "id": human, "body": "x", "source": SOURCE})[0] == "access_denied"
    assert code_and_message(sbuf, "archive", {**V, "id": human})[0] == "access_denied"
    assert sbuf.result("context", {"query": "vault safe passwords"})["blocks"] == []
    assert sbuf.result("search", {"query": "vault"}) == []


def test_invalid_state(sbuf):
    sbuf.init()
    candidate = sbuf.remember()["record_id"]
    message = "record lifecycle state does not permit this operation"
    assert code_and_message(sbuf, "archive", {**V, "id": candidate}) == ("invalid_state", message)
    assert code_and_message(sbuf, "update", {**V, "id": candidate, "body": "new", "source": SOURCE}) == \
        ("invalid_state", message)
    # an update's invalid fields are reported before the target's state
    assert sbuf.result("update", {"id": candidate, "body": "new"})["outcome"] == "invalid"


def test_not_initialized_creates_nothing(sbuf):
    for op, request in (("context", {"query": "q"}), ("search", {"query": "q"}), ("get", {"id": new_id()}),
                        ("remember", {"title": "T", "kind": "fact", "body": "b", "source": SOURCE}),
                        ("update", {"id": new_id(), "source": SOURCE}), ("archive", {"id": new_id()}),
                        ("propose", {"title": "T", "kind": "fact", "body": "b", "sources": [SOURCE]})):
        for project in (True, False):
            assert code_and_message(sbuf, op, {**V, **request}, project=project) == \
                ("not_initialized", "the selected store is not initialized")
    assert not (sbuf.project / ".sbuf").exists()
    assert not sbuf.data.exists() and not sbuf.cache.exists()


def test_invalid_records_fail_reads_and_writes_and_nothing_is_rewritten(sbuf):
    sbuf.init()
    good = sbuf.active()
    (sbuf.records / "broken.md").write_bytes(b"+++\ntitle = 'no front matter end'\n")
    before = snapshot(sbuf.store)
    for op, request in (("context", {"query": "release"}), ("search", {"query": "release"}), ("get", {"id": good})):
        assert code_and_message(sbuf, op, {**V, **request}) == \
            ("invalid_record", "one or more canonical records are invalid")
    for op, request in (("remember", {"title": "T", "kind": "fact", "body": "b", "source": SOURCE}),
                        ("archive", {"id": good}), ("update", {"id": good, "source": SOURCE})):
        assert code_and_message(sbuf, op, {**V, **request}) == ("invalid_record", "record validation failed")
    assert snapshot(sbuf.store) == before
    (sbuf.records / "broken.md").unlink()
    assert sbuf.result("get", {"id": good})["id"] == good


def test_duplicate_ids_fail_reads(sbuf):
    sbuf.init()
    good = sbuf.active()
    sub = sbuf.records / "copies"
    sub.mkdir()
    (sub / "copy.md").write_bytes(sbuf.record_file(good).read_bytes())
    before = snapshot(sbuf.store)
    assert code_and_message(sbuf, "get", {**V, "id": good})[0] == "invalid_record"
    assert code_and_message(sbuf, "archive", {**V, "id": good})[0] == "invalid_record"
    assert snapshot(sbuf.store) == before


def test_busy_mutation_lock_is_a_conflict(sbuf):
    sbuf.init()
    record_id = sbuf.active()
    with open(sbuf.store / "locks" / "mutation.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert code_and_message(sbuf, "remember", {**V, "title": "T2", "kind": "fact", "body": "b",
                                                   "source": SOURCE}) == \
            ("conflict", "record changed or is busy; retry after inspection")
        assert code_and_message(sbuf, "archive", {**V, "id": record_id})[0] == "conflict"
        # reads do not wait for writers
        assert sbuf.result("get", {"id": record_id})["status"] == "active"
        assert sbuf.fails("--project", "approve", record_id).startswith("error: the store is busy")
    assert sbuf.result("archive", {"id": record_id})["status"] == "archived"


def test_unresolvable_store_is_an_internal_error(sbuf):
    env = {k: v for k, v in sbuf.env.items() if k not in ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")}
    for project in (True, False):
        envelope, proc = sbuf.invoke("context", {**V, "query": "q"}, project=project, env=env)
        assert envelope["error"] == {"code": "internal_error", "message": "could not resolve the selected store"}


def test_read_only_store(sbuf):
    sbuf.init()
    record_id = sbuf.active()
    sbuf.remember("Other", "other body\n")
    before = snapshot(sbuf.store)
    with read_only(sbuf.store):
        # reads still work (the projection moves to a private temp folder if it must)
        assert sbuf.result("get", {"id": record_id})["id"] == record_id
        assert sbuf.result("context", {"query": "release"})["blocks"]
        for op, request in (("remember", {"title": "New", "kind": "fact", "body": "b", "source": SOURCE}),
                            ("archive", {"id": record_id})):
            assert code_and_message(sbuf, op, {**V, **request}) == ("internal_error", "the store operation failed")
        err = sbuf.fails("--project", "archive", record_id)
        assert "writable" in err
        assert_clean(err, sbuf)
    assert {k: v for k, v in snapshot(sbuf.store).items() if k.startswith(("records/", "store.toml"))} == \
        {k: v for k, v in before.items() if k.startswith(("records/", "store.toml"))}


def test_output_too_large(sbuf):
    sbuf.init()
    for n in range(5):  # five one-word records of 60 kB: within the word budget, over the output bound
        hand_written(sbuf.records, title=f"Huge {n}", body=("x" * 60_000) + f" huge{n}\n")
    assert code_and_message(sbuf, "context", {**V, "query": "huge0 huge1 huge2 huge3 huge4"}) == \
        ("output_too_large", "response exceeds the bounded protocol output")
    big = hand_written(sbuf.records, title="Big body", body="word " * 14_000)
    assert code_and_message(sbuf, "get", {**V, "id": big}) == \
        ("output_too_large", "record exceeds the bounded protocol output")


def test_every_code_has_a_test():
    """The vocabulary this file exercises is the whole vocabulary."""
    from memstrata.stormbuffer.errors import CODES
    text = open(__file__, encoding="utf-8").read()
    assert [c for c in CODES if f'"{c}"' not in text] == []


def test_invoke_never_prompts_and_reads_only_stdin(sbuf):
    sbuf.init()
    envelope, proc = sbuf.invoke("search", {"version": 1, "query": "release"})
    assert envelope["ok"] and proc.stderr == b""
    assert os.path.exists(sbuf.store / "index.sqlite3")
