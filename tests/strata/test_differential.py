"""The differential suite: the same tool calls through MemStrata's server and the real engine.

The oracle is stratadb 1.2.7's native engine in this process (tests/strata/oracle.py);
answers are compared field by field after masking what may differ (see
differential.py).  A failure prints each differing step with both answers.
"""

from __future__ import annotations

import pytest

from memstrata.strata.mcp import StrataServer
from memstrata.strata.engine import Engine
from memstrata.strata.store import StrataStore

from .differential import run_script
from .oracle import OracleSession
from .random_scripts import random_script
from .scenarios import KV, SCRIPTS

RANDOM_SEEDS = range(12)
RANDOM_STEPS = 250


def _compare(script, ours_store: StrataStore, oracle: OracleSession) -> None:
    try:
        problems = run_script(script, StrataServer(Engine(ours_store)), oracle)
    finally:
        ours_store.close()
        oracle.close()
    assert not problems, f"{len(problems)} step(s) differ from stratadb:\n" + "\n".join(problems[:10])


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_matches_the_real_engine(name):
    _compare(SCRIPTS[name], StrataStore.memory(), OracleSession())


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_history_matches_the_real_engine(seed):
    _compare(random_script(seed, RANDOM_STEPS), StrataStore.memory(), OracleSession())


def test_durable_databases_match(tmp_path):
    """On disk both sides report durability "standard"; everything else as in memory."""
    _compare(KV + SCRIPTS["branches"], StrataStore.open(tmp_path / "ours"), OracleSession(str(tmp_path / "real")))


def test_the_comparison_catches_a_difference(tmp_path):
    """The suite can fail: a server that answers one read wrongly is reported."""
    class Skewed(StrataServer):
        def call_tool(self, name, arguments):
            text, is_error = super().call_tool(name, arguments)
            return (text.replace('"found":true', '"found":false'), is_error) if name == "strata_kv_get" else (text, is_error)

    script = [("strata_kv_put", {"key": "k", "value": "v"}), ("strata_kv_get", {"key": "k"})]
    oracle = OracleSession()
    store = StrataStore.memory()
    problems = run_script(script, Skewed(Engine(store)), oracle)
    store.close()
    oracle.close()
    assert len(problems) == 1 and "step 1" in problems[0]
