import shutil
from pathlib import Path

import pytest

from memstrata.indexer.workspace import Workspace

SHOP = Path(__file__).resolve().parents[2] / "fixtures" / "proxy_project"


@pytest.fixture(autouse=True)
def memstrata_home(tmp_path, monkeypatch):
    """Every harness test gets its own ~/memstrata (providers.json)."""
    home = tmp_path / "memstrata_home"
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def shop_ws(tmp_path_factory):
    """An indexed copy of fixtures/proxy_project (files big enough to compress), per module."""
    root = tmp_path_factory.mktemp("shop") / "shop_project"
    shutil.copytree(SHOP, root)
    ws = Workspace.open(root)
    ws.index()
    yield ws
    ws.close()
