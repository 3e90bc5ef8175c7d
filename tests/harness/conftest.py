import pytest


@pytest.fixture(autouse=True)
def memstrata_home(tmp_path, monkeypatch):
    """Every harness test gets its own ~/memstrata (providers.json)."""
    home = tmp_path / "memstrata_home"
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    return home
