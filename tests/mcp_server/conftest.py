from pathlib import Path

import pytest

from .mcp_helpers import project  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def memstrata_home(tmp_path, monkeypatch):
    """Each test gets its own ~/memstrata (providers.json); subprocesses inherit it."""
    home = tmp_path / "memstrata_home"
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    return home


@pytest.fixture
def errlog(tmp_path: Path):
    """The stdio server's stderr, which must end without a traceback."""
    path = tmp_path / "server.stderr"
    with path.open("w") as f:
        yield f
    log = path.read_text()
    assert "Traceback" not in log, log
