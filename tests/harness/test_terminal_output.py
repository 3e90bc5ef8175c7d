"""What the commands print to a terminal comes from a project's files (paths, definitions, code):
a file named with an escape sequence must not drive the terminal that shows its name."""

from __future__ import annotations

from tests.conftest import MEMSTRATA, terminal_output, write_files

ESCAPE_NAME = "evil\x1b]0;pwned\x07\x1b[8m\x9b31m.py"  # sets the window title, hides what follows, colours (8-bit CSI)


def on_a_terminal(args: list[str], env: dict, cwd) -> bytes:
    """The bytes ``memstrata ARGS`` writes to a pseudo-terminal (stdout and stderr)."""
    return terminal_output([MEMSTRATA, *args], env, cwd)[1]


def test_a_file_name_with_escape_sequences_is_shown_escaped_on_a_terminal(tmp_path, cli_env, run_cli):
    root = write_files(tmp_path / "p", {"app.py": "from evil import thing\n\ndef main():\n    return thing()\n",
                                        ESCAPE_NAME: "def thing():\n    return 1\n"})
    run_cli("index", str(root))
    shown = "evil\\x1b]0;pwned\\x07\\x1b[8m\\u009b31m.py"
    for args in (["symbol", "thing"], ["query", "thing"], ["outline", ESCAPE_NAME]):
        out = on_a_terminal(args, cli_env, root)
        assert b"\x1b" not in out and b"\x07" not in out and "\x9b".encode() not in out, (args, out)
        assert shown.encode() in out, (args, out)
    # A pipe gets the name exactly as it is (scripts read paths from it).
    piped = run_cli("symbol", "thing", cwd=str(root)).stdout
    assert piped.startswith(ESCAPE_NAME + ":1-2")
