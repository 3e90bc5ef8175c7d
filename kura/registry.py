"""Kura's home folder: the database registry, config, endpoint file and locks.

Layout (``~/.config/kuradb``, or ``$KURA_HOME``)::

    db.json        [{"db": "notes", "createAt": "2026-10-21T07:13:55Z"}, ...]
    config.json    {"port": 23456, "remote": true}   (both optional)
    endpoint       http://127.0.0.1:PORT while a daemon runs
    daemon.lock    held (flock) by the running daemon; holds its pid
    kura.log       the daemon's log
    <name>/data.db the database's store
    <name>/inbox/  where files are dropped (databases added without a PATH)

Every rewrite of a JSON file is an atomic replacement (``storage/files.py``: a
fsynced temporary file, then ``os.replace``) under ``registry.lock``, so concurrent ``kura`` commands never see half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from memstrata.storage.files import atomic_write_text

DB_FILE = "data.db"
INBOX = "inbox"
_RESERVED = {"db.json", "config.json", "endpoint", "daemon.lock", "registry.lock", "kura.log"}
MAX_NAME = 100
MAX_NAME_BYTES = 200  # a folder name must stay well under the 255-byte limit of file systems
_FORBIDDEN = frozenset("/\\%")


class KuraError(Exception):
    """A user-facing failure; the CLI prints the message."""


@dataclass(slots=True, frozen=True)
class Entry:
    db: str
    createAt: str  # noqa: N815 - the registry's field name

    def as_dict(self) -> dict[str, str]:
        return {"db": self.db, "createAt": self.createAt}


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_name(raw: str) -> str:
    """Trimmed, inner whitespace -> ``_``, then checked by :func:`check_name`."""
    return check_name(re.sub(r"\s", "_", raw.strip()))


def check_name(name: str) -> str:
    """``name`` if it can only ever mean the folder ``<home>/<name>``, else KuraError.

    The name becomes a path component, so anything that could step outside
    the home is refused: separators, ``..``, control characters, a leading
    dot, and ``%`` (a name that reads as another one once percent-decoded, as
    SQLite URIs and HTTP query strings do, must not exist at all).  Every
    path of a database goes through :meth:`Home.db_dir`, which applies this,
    so a registry edited by hand cannot point outside the home either.
    """
    if not name:
        raise KuraError("database name is empty")
    if len(name) > MAX_NAME or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise KuraError(f"database name is longer than {MAX_NAME} characters ({MAX_NAME_BYTES} bytes in UTF-8)")
    if any(c in _FORBIDDEN or not c.isprintable() for c in name) or ".." in name or name.startswith("."):
        shown = "".join(c if c.isprintable() else "?" for c in name)
        raise KuraError(f'invalid database name "{shown}" (no "/", "\\", "%", "..", control characters '
                        'or leading ".")')
    if name in _RESERVED:
        raise KuraError(f'"{name}" is reserved by kura; choose another name')
    return name


class Home:
    def __init__(self, root: Path | None = None):
        if root is None:
            env = os.environ.get("KURA_HOME")
            root = Path(env) if env else Path.home() / ".config" / "kuradb"
        self.root = root.expanduser().absolute()

    # -- paths -------------------------------------------------------------------

    @property
    def registry_file(self) -> Path:
        return self.root / "db.json"

    @property
    def config_file(self) -> Path:
        return self.root / "config.json"

    @property
    def endpoint_file(self) -> Path:
        return self.root / "endpoint"

    @property
    def lock_file(self) -> Path:
        return self.root / "daemon.lock"

    @property
    def log_file(self) -> Path:
        return self.root / "kura.log"

    def db_dir(self, name: str) -> Path:
        return self.root / check_name(name)

    def db_path(self, name: str) -> Path:
        return self.db_dir(name) / DB_FILE

    def inbox(self, name: str) -> Path:
        return self.db_dir(name) / INBOX

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    # -- registry ----------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Serialises read-modify-write of the JSON files between processes."""
        self.ensure()
        with open(self.root / "registry.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def entries(self) -> list[Entry]:
        data = _read_json(self.registry_file, [])
        out: list[Entry] = []
        seen: set[str] = set()
        if not isinstance(data, list):
            raise KuraError(f"{self.registry_file} is not a JSON list")
        for item in data:
            if isinstance(item, dict) and isinstance(item.get("db"), str) and item["db"] not in seen:
                seen.add(item["db"])
                out.append(Entry(item["db"], str(item.get("createAt", ""))))
        return out

    def find(self, name: str) -> Entry | None:
        return next((e for e in self.entries() if e.db == name), None)

    def save_entries(self, entries: list[Entry]) -> None:
        _write_json(self.registry_file, [e.as_dict() for e in entries])

    def registry_stamp(self) -> tuple[int, int] | None:
        try:
            st = self.registry_file.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    # -- config -------------------------------------------------------------------

    def config(self) -> dict:
        data = _read_json(self.config_file, {})
        return data if isinstance(data, dict) else {}

    def update_config(self, **changes: object) -> dict:
        with self.locked():
            cfg = self.config()
            for key, value in changes.items():
                if value is None:
                    cfg.pop(key, None)
                else:
                    cfg[key] = value
            _write_json(self.config_file, cfg)
            return cfg

    def port(self) -> int:
        port = self.config().get("port", 0)
        return port if isinstance(port, int) and 0 < port < 65536 else 0

    def remote(self) -> bool:
        return self.config().get("remote") is True

    # -- endpoint -----------------------------------------------------------------

    def read_endpoint(self) -> str | None:
        try:
            text = self.endpoint_file.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return text or None


def _read_json(path: Path, default):
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return default
    except OSError as exc:
        raise KuraError(f"cannot read {path}: {exc}") from exc
    if not text.strip():
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KuraError(f"{path} is not valid JSON ({exc}); fix or delete it") from exc


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    atomic_write_text(path, text)
