"""``python -m memstrata``: the same as the ``memstrata`` command."""

import os  # loaded by the interpreter's start-up already: never a project's file
import sys

# `python -m` puts the current directory first on the module path, where the console script
# puts its own folder.  In a project folder, that would let the project's own files stand in for
# the standard library (a top-level `logging.py`, `selectors.py`, ...): MemStrata would run the
# project's code, and fail.  Dropped, unless this package itself was found there (a checkout).
if (not sys.flags.safe_path and sys.path and sys.path[0] == os.getcwd()
        and os.path.dirname(os.path.dirname(os.path.abspath(__file__))) != sys.path[0]):
    del sys.path[0]

from memstrata.harness.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
