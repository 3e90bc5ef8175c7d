"""Where Stormbuffer stores live, what marks them initialized, and ``init``.

- The **global store** is ``<data root>/stormbuffer`` (``$XDG_DATA_HOME`` or
  ``~/.local/share`` on Linux); its projection lives in the cache folder.
- A **project store** is the nearest ``.sbuf/`` folder from the working
  directory (``<cwd>/.sbuf`` when there is none); its projection sits inside.
- A store is initialized exactly when ``store.toml`` is a file in its root.

Resolving a location never creates anything.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import errors
from .errors import SbufError
from memstrata.storage.files import atomic_write
from .records import GLOBAL_SCOPE, project_name

PROJECT_DIR = ".sbuf"
MARKER = "store.toml"
PRIVATE_GITIGNORE = "*\n!.gitignore\n"
SHARED_GITIGNORE = PRIVATE_GITIGNORE + "!store.toml\n!records/\n!records/**/\n!records/**/*.md\n"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    scope: str       # "global" | "project"
    visibility: str  # "private" | "shared"


@dataclass(frozen=True, slots=True)
class StoreLocation:
    kind: str        # "global" | "project"
    root: Path
    scope: str       # "global" | "project:<name>"
    cache_dir: Path

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    @property
    def locks_dir(self) -> Path:
        return self.root / "locks"

    @property
    def journal(self) -> Path:
        return self.locks_dir / "supersede.toml"

    def initialized(self) -> bool:
        return self.marker.is_file()

    def preferred_index(self) -> Path:
        if self.kind == "project":
            return self.root / "index.sqlite3"
        return self.cache_dir / "global.sqlite3"

    def index_path(self) -> Path:
        """The projection file: the preferred place, or a private temp folder
        when that folder cannot be written (a read-only store still reads).
        Raises OSError when neither can be used."""
        preferred = self.preferred_index()
        if _writable_dir(preferred.parent):
            return preferred
        digest = hashlib.blake2b(str(self.root).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
        fallback = Path(tempfile.gettempdir()) / f"stormbuffer-projection-{digest}"
        fallback.mkdir(mode=0o700, exist_ok=True)
        st = fallback.lstat()
        # A shared temp folder: never use a folder someone else made or can read.
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError("the fallback projection folder is not private")
        return fallback / "index.sqlite3"

    def read_config(self) -> StoreConfig:
        """Parse ``store.toml`` strictly.  Raises SbufError (not_initialized / internal_error)."""
        try:
            data = self.marker.read_bytes()
        except FileNotFoundError:
            raise SbufError("not_initialized", errors.NOT_INITIALIZED) from None
        except IsADirectoryError:
            raise SbufError("not_initialized", errors.NOT_INITIALIZED) from None
        except OSError:
            raise SbufError("internal_error", errors.STORE_FAILED, "store.toml cannot be read") from None
        try:
            table = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            raise _bad_config("it is not valid TOML") from None
        unknown = sorted(set(table) - {"format_version", "scope", "visibility"})
        if unknown:
            raise _bad_config(f"unknown key `{unknown[0]}`")
        if type(table.get("format_version")) is not int or table["format_version"] != 1:
            raise _bad_config("format_version must be 1")
        if table.get("scope") != self.kind:
            raise _bad_config(f"scope must be \"{self.kind}\" for this store")
        if table.get("visibility") not in ("private", "shared"):
            raise _bad_config("visibility must be \"private\" or \"shared\"")
        return StoreConfig(table["scope"], table["visibility"])


def _bad_config(why: str) -> SbufError:
    return SbufError("internal_error", errors.STORE_FAILED, f"store.toml is invalid: {why}")


def _writable_dir(folder: Path) -> bool:
    """Whether files can be created in ``folder`` (made if missing): tried, not
    inferred from permission bits, which say nothing of read-only mounts or
    immutable folders."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


# -- locations ----------------------------------------------------------------------


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None


def _home(env: Mapping[str, str]) -> Path:
    home = _env(env, "HOME") or _env(env, "USERPROFILE")
    if home is None:
        raise SbufError("internal_error", errors.UNRESOLVED_STORE, "could not determine the user data directory")
    return Path(home)


