"""A request whose response completed is in the ledger after a SIGKILL of serve (issue 15 item 5)."""

import pytest

from memstrata.storage import Store, ledger
from tests.stub_provider import ServerThread, StubUpstream

from .ledger_crash import STREAMS, run_round
from .serve_helpers import Serve, cli_env, copy_project


@pytest.fixture(scope="module")
def upstream():
    stub = StubUpstream(record=False, slow_delay=0.01)
    with ServerThread(stub.app) as server:
        yield server.url


def test_completed_requests_survive_sigkill_under_20_streams(tmp_path, memstrata_home, upstream):
    project = copy_project(tmp_path / "proj")
    env = cli_env(memstrata_home)
    rounds = [run_round(project, env, upstream) for _ in range(2)]
    for r in rounds:
        print(f"{STREAMS} streams: {r.completed} completed, {r.rows} ledger rows "
              f"({r.uncounted} without counts yet), {r.failed} cut off, {r.missing} missing")
        assert r.completed >= 60
        assert r.rows >= r.completed, r      # nothing the client saw is lost
    with Store(project / ".memstrata" / "index.db") as store:
        first, last = sorted(ledger.sessions(store), key=lambda x: x.id)
        assert first.crashed and first.ended is not None  # closed when the second round started
        assert last.ended is None                          # the last killed one is left without an end...
    # ...until the next start closes it
    with Serve(project, env, "--no-watch", "--no-mcp") as s:
        own = s.status()["session"]["id"]
        with Store(project / ".memstrata" / "index.db") as store:
            dead = [x for x in ledger.sessions(store) if x.id != own]
            assert dead and all(x.ended is not None and x.crashed for x in dead)
            assert store.integrity_ok()
