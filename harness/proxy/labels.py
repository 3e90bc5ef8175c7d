"""Who recorded a ledger row: the user and host labels of a ``memstrata serve``.

A team's serve processes record into one shared ledger, which is read per
person and per machine.  The labels are names the person running serve
chooses (``--user-label`` / ``--host-label``, else ``MEMSTRATA_USER`` /
``MEMSTRATA_HOST``), defaulting to the OS user name and the host name.  They
never come from a request: a client could put anything in its headers, and
an API key must never end up in the ledger.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass

USER_ENV = "MEMSTRATA_USER"
HOST_ENV = "MEMSTRATA_HOST"
MAX_LENGTH = 64


class LabelError(ValueError):
    """A label that cannot be recorded (empty, too long, control characters)."""


@dataclass(frozen=True)
class Labels:
    user: str | None = None
    host: str | None = None


def check(value: str, what: str) -> str:
    value = value.strip()
    if not value:
        raise LabelError(f"the {what} label is empty")
    if len(value) > MAX_LENGTH:
        raise LabelError(f"the {what} label is longer than {MAX_LENGTH} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise LabelError(f"the {what} label holds control characters")
    return value


def _os_user() -> str | None:
    try:
        return getpass.getuser()[:MAX_LENGTH] or None
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (some containers)
        return None


def _os_host() -> str | None:
    return socket.gethostname().split(".", 1)[0][:MAX_LENGTH] or None


def resolve(user: str | None = None, host: str | None = None) -> Labels:
    """The labels to record: the given ones, else the environment's, else the OS's.

    Raises :class:`LabelError` (one sentence) for a value that was given but
    cannot be recorded; a default that cannot be found is left out (None).
    """
    user = user if user is not None else os.environ.get(USER_ENV)
    host = host if host is not None else os.environ.get(HOST_ENV)
    user = check(user, "user") if user is not None else _os_user()
    host = check(host, "host") if host is not None else _os_host()
    return Labels(user=user, host=host)
