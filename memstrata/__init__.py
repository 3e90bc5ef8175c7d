"""MemStrata: a local context engine for coding agents.

The distribution installs its layers under this one package
(``memstrata.storage``, ``memstrata.indexer``, ``memstrata.compressor``,
``memstrata.mcp_server``, ``memstrata.harness``) so nothing generic lands at
the top of a user's site-packages.  In the repository the layer folders sit
at the top level; ``pyproject.toml`` maps them here.  This module imports no
layer, so ``import memstrata`` stays cheap.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("memstrata")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
