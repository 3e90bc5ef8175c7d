"""The reader of a command's output went away (``memstrata status | head -1``).

Every console script's ``main`` is wrapped in :func:`quiet_on_broken_pipe`:
such a command ends quietly, the way a shell tool ended by SIGPIPE does,
instead of printing a BrokenPipeError traceback.  SIGPIPE itself keeps
Python's handling (ignored) because the servers behind these commands write
to sockets whose peers may go away at any time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable

# What a shell reports for a process ended by SIGPIPE (128 + 13): scripts
# running under `set -o pipefail` see the same as for any other tool.
EXIT_BROKEN_PIPE = 141


def quiet_on_broken_pipe(main: Callable[..., int]) -> Callable[..., int]:
    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            try:
                return main(*args, **kwargs)
            finally:
                # Flush here, where a failure can still be caught, rather than
                # in the interpreter's own flush at exit (argparse's --help and
                # errors exit through SystemExit with the text still buffered).
                if sys.stdout is not None:
                    sys.stdout.flush()
        except BrokenPipeError:
            _discard_stdout()
            return EXIT_BROKEN_PIPE

    return wrapper


def _discard_stdout() -> None:
    """Point fd 1 at /dev/null so that the interpreter's last flush has nowhere to fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
