import sys
from pathlib import Path

import pytest

# pytest puts tests/ on sys.path (rootdir-relative imports of the conftest files),
# where this folder would shadow the real `mcp_server` package as an empty
# namespace package; the repository root ahead of it keeps the real one.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp_helpers import project  # noqa: E402,F401  (fixture)


@pytest.fixture(autouse=True)
def memstrata_home(tmp_path, monkeypatch):
    """Each test gets its own ~/memstrata (providers.json); subprocesses inherit it."""
    home = tmp_path / "memstrata_home"
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    return home
