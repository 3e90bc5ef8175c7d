"""The ``memstrata`` command line.

Each command lives in a module exposing ``register(subparsers)``, which adds
its parser and sets ``func=handler`` (``handler(args) -> int`` exit code).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from memstrata import __version__

COMMAND_MODULES = [
    "memstrata.harness.cmd_index",
    "memstrata.harness.cmd_mcp",
    "memstrata.harness.cmd_serve",
    "memstrata.harness.cmd_config",
    "memstrata.harness.cmd_savings",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memstrata",
        description="Local context engine for coding agents: indexes a project into a "
        "dependency graph and serves token-budgeted context slices.",
    )
    parser.add_argument("--version", action="version", version=f"memstrata {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="memstrata: %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
