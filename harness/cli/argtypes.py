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
positive = checked(float, lambda v: math.isfinite(v) and v > 0, "a number", "must be a positive number")
max_results = checked(int, lambda v: 1 <= v <= 200, "a whole number", "must be 1-200")


def _without_credentials(url: str) -> str:
    """``url`` as an error may repeat it: without a ``user:password@`` and the query string, where
    a key may sit (the same cut as the proxy's ``shown_url``, written for text that is no URL)."""
    scheme, sep, rest = url.partition("//")
    shown = scheme + sep + rest.rsplit("@", 1)[-1] if sep else url
    return shown.split("?", 1)[0].split("#", 1)[0]


def http_url(text: str) -> str:
    """An http(s) URL with a host: what an upstream base URL must be."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        parts.port  # raises on a port that is not a number
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a URL: {_without_credentials(text)!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError("must be an http:// or https:// URL with a host, e.g. "
                                         "http://127.0.0.1:11434/v1")
    return text


# -- naming the project: one way on every command ---------------------------------------

PROJECT_HELP = ("project folder (default: the current directory); a folder inside an indexed project "
                "means that project")


def add_project(parser: argparse.ArgumentParser, *, store: bool = True) -> None:
    """``[PATH]`` and ``--project PATH``, the same on every command; ``--project`` wins.
    With ``store``, also ``--store URL`` and ``--project-name NAME`` (see :func:`add_store`)."""
    parser.add_argument("path", nargs="?", default=None, metavar="PATH", help=PROJECT_HELP)
    parser.add_argument("--project", default=None, metavar="PATH",
                        help="the project folder, like PATH (wins when both are given)")
    if store:
        add_store(parser)


def add_store(parser: argparse.ArgumentParser) -> None:
    """Where the index lives: the project's own SQLite file, or a shared PostgreSQL database."""
    parser.add_argument("--store", default=None, metavar="URL",
                        help="sqlite (default: the project's .memstrata/index.db) or a "
                        "postgresql://user@host/db URL shared by a team (password from the URL, the PG* "
                        "environment or ~/.pgpass); default $MEMSTRATA_STORE")
    parser.add_argument("--project-name", default=None, metavar="NAME",
                        help="the project's name in a shared store (default: the project folder's name)")


def store_of(args: argparse.Namespace):
    """The :class:`StoreChoice` the options (or ``MEMSTRATA_STORE``) name; raises
    StoreError on a value that is neither ``sqlite`` nor a PostgreSQL URL."""
    from memstrata.indexer.project import StoreChoice

    return StoreChoice.of(getattr(args, "store", None), getattr(args, "project_name", None))


def project_of(args: argparse.Namespace) -> str | None:
    project = getattr(args, "project", None)
    return project if project is not None else getattr(args, "path", None)
