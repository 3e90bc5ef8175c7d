"""MemStrata: a local context engine for coding agents.

The distribution installs its layers under this one package
(``memstrata.storage``, ``memstrata.indexer``, ``memstrata.compressor``,
``memstrata.mcp_server``, ``memstrata.harness``) and the compatible products
(``memstrata.kura``, ``memstrata.strata``, ``memstrata.stormbuffer``) so
nothing generic lands at the top of a user's site-packages.  In the
repository those folders sit at the top level; ``pyproject.toml`` maps them
here.  This module imports no layer, so ``import memstrata`` stays cheap.
"""

# The one place the version is written: pyproject.toml reads it from here
# (a literal, so `--version` and start-up need no package metadata lookup).
__version__ = "0.1.0"

__all__ = ["__version__"]
