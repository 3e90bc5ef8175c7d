"""What `kura` prints to a terminal names folders, files and databases a person or an agent chose:
an escape sequence in a name must not drive the terminal that shows it."""

from __future__ import annotations

import os
import pty
import subprocess

from .conftest import KURA


def on_a_terminal(args: list[str], env: dict) -> bytes:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([KURA, *args], stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(leader)
    return out


def test_a_folder_named_with_escape_sequences_is_shown_escaped_on_a_terminal(kura, tmp_path):
    folder = tmp_path / "docs\x1b]0;pwned\x07\x1b[8m\x9b31m"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nBackoff with jitter.\n", encoding="utf-8")
    out = on_a_terminal(["add", "notes", str(folder)], kura.env)
    assert b"\x1b" not in out and b"\x07" not in out and "\x9b".encode() not in out, out
    assert b"docs\\x1b]0;pwned\\x07\\x1b[8m\\u009b31m" in out and b'added "notes"' in out, out
    # A pipe gets the name exactly as it is (scripts read paths from it).
    listed = kura.run("add", "again", str(folder))
    assert str(folder) in listed.stdout, listed
