"""argparse value types that say exactly what is wrong with a bad value, and the
project arguments every command shares."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T", int, float)


def checked(convert: Callable[[str], T], ok: Callable[[T], bool], noun: str, rule: str) -> Callable[[str], T]:
    """A type converting with ``convert``; ``noun`` names what a value must be,
    ``rule`` what ``ok`` demands of it."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text!r}")
        return value

    return parse


port = checked(int, lambda v: 0 <= v <= 65535, "a port number", "port must be 0-65535")
positive_int = checked(int, lambda v: v > 0, "a whole number", "must be positive")
unit_ratio = checked(float, lambda v: 0 < v <= 1, "a number", "must be in (0, 1]")
non_negative = checked(float, lambda v: math.isfinite(v) and v >= 0, "a number", "must be a non-negative number")


# -- naming the project: one way on every command ---------------------------------------

PROJECT_HELP = "project folder (default: the current directory, or the nearest parent with an index)"


def add_project(parser: argparse.ArgumentParser) -> None:
    """``[PATH]`` and ``--project PATH``, the same on every command; ``--project`` wins."""
    parser.add_argument("path", nargs="?", default=None, metavar="PATH", help=PROJECT_HELP)
    parser.add_argument("--project", default=None, metavar="PATH",
                        help="the project folder, like PATH (wins when both are given)")


def project_of(args: argparse.Namespace) -> str | None:
    project = getattr(args, "project", None)
    return project if project is not None else getattr(args, "path", None)
