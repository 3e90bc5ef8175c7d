"""What `kura` prints to a terminal names folders, files and databases a person or an agent chose:
an escape sequence in a name must not drive the terminal that shows it."""

from __future__ import annotations

from ..conftest import terminal_output
from .conftest import KURA


def on_a_terminal(args: list[str], env: dict) -> bytes:
    return terminal_output([KURA, *args], env)[1]


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
