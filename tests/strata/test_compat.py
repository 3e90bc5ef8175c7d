"""Compatibility rules found by differential testing, held to stratadb 1.2.7 (compat_scenarios.py)."""

from __future__ import annotations

import json

import pytest

from stratadb import _stratadb

from memstrata.strata.path_letters import BOUNDS, is_key_char

from .compat_scenarios import SCRIPTS
from .differential import differing, in_memory_differences


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_compat_script_matches_the_real_engine(name):
    problems = in_memory_differences(SCRIPTS[name])
    assert not problems, differing(problems)


def test_bare_path_key_characters_match_the_engine_at_every_border():
    """The table of letters and digits a bare key may hold, checked on both sides of each border."""
    handle = _stratadb.Handle.open_cache()

    def engine_accepts(ch: str) -> bool:
        try:
            handle.execute(json.dumps({"type": "json_get", "key": "d", "path": "$." + ch}))
            return True
        except _stratadb.StrataNativeError:
            return False

    points = {p for b in BOUNDS for p in (b - 1, b)} | set(range(0x80))
    try:
        wrong = [hex(p) for p in sorted(points) if not 0xD800 <= p < 0xE000 and p != ord(".")
                 and p != ord("[") and is_key_char(chr(p)) != engine_accepts(chr(p))]
    finally:
        handle.close()
    assert wrong == []


def test_a_reopened_database_says_it_was_not_created(tmp_path):
    """`created` is true only for the open that made the database."""
    from memstrata.strata.engine import Engine
    from memstrata.strata.mcp import StrataServer
    from memstrata.strata.store import StrataStore

    from .differential import run_script
    from .oracle import OracleSession

    script = [("strata_command", {"command": {"type": t}}) for t in ("config_get", "info", "describe")]
    for _ in range(2):
        store, oracle = StrataStore.open(tmp_path / "ours"), OracleSession(str(tmp_path / "real"))
        try:
            problems = run_script(script, StrataServer(Engine(store)), oracle)
        finally:
            store.close()
            oracle.close()
        assert not problems, differing(problems)
