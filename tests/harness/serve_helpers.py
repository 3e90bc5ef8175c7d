"""Running the real ``memstrata serve`` as a subprocess, for the harness tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "python_project"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_project(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    return dest


def memstrata(*args: str, env: dict, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memstrata", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


class Serve:
    """``memstrata serve`` in a subprocess; stderr is collected line by line on a thread."""

    def __init__(self, project: Path, env: dict, *extra: str, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memstrata", "serve", str(project), "--port", str(self.port), *extra],
            env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_up()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def _wait_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise AssertionError("serve exited early:\n" + "\n".join(self.lines))
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.kill()
        raise AssertionError("serve did not come up:\n" + "\n".join(self.lines))

    def status(self) -> dict:
        return httpx.get(self.url + "/status", timeout=10).json()

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(5)

    def __enter__(self) -> "Serve":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.stop()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def cli_env(home: Path) -> dict:
    env = dict(os.environ, MEMSTRATA_HOME=str(home))
    env.pop("PYTHONSTARTUP", None)
    return env
