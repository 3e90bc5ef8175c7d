"""The record file format, validation, identifiers and timestamps."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.stormbuffer.codec import (
    CodecError, canonical_table, parse_record, render_record, split_front_matter,
)
from memstrata.stormbuffer.records import (
    Record, RecordInvalid, Source, check_provenance, format_timestamp, new_id, normalize_text, now_ns,
    parse_scope, parse_timestamp, parse_uuid, project_name, validate,
)

RID = "01a230eb-45de-7267-accc-0c45fa586a22"


def record(**changes) -> Record:
    base = Record(RID, "Release constraint", "decision", "project:demo", "active", "agent",
                  1_786_000_000_000_000_000, 1_786_000_000_500_000_000, "Ship on Tuesdays.",
                  [Source("conversation", "chat:1", "user")], ["release"], ["ship day"], [])
    return base.evolve(**changes)


def test_render_layout_and_round_trip():
    data = render_record(record())
    text = data.decode()
    assert text.startswith("+++\nformat_version = 1\nid = \"" + RID + "\"\n")
    assert 'created_at = "2026-08-06T07:06:40Z"' in text
    assert 'updated_at = "2026-08-06T07:06:40.5Z"' in text
    assert '\n[[sources]]\nkind = "conversation"\nreference = "chat:1"\nactor = "user"\n+++\n\nShip on Tuesdays.' in text
    assert text.endswith("Ship on Tuesdays.")  # no newline added to a body without one
    assert parse_record(data) == record()


@pytest.mark.parametrize("body", ["a\r\nb\r\n", "  leading and trailing  \n\n\n", "x\n\n+++\n\ny", "tab\there"])
def test_body_kept_byte_for_byte(body):
    assert parse_record(render_record(record(body=body))).body == body


def test_crlf_front_matter_and_hand_written_toml():
    text = ("+++\r\nformat_version = 1\r\nid = '{" + RID.upper() + "}'\r\ntitle = \"T\"\r\nkind = \"fact\"\r\n"
            "scope = \"global\"\r\nstatus = \"candidate\"\r\naccess = \"agent\"\r\n"
            "created_at = \"2026-08-13T02:47:39.61394+02:00\"\r\nupdated_at = \"2026-08-13T00:47:40Z\"\r\n"
            "tags = [\r\n  \"a\",\r\n]\r\naliases = []\r\nsupersedes = []\r\n[[sources]]\r\nkind = \"url\"\r\n"
            "reference = \"https://example.org\"\r\nactor = \"me\"\r\n+++\r\n\r\nbody\r\n")
    rec = parse_record(text.encode())
    assert rec.id == RID and rec.tags == ["a"] and rec.body == "body\r\n"
    assert format_timestamp(rec.created_at) == "2026-08-13T00:47:39.61394Z"


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("+++\n", "", 1), "must start with a `+++` line"),
    (lambda t: t.replace("\n+++\n\n", "\n", 1), "not closed"),
    (lambda t: t.replace("\n+++\n\n", "\n+++\nbody", 1), "followed by a blank line"),
    (lambda t: t.replace('kind = "decision"', 'kind = "decision"\ncolour = "red"'), "unknown field `colour`"),
    (lambda t: t.replace('aliases = ["ship day"]\n', ""), "missing field `aliases`"),
    (lambda t: t.replace("format_version = 1", "format_version = 2"), "format_version"),
    (lambda t: t.replace('kind = "decision"', 'kind = "musing"'), "field `kind` is invalid"),
    (lambda t: t.replace('title = "Release constraint"', 'title = " padded"'), "field `title` is invalid"),
    (lambda t: t.replace('scope = "project:demo"', 'scope = "project:a b"'), "field `scope` is invalid"),
    (lambda t: t.replace("2026-08-06T07:06:40.5Z", "2020-01-01T00:00:00Z"), "updated_at"),
    (lambda t: t.replace('supersedes = []', f'supersedes = ["{RID}"]'), "own id"),
    (lambda t: t.replace('actor = "user"', 'actor = "user"\nwhen = "now"'), "unknown field `when` in a source"),
    (lambda t: t.replace("Ship on Tuesdays.", " \n\t"), "field `body` is invalid"),
    (lambda t: t.replace("Ship on Tuesdays.", "nul\x00byte"), "NUL"),
    (lambda t: t.replace('id = "' + RID + '"', 'id = "00000000-0000-0000-0000-000000000000"'), "`id`"),
    (lambda t: t.replace('created_at = "2026-08-06T07:06:40Z"', "created_at = 2026-08-06T07:06:40Z"),
     "must be a string"),
    (lambda t: t.replace("[[sources]]\n", "[[sources]\n"), "not valid TOML"),
])
def test_malformed_files_are_refused_with_a_reason(mutate, message):
    text = mutate(render_record(record()).decode())
    with pytest.raises(CodecError) as err:
        parse_record(text.encode())
    assert message in str(err.value)


def test_not_utf8_is_refused():
    with pytest.raises(CodecError, match="UTF-8"):
        parse_record(render_record(record()) + b"\xff\xfe")


def test_validation_messages_name_the_field():
    with pytest.raises(RecordInvalid) as err:
        validate(record(sources=[]))
    assert str(err.value) == ("invalid record record: field `sources` is invalid: must contain at least one "
                              "source")
    with pytest.raises(RecordInvalid, match="field `tags` is invalid"):
        validate(record(tags=["ok", "bad\x07"]))
    with pytest.raises(RecordInvalid, match="duplicates"):
        other = new_id()
        validate(record(supersedes=[other, other]))


@pytest.mark.parametrize("source", [Source("conversation", "chat:1", "Inference"),
                                    Source("document", "inference://model", "agent"),
                                    Source("document", "inference:guess", "agent")])
def test_inferred_sources_fail_the_provenance_check(source):
    with pytest.raises(RecordInvalid, match="attributable"):
        check_provenance(record(sources=[source]))


def test_uuid_forms():
    simple = RID.replace("-", "")
    for form in (RID, RID.upper(), simple, "{" + RID + "}", "urn:uuid:" + RID):
        assert parse_uuid(form) == RID
    for bad in ("", " " + RID, RID + " ", "00000000-0000-0000-0000-000000000000", RID[:-1], "x" * 36,
                "0" + simple):
        assert parse_uuid(bad) is None
    ids = [new_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(i[14] == "7" and i[19] in "89ab" for i in ids)


def test_timestamps():
    assert parse_timestamp("2026-08-13T00:47:39.61394Z") == parse_timestamp("2026-08-13T02:47:39.613940+02:00")
    assert format_timestamp(parse_timestamp("2026-08-13T00:47:39.610000000Z")) == "2026-08-13T00:47:39.61Z"
    for bad in ("2026-02-30T00:00:00Z", "2026-08-13 00:47:39Z", "2026-08-13T00:47:39", "yesterday"):
        assert parse_timestamp(bad) is None
    now = now_ns()
    assert parse_timestamp(format_timestamp(now)) == now


def test_scopes_and_project_names():
    assert parse_scope("global") == "global" and parse_scope("project:demo-project") == "project:demo-project"
    for bad in ("project:", "project:a b", "project:a:b", "Global", "local", "project:\x01"):
        assert parse_scope(bad) is None
    assert project_name("my app") == "my-app" and project_name("a:b\tc") == "a-b-c" and project_name("") == "local"


def test_normalisation_for_duplicates():
    assert normalize_text("  Ship\n\ton   TUESDAYS ") == "ship on tuesdays"
    assert normalize_text("ÉTÉ") == "ÉtÉ"  # only ASCII is lower-cased


_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).map(str.strip).filter(bool)


@settings(max_examples=150, deadline=None)
@given(title=_text, tags=st.lists(_text, max_size=4), ref=_text,
       body=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)
       .filter(lambda b: b.strip()))
def test_any_valid_record_round_trips_and_the_fast_reader_agrees_with_tomllib(title, tags, ref, body):
    rec = record(title=title, tags=tags, sources=[Source("url", ref, "someone")], body=body)
    try:
        validate(rec)
    except RecordInvalid:
        return  # e.g. a control character in the title
    data = render_record(rec)
    assert parse_record(data) == rec
    front, _ = split_front_matter(data.decode())
    assert canonical_table(front) == tomllib.loads(front)
