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


# C0 controls but tab, newline and carriage return (the progress line rewrites itself with it), and
# DEL, shown as Python writes them; the C1 controls (0x9b is CSI on terminals that read 8-bit
# controls) as JSON and Python both read them, since `--json` output leaves those unescaped.
_TERMINAL_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c not in (0x09, 0x0A, 0x0D)}
_TERMINAL_CONTROLS.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})


class InertTerminal:
    """A terminal stream whose text cannot drive the terminal: what a command prints comes from a
    project's files (paths, definitions, code), and a file named with an escape sequence
    (`\\x1b]52;...` sets the clipboard, `\\x1b[8m` hides what follows) would otherwise run it, as it
    would under `ls` without its own quoting.  Output to a pipe or file is left exactly as it is."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text.translate(_TERMINAL_CONTROLS))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def inert_on_terminal(stream):
    """``stream`` wrapped in :class:`InertTerminal` when it is a terminal, else itself."""
    if stream is None or isinstance(stream, InertTerminal):
        return stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        return stream
    return InertTerminal(stream) if tty else stream
