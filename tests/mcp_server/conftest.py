import pytest

from .mcp_helpers import project  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def memstrata_home(tmp_path, monkeypatch):
    """Each test gets its own ~/memstrata (providers.json); subprocesses inherit it."""
    home = tmp_path / "memstrata_home"
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    return home
