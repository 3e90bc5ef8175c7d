"""Kura tests run the real ``kura`` console script against a temporary KURA_HOME.

Every daemon a test starts is stopped at teardown (``kura stop``, then
SIGKILL of any pid still alive), so nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

KURA = shutil.which("kura", path=str(Path(sys.executable).parent)) or "kura"
WAIT = 20.0  # bounded waits for the watcher; never asserted as a speed


class KuraEnv:
    def __init__(self, home: Path):
        self.home = home
        self.env = {**os.environ, "KURA_HOME": str(home), "NO_PROXY": "*", "no_proxy": "*"}
        self.pids: set[int] = set()

    def run(self, *args: str, input: str | None = None, timeout: float = 120,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run([KURA, *args], env=self.env, input=input if input is not None else "",
                              capture_output=True, text=True, timeout=timeout, cwd=cwd)
        self._remember_pid()
        return proc

    def ok(self, *args: str, **kw) -> str:
        proc = self.run(*args, **kw)
        assert proc.returncode == 0, f"kura {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([KURA, *args], env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @property
    def url(self) -> str:
        return (self.home / "endpoint").read_text().strip()

    def start(self) -> str:
        self.ok()
        self._remember_pid()
        return self.url

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, trust_env=False, timeout=30)

    def get(self, path: str, **params) -> httpx.Response:
        with self.client() as c:
            return c.get(path, params=params)

    def _remember_pid(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            text = (self.home / "daemon.lock").read_text().strip()
            if text:
                self.pids.add(int(text))

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.run("stop", timeout=30)
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def kura(tmp_path, monkeypatch):
    home = tmp_path / "kura_home"
    monkeypatch.setenv("KURA_HOME", str(home))
    env = KuraEnv(home)
    yield env
    env.cleanup()


@pytest.fixture
def docs(tmp_path) -> Path:
    """A small folder of mixed documents with known words."""
    root = tmp_path / "docs"
    (root / "code").mkdir(parents=True)
    (root / "notes.md").write_text(
        "# Resilience\n\nExponential backoff with jitter avoids thundering herds.\n\n"
        "Circuit breakers stop calling a failing dependency.\n", encoding="utf-8")
    (root / "code" / "auth.py").write_text(
        "import os\n\n\nclass AuthService:\n    \"\"\"Logs users in.\"\"\"\n\n"
        "    def login(self, user):\n        return parse_args(user)\n\n\n"
        "def parse_args(argv):\n    return list(argv)\n", encoding="utf-8")
    (root / "people.csv").write_text("name,city\nalice,Lisbon\nbob,Osaka\n", encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (root / "blob.dat").write_bytes(b"abc\x00def" * 10)
    return root


def wait_until(predicate, timeout: float = WAIT, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)