def data_root(env: Mapping[str, str] = os.environ, platform: str = sys.platform) -> Path:
    if platform == "win32":
        for name in ("LOCALAPPDATA", "APPDATA"):
            if _env(env, name):
                return Path(env[name])
        return _home(env) / "AppData" / "Local"
    if _env(env, "XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"])
    if platform == "darwin":
        return _home(env) / "Library" / "Application Support"
    return _home(env) / ".local" / "share"


def cache_root(env: Mapping[str, str] = os.environ, platform: str = sys.platform) -> Path:
    if platform == "win32":
        return data_root(env, platform)
    if _env(env, "XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"])
    if platform == "darwin":
        return _home(env) / "Library" / "Caches"
    return _home(env) / ".cache"


def global_location(env: Mapping[str, str] = os.environ) -> StoreLocation:
    return StoreLocation("global", data_root(env) / "stormbuffer", GLOBAL_SCOPE, cache_root(env) / "stormbuffer")


def project_root(cwd: Path) -> Path:
    """The nearest ``.sbuf`` folder from ``cwd`` upwards, else ``cwd/.sbuf``."""
    for folder in (cwd, *cwd.parents):
        candidate = folder / PROJECT_DIR
        if candidate.is_dir():
            _refuse_link_out(folder, candidate)
            return candidate
    return cwd / PROJECT_DIR


def _refuse_link_out(project: Path, store: Path) -> None:
    """A project store that is a link to a folder outside its project is refused: a cloned
    repository can carry such a link, and the store's locks, projection and records would be
    created, written and read where it points (a link to a folder inside the project is fine)."""
    if not store.is_symlink():
        return
    real_project = os.path.realpath(project)
    if os.path.commonpath([real_project, os.path.realpath(store)]) != real_project:
        raise SbufError("internal_error", errors.UNRESOLVED_STORE,
                        f"the project's {PROJECT_DIR}/ is a link to a folder outside the project; remove the link")


def project_location(cwd: Path | None = None, env: Mapping[str, str] = os.environ) -> StoreLocation:
    try:
        here = Path(os.getcwd()) if cwd is None else cwd
    except OSError:
        raise SbufError("internal_error", errors.UNRESOLVED_STORE, "the working directory is gone") from None
    root = project_root(here)
    return StoreLocation("project", root, f"project:{project_name(root.parent.name)}", cache_root(env) / "stormbuffer")


# -- init ---------------------------------------------------------------------------


def init_store(loc: StoreLocation, shared: bool) -> tuple[bool, StoreConfig]:
    """Create the store (idempotent).  Returns (created, config).  Raises SbufError."""
    if shared and loc.kind != "project":
        raise SbufError("invalid_request", errors.INVALID_INPUT, "shared stores require project scope")
    if loc.initialized():
        config = loc.read_config()
        if shared and config.visibility != "shared":
            raise SbufError("invalid_state", errors.INVALID_STATE,
                            "the store is already initialized as a private store")
        _ensure_dirs(loc)
        return False, config
    visibility = "shared" if shared else "private"
    _ensure_dirs(loc)
    if loc.kind == "project":
        atomic_write(loc.root / ".gitignore", (SHARED_GITIGNORE if shared else PRIVATE_GITIGNORE).encode())
    text = f'format_version = 1\nscope = "{loc.kind}"\nvisibility = "{visibility}"\n'
    atomic_write(loc.marker, text.encode())
    return True, StoreConfig(loc.kind, visibility)


def _ensure_dirs(loc: StoreLocation) -> None:
    for folder in (loc.root, loc.records_dir, loc.locks_dir):
        folder.mkdir(parents=True, exist_ok=True)
    if loc.kind == "global":
        try:
            loc.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # the projection falls back to a private temp folder


__all__ = ["StoreConfig", "StoreLocation", "data_root", "cache_root", "global_location", "project_root",
           "project_location", "init_store", "PROJECT_DIR", "MARKER"]
