"""``python -m memstrata``: the same as the ``memstrata`` command."""

import sys

from memstrata.harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
