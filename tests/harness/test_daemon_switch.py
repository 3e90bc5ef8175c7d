"""MEMSTRATA_DAEMON and MEMSTRATA_DAEMON_IDLE read as documented; a value that is neither on
nor off is said (once), not quietly read as on."""

from __future__ import annotations

import logging

import pytest

from memstrata.harness.daemon import client


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(client, "_switch_warned", False, raising=False)
    monkeypatch.setattr(client, "_idle_warned", False)


@pytest.mark.parametrize("value, on", [(None, True), ("", True), ("1", True), ("On", True), ("yes", True),
                                       ("off", False), (" OFF ", False), ("0", False), ("false", False)])
def test_the_switch_reads_on_and_off_in_silence(monkeypatch, caplog, value, on):
    if value is None:
        monkeypatch.delenv(client.ENV_SWITCH, raising=False)
    else:
        monkeypatch.setenv(client.ENV_SWITCH, value)
    with caplog.at_level(logging.WARNING):
        assert client.enabled() is on
    assert caplog.records == []


def test_a_value_that_is_neither_is_said_once(monkeypatch, caplog):
    monkeypatch.setenv(client.ENV_SWITCH, "disabled")
    with caplog.at_level(logging.WARNING):
        assert client.enabled() is True and client.enabled() is True
    assert [r.getMessage() for r in caplog.records] == [
        "MEMSTRATA_DAEMON='disabled' is neither on nor off (off: 0, false, no, off); "
        "the resident query process is used"]
