"""Small helpers for the Stormbuffer tests: hand-written records, editors, read-only folders."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memstrata.stormbuffer.codec import render_record
from memstrata.stormbuffer.records import Record, Source, new_id, now_ns


def hand_written(records: Path, *, title: str = "Hand written", body: str = "written by hand\n",
                 scope: str = "project:demo-project", status: str = "active", access: str = "agent",
                 kind: str = "fact", name: str | None = None, **fields) -> str:
    """A record file written straight into ``records/`` (as a person or git would); returns its id."""
    now = now_ns()
    rec = Record(new_id(), title, kind, scope, status, access, now, now, body,
                 [Source("document", "notes/handbook.md", "maintainer")], **fields)
    (records / (name or f"{rec.id}.md")).write_bytes(render_record(rec))
    return rec.id


def editor_script(tmp: Path, code: str) -> str:
    """An $EDITOR command: a Python script that gets the file to edit as ``path``."""
    script = tmp / f"editor_{abs(hash(code))}.py"
    script.write_text("import sys\nfrom pathlib import Path\npath = Path(sys.argv[1])\n" + code, encoding="utf-8")
    return f"{sys.executable} {script}"


def add_human_record(sbuf, title: str, body: str) -> str:
    env = {**sbuf.env, "EDITOR": "true"}
    out = sbuf.ok("--project", "add", "--title", title, "--kind", "fact", "--body", body, env=env)
    return out.strip()


def snapshot(store: Path) -> dict[str, tuple[bytes, int]]:
    """Bytes and mtime of the canonical files of a store (records, store.toml, .gitignore)."""
    out = {}
    for path in sorted(store.rglob("*")):
        rel = path.relative_to(store).as_posix()
        if path.is_file() and (rel.startswith("records/") or rel in ("store.toml", ".gitignore")):
            out[rel] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


@contextlib.contextmanager
def read_only(root: Path):
    """Make the folders of ``root`` unwritable for the duration (chmod for a normal
    user; for root, which ignores permission bits, the immutable attribute)."""
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in folders}
        for p in folders:
            p.chmod(0o555)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root without chattr: cannot make a folder read-only")
    done = []
    try:
        for p in folders:
            if subprocess.run([chattr, "+i", str(p)], capture_output=True).returncode != 0:
                pytest.skip("this filesystem does not support the immutable attribute")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run([chattr, "-i", str(p)], capture_output=True)
