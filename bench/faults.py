"""Fault injection against real processes: does every round survive, is anything lost?

    python bench/faults.py [--index-rounds 50] [--serve-rounds 10] [--messages 100]
                           [--files 300] [--budget SECONDS] [--scratch DIR] [--json OUT]

Run from the repository root (the serve rounds start the stand-in provider,
``python -m tests.stub_provider``).  Everything is written under ``--scratch``
(default ``$TMPDIR/memstrata-faults``), outside the repository, with private
``MEMSTRATA_HOME``, ``KURA_HOME`` and ``HOME``.  Each fault is a number of
rounds; the table at the end prints, per fault, the rounds tried, the rounds
survived and what was lost, then the run's duration.

Faults:

* **SIGKILL of a cold index** (``--index-rounds``): a generated project of
  ``--files`` modules (30 functions each, calling each other), no index;
  ``memstrata index`` is started and its own pid is killed with SIGKILL (as
  ``kill -9 $p`` does, not its process group) after a random delay within
  the duration of a full run measured first.  Survived: the run's parse
  workers exit, nothing holds the writer lock, the database passes
  ``integrity_check``, ``foreign_key_check`` and FTS5's ``integrity-check``
  with one full-text row per symbol, the next ``memstrata index`` completes
  within 120 s, and the index then holds every file and every symbol with
  status ``ready``.  Lost: files and symbols missing after that next run.
* **SIGKILL of an incremental index**: the same on an indexed project whose
  every module was just rewritten (alternately 30 and 31 functions), so the
  catch-up re-parses them all.
* **SIGKILL of serve under 20 streams** (``--serve-rounds``): ``memstrata
  serve`` on the fixture project, forwarding to the stand-in provider; 20
  client threads stream chat completions back to back; serve's pid is killed
  after 1-3 s.  Survived: the database is intact and the next ``serve``
  starts and answers ``/health``.  Lost: requests whose streamed response had
  completed at the client (``data: [DONE]`` received) but that the killed
  session's ledger does not hold.  The notes say how many killed sessions
  the next start marked as ended.
* **Malformed JSON-RPC** (``--messages`` per server): each MCP server of the
  project (:data:`MCP_SERVERS`; one whose console script is not installed
  beside the interpreter running the bench is skipped) gets that many
  malformed lines (bad UTF-8, bad JSON, wrong ``jsonrpc``, bad ids, bad
  params, batches, unknown methods, missing tool arguments) between
  ``initialize`` and a ``ping``.  A message counts as
  answered when the reply JSON-RPC 2.0 requires for it came back (an error
  with its id, or with id null where no id can be read; for tool calls, a
  result with ``isError``).  Strata's server reads plain JSON-RPC 2.0
  (docs/strata.md): the lines that are valid requests there (a batch, a
  number id, ignored ``tools/list`` params) need a reply of any kind.
  Survived: every message answered and the ``ping`` answered after them.  Lost: messages left unanswered.
* **Kura traversal and symlinks**: names that percent-decode or step outside
  the home, a planted registry entry, homes containing ``#``, ``?`` and
  ``%25``, file and directory symlinks leading out of a registered folder
  (at ``kura add`` and while the daemon watches).  Survived: refused or
  skipped, nothing outside is read or served, no stray file appears.  Lost:
  cases where a secret word was served or a file appeared outside the home.

``--budget`` bounds the run: once it is spent, no new round starts (the
rounds not run are left out of "tried").
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from memstrata.storage import Store
from memstrata.kura.store import KuraDatabase

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "python_project"
NEXT_RUN_DEADLINE = 120.0
FUNCS_PER_MODULE = 30


# -- the MCP servers of the project ------------------------------------------------------


@dataclass(frozen=True)
class McpServer:
    """One stdio MCP server: a console script and its arguments ({project}, {scratch} filled in)."""

    label: str
    script: str
    args: tuple[str, ...]
    tool: str | None = None  # a tool whose required arguments the malformed set leaves out
    # "mcp": the MCP SDK's reading (no batches, integer or string ids, params an
    # object).  "jsonrpc": plain JSON-RPC 2.0 as Strata's own server reads it
    # (batches answered element by element, any number as an id, tools/list
    # params ignored; docs/strata.md): there the lines that are valid requests
    # for it need a reply, not an error.
    reading: str = "mcp"


# One line per server; a server whose console script is not installed is skipped.
MCP_SERVERS = [
    McpServer("memstrata mcp", "memstrata", ("mcp", "--project", "{project}", "--no-watch"), "context_query"),
    McpServer("kura mcp", "kura", ("mcp",), "search_rag"),
    McpServer("strata --cache mcp serve", "strata", ("--cache", "mcp", "serve"), reading="jsonrpc"),
    McpServer("sbuf mcp --stdio", "sbuf", ("mcp", "--stdio")),
    McpServer("stormbuffer-mcp --stdio", "stormbuffer-mcp", ("--stdio",)),
]


def console_script(name: str) -> str | None:
    """The script installed beside this interpreter (this checkout's environment), if any;
    never one found on PATH, which may belong to another installation."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else None


# -- bookkeeping ---------------------------------------------------------------------------


@dataclass
class Tally:
    fault: str
    lost_unit: str
    tried: int = 0
    survived: int = 0
    lost: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    failures: Counter = field(default_factory=Counter)

    def round(self, problems: list[str], lost: int = 0) -> None:
        self.tried += 1
        self.lost += lost
        if problems:
            self.failures.update(problems)
        else:
            self.survived += 1

    def as_dict(self) -> dict[str, Any]:
        return {"fault": self.fault, "tried": self.tried, "survived": self.survived, "lost": self.lost,
                "lost_unit": self.lost_unit, "seconds": round(self.seconds, 1), "notes": self.notes,
                "failures": dict(self.failures)}


def progress(tally: Tally, every: int = 10) -> None:
    if tally.tried % every == 0:
        print(f"  {tally.fault}: {tally.tried} rounds, {tally.survived} survived", flush=True)


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline


def wait_for(condition: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# -- processes ----------------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process (from /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[0])
    return table


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for child, (parent, state) in _proc_table().items():
        if state != "Z":
            children.setdefault(parent, []).append(child)
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    table = _proc_table()
    return {p for p in pids if p in table and table[p][1] != "Z"}


def reap(proc: subprocess.Popen) -> None:
    """Make sure ``proc`` and everything in its session is gone (cleanup, never the fault itself)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- index rounds -----------------------------------------------------------------------------


def module_text(i: int, funcs: int) -> str:
    body = "".join(
        f"\n\ndef helper_{i}_{j}(value, other=None):\n    \"\"\"Helper {j}.\"\"\"\n"
        f"    return helper_{i}_{(j + 1) % funcs}(value) + len(str(other))\n"
        for j in range(funcs))
    return f'"""Module {i}."""\n' + body


def write_project(root: Path, n: int, funcs: int) -> None:
    for i in range(n):
        d = root / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(module_text(i, funcs))


def lock_held(root: Path) -> bool:
    """Whether some process holds the index's writer lock (a POSIX record lock)."""
    path = root / ".memstrata" / "index.lock"
    if not path.exists():
        return False
    with open(path, "a+") as fh:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.lockf(fh, fcntl.LOCK_UN)
        return False


def index_problems(db: Path) -> list[str]:
    """What is wrong with an index database right after a crash (empty: nothing)."""
    if not db.exists():
        return []
    problems = []
    try:
        with Store(db) as store:
            if store.execute("PRAGMA integrity_check")[0][0] != "ok":
                problems.append("integrity_check failed")
            if store.execute("PRAGMA foreign_key_check"):
                problems.append("foreign_key_check failed")
            try:
                store.execute("INSERT INTO symbols_fts(symbols_fts) VALUES ('integrity-check')")
            except Exception:  # noqa: BLE001 - sqlite reports a corrupt FTS index as an error
                problems.append("FTS integrity-check failed")
            symbols = store.execute("SELECT count(*) FROM symbols")[0][0]
            fts = store.execute("SELECT count(*) FROM symbols_fts")[0][0]
            if symbols != fts:
                problems.append("symbols and full-text rows differ")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"cannot open the index ({type(exc).__name__})")
    return problems


def index_counts(db: Path) -> tuple[int, int, str | None]:
    with Store(db, readonly=True) as store:
        files = store.execute("SELECT count(*) FROM files")[0][0]
        symbols = store.execute("SELECT count(*) FROM symbols")[0][0]
        return files, symbols, store.get_meta("status")


class IndexRounds:
    def __init__(self, memstrata: str, scratch: Path, n: int, env: dict[str, str]):
        self.memstrata, self.n, self.env = memstrata, n, env
        self.root = scratch / f"generated_{n}"
        self.db = self.root / ".memstrata" / "index.db"
        shutil.rmtree(self.root, ignore_errors=True)
        write_project(self.root, n, FUNCS_PER_MODULE)
        self.funcs = FUNCS_PER_MODULE

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen([self.memstrata, "index", str(self.root), "--json", "--workers", "2"],
                                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def full_run(self) -> float:
        t0 = time.monotonic()
        done = subprocess.run([self.memstrata, "index", str(self.root), "--json"], env=self.env,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"memstrata index failed: {done.stderr}")
        return time.monotonic() - t0

    def make_cold(self) -> None:
        shutil.rmtree(self.root / ".memstrata", ignore_errors=True)

    def make_incremental(self) -> None:
        self.funcs = FUNCS_PER_MODULE + 1 if self.funcs == FUNCS_PER_MODULE else FUNCS_PER_MODULE
        write_project(self.root, self.n, self.funcs)

    def kill_round(self, delay: float) -> tuple[list[str], int] | None:
        """One SIGKILL round; None when the run finished before the kill (not a round)."""
        proc = self._start()
        try:
            time.sleep(delay)
            workers = descendants(proc.pid)
            if proc.poll() is not None:
                return None
            proc.send_signal(signal.SIGKILL)  # the run's own pid only, as `kill -9 $p`
            proc.wait(timeout=30)
            problems = []
            if wait_for(lambda: not alive(workers), timeout=30) is False:
                problems.append("parse workers outlived the run")
        finally:
            reap(proc)
        if lock_held(self.root):
            problems.append("writer lock still held")
        problems += index_problems(self.db)
        try:
            nxt = subprocess.run([self.memstrata, "index", str(self.root), "--json"], env=self.env,
                                 capture_output=True, text=True, timeout=NEXT_RUN_DEADLINE)
            if nxt.returncode != 0:
                problems.append(f"next index exited {nxt.returncode}")
        except subprocess.TimeoutExpired:
            problems.append("next index did not finish (locked?)")
            return problems, self.n
        files, symbols, status = index_counts(self.db)
        want = self.n * self.funcs
        lost = max(0, self.n - files) + max(0, want - symbols)
        if (files, symbols) != (self.n, want):
            problems.append("wrong counts after the next run")
        if status != "ready":
            problems.append(f"status {status} after the next run")
        return problems, lost


def run_index_faults(memstrata: str, scratch: Path, env: dict, n: int, rounds: int, budget: Budget,
                     rng: random.Random) -> list[Tally]:
    rig = IndexRounds(memstrata, scratch, n, env)
    cold = Tally(f"SIGKILL cold index ({n} files)", "files+symbols")
    incr = Tally(f"SIGKILL incremental index ({n} files)", "files+symbols")
    rig.make_cold()
    cold_seconds = rig.full_run()
    rig.make_incremental()
    incr_seconds = rig.full_run()
    for tally, prepare, measured in ((cold, rig.make_cold, cold_seconds), (incr, rig.make_incremental, incr_seconds)):
        t0 = time.monotonic()
        span = measured
        attempts = 0
        finished_first = 0
        while tally.tried < rounds and attempts < rounds * 3 and not budget.spent():
            attempts += 1
            prepare()
            outcome = rig.kill_round(rng.uniform(0.1, span))
            if outcome is None:  # the run completed before its kill: not a round
                finished_first += 1
                span = max(0.5, span * 0.9)  # runs are quicker than measured: aim earlier
                continue
            tally.round(*outcome)
            progress(tally)
        tally.seconds = time.monotonic() - t0
        tally.notes.append(f"kill at a random point of the run (a full run took {measured:.1f}s)")
        if finished_first:
            tally.notes.append(f"{finished_first} runs finished before their kill (not counted)")
    return [cold, incr]


# -- serve rounds -------------------------------------------------------------------------------


def start_stub() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.stub_provider", "--port", "0"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().split()[1])
    url = f"http://127.0.0.1:{port}"
    if not wait_for(lambda: _get(url + "/v1/models"), timeout=30):
        raise SystemExit("the stand-in provider did not start")
    return proc, url


def _get(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


class Streams:
    """N client threads streaming chat completions back to back through the proxy."""

    def __init__(self, base: str, n: int):
        self.base, self.n = base, n
        self.completed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(n)]

    def _loop(self, i: int) -> None:
        body = {"model": "gpt-4o", "stream": True,
                "messages": [{"role": "user", "content": f"stream {i}: how does AuthService.login work?"}]}
        with httpx.Client(timeout=10, trust_env=False) as client:
            while not self._stop.is_set():
                try:
                    with client.stream("POST", self.base + "/v1/chat/completions", json=body) as r:
                        done = r.status_code == 200 and any(
                            line.strip() == "data: [DONE]" for line in r.iter_lines())
                except httpx.HTTPError:
                    return  # serve is gone
                if done:
                    with self._lock:
                        self.completed += 1

    def __enter__(self) -> "Streams":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=20)


def start_serve(memstrata: str, project: Path, stub: str, env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([memstrata, "serve", "--project", str(project), "--port", str(port), "--no-watch",
                             "--openai-upstream", stub + "/v1"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    ok = wait_for(lambda: proc.poll() is not None or _get(base + "/health"), timeout=60)
    if not ok or proc.poll() is not None:
        reap(proc)
        raise RuntimeError("serve did not start")
    return proc, base


def ledger_rows(db: Path, pid: int) -> tuple[int | None, int, float | None]:
    """(session id, ledger rows, ended) of the serve process ``pid``."""
    with Store(db, readonly=True) as store:
        rows = store.execute("SELECT id, ended FROM ledger_sessions WHERE pid = ? ORDER BY id DESC LIMIT 1", (pid,))
        if not rows:
            return None, 0, None
        sid, ended = rows[0]
        return sid, store.execute("SELECT count(*) FROM ledger WHERE session_id = ?", (sid,))[0][0], ended


def run_serve_faults(memstrata: str, scratch: Path, env: dict, rounds: int, streams: int, budget: Budget,
                     rng: random.Random) -> Tally:
    tally = Tally(f"SIGKILL serve under {streams} streams", "completed requests")
    project = scratch / "served_project"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    db = project / ".memstrata" / "index.db"
    stub, stub_url = start_stub()
    completed_total = closed = 0
    killed: list[tuple[int, int]] = []  # (pid, session id)
    t0 = time.monotonic()
    try:
        while tally.tried < rounds and not budget.spent():
            problems: list[str] = []
            proc, base = start_serve(memstrata, project, stub_url, env)
            try:
                with Streams(base, streams) as s:
                    time.sleep(rng.uniform(1.0, 3.0))
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=30)
                completed = s.completed
            finally:
                reap(proc)
            problems += index_problems(db)
            sid, rows, _ = ledger_rows(db, proc.pid)
            if sid is not None:
                killed.append((proc.pid, sid))
            missing = max(0, completed - rows)
            completed_total += completed
            if missing:
                problems.append("completed requests missing from the ledger")
            try:  # the next start must come up on the same project
                nxt, _ = start_serve(memstrata, project, stub_url, env)
                nxt.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    nxt.wait(timeout=30)
                reap(nxt)
            except RuntimeError:
                problems.append("next serve did not start")
            if sid is not None and ledger_rows(db, proc.pid)[2] is not None:
                closed += 1
            tally.round(problems, missing)
            progress(tally)
    finally:
        stub.kill()
        stub.wait(timeout=30)
    tally.seconds = time.monotonic() - t0
    tally.notes.append(f"{completed_total} requests completed at the clients in all")
    tally.notes.append(f"{closed}/{len(killed)} killed sessions marked ended by the next start")
    return tally


# -- malformed JSON-RPC -----------------------------------------------------------------------------


def malformed_messages(count: int, tool: str | None, reading: str = "mcp") -> list[tuple[bytes, list[Any], bool]]:
    """``count`` malformed lines: (line, the ids whose error replies are required, tool-call?).

    A required id of None means a reply with id null.  The templates cycle;
    each use gets fresh ids so every answer can be matched.  Under the
    ``jsonrpc`` reading (see :class:`McpServer`) the lines plain JSON-RPC 2.0
    accepts are required to get a reply of any kind instead: their ids are
    wrapped in :class:`AnyReply`.
    """
    plain = reading == "jsonrpc"
    def templates(k: int) -> list[tuple[bytes, list[Any], bool]]:
        i = f"m{k}"
        out = [
            (b"this is not json {", [None], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "tools/ca'.encode(), [None], False),
            (b"\xff\xfe\xfd" + f'{{"jsonrpc": "2.0", "id": "{i}", "method": "ping"}}'.encode(), [None], False),
            (b"\xc3\x28", [None], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "ping", "params": {{"x": NaN}}}}'.encode(), [None], False),
            (b"[]", [None], False),
            (b"42", [None], False),
            (b'"ping"', [None], False),
            (b"null", [None], False),
            (f'{{"id": "{i}", "method": "ping"}}'.encode(), [i], False),
            (f'{{"jsonrpc": "1.0", "id": "{i}", "method": "ping"}}'.encode(), [i], False),
            (f'{{"jsonrpc": 2, "id": "{i}", "method": "ping"}}'.encode(), [i], False),
            (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', [None], False),
            (b'{"jsonrpc": "2.0", "id": [1, 2], "method": "ping"}', [None], False),
            (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', [None], False),
            (b'{"jsonrpc": "2.0", "id": 2.5, "method": "ping"}', [AnyReply(2.5)] if plain else [None], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": 17}}'.encode(), [i], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}"}}'.encode(), [i], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "tools/list", "params": [1]}}'.encode(),
             [AnyReply(i) if plain else i], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "tools/list", "params": "x"}}'.encode(),
             [AnyReply(i) if plain else i], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "no/such/method"}}'.encode(), [i], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "tools/call", "params": {{"arguments": {{}}}}}}'.encode(),
             [i], False),
            (f'[{{"jsonrpc": "2.0", "id": "{i}", "method": "ping"}}, 3]'.encode(),
             [AnyReply(i) if plain else i, None], False),
            (f'{{"jsonrpc": "2.0", "id": "{i}", "method": "tools/call", "params": {{"name": "no_such_tool", '
             f'"arguments": {{}}}}}}'.encode(), [i], True),
            (b"{" * 100_000, [None], False),
        ]
        if tool is not None:
            out.append((f'{{"jsonrpc": "2.0", "id": "{i}", "method": "tools/call", "params": {{"name": "{tool}", '
                        f'"arguments": {{}}}}}}'.encode(), [i], True))
        return out

    messages: list[tuple[bytes, list[Any], bool]] = []
    k = 0
    while len(messages) < count:
        messages.extend(templates(k))
        k += 1
    return messages[:count]


INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}}}


class LineReader:
    """Reads a subprocess's stdout lines on a thread."""

    def __init__(self, stream):
        self.lines: list[Any] = []
        self.bad_lines = 0
        self.eof = threading.Event()
        self._cond = threading.Condition()
        threading.Thread(target=self._run, args=(stream,), daemon=True).start()

    def _run(self, stream) -> None:
        for raw in stream:
            try:
                item = json.loads(raw)
            except ValueError:
                self.bad_lines += 1
                continue
            with self._cond:
                self.lines.append(item)
                self._cond.notify_all()
        self.eof.set()
        with self._cond:
            self._cond.notify_all()

    def wait(self, predicate: Callable[[list[Any]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.eof.is_set():
                    return predicate(self.lines)
                self._cond.wait(left)
            return True


def _replies(lines: list[Any]) -> list[dict]:
    return [r for item in lines for r in (item if isinstance(item, list) else [item]) if isinstance(r, dict)]


def _has_reply(lines: list[Any], ident: Any) -> bool:
    return any(r.get("id") == ident and ("result" in r or "error" in r) for r in _replies(lines))


@dataclass(frozen=True)
class AnyReply:
    """A required reply that may be a result as well as an error."""

    id: Any


def score_replies(lines: list[Any], messages) -> int:
    """How many messages got every reply they require."""
    replies = _replies(lines)
    by_id: dict[Any, list[dict]] = {}
    for r in replies:
        by_id.setdefault(r.get("id"), []).append(r)
    nulls = sum(1 for r in by_id.get(None, []) if "error" in r)
    answered = 0
    for _line, ids, tool_call in messages:
        ok = True
        for ident in ids:
            if isinstance(ident, AnyReply):
                ok &= any("result" in r or "error" in r for r in by_id.get(ident.id, []))
                continue
            if ident is None:
                if nulls > 0:
                    nulls -= 1
                else:
                    ok = False
                continue
            got = by_id.get(ident, [])
            if tool_call:
                ok &= any("error" in r or (r.get("result") or {}).get("isError") for r in got)
            else:
                ok &= any("error" in r for r in got)
        answered += ok
    return answered


def run_malformed_faults(scratch: Path, env: dict, count: int, budget: Budget) -> list[Tally]:
    tallies = []
    project = scratch / "mcp_project"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns(".memstrata", "__pycache__"))
    for spec in MCP_SERVERS:
        script = console_script(spec.script)
        if script is None:
            print(f"  ({spec.label}: console script {spec.script!r} not installed; skipped)", flush=True)
            continue
        if budget.spent():
            break
        tally = Tally(f"{count} malformed JSON-RPC -> {spec.label}", "unanswered")
        t0 = time.monotonic()
        messages = malformed_messages(count, spec.tool, spec.reading)
        args = [a.format(project=project, scratch=scratch) for a in spec.args]
        work = scratch / "mcp_cwd"
        work.mkdir(exist_ok=True)
        proc = subprocess.Popen([script, *args], cwd=work, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        reader = LineReader(proc.stdout)
        problems: list[str] = []
        try:
            proc.stdin.write(json.dumps(INIT).encode() + b"\n")
            proc.stdin.flush()
            if not reader.wait(lambda lines: _has_reply(lines, "init"), 60):
                problems.append("no answer to initialize")
            else:
                proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
                for line, _ids, _tool in messages:
                    proc.stdin.write(line + b"\n")
                proc.stdin.write(b'{"jsonrpc": "2.0", "id": "alive", "method": "ping"}\n')
                proc.stdin.flush()
                if not reader.wait(lambda lines: _has_reply(lines, "alive"), 60):
                    problems.append("no answer to the ping after them (dead or stuck)")
                reader.wait(lambda lines: score_replies(lines, messages) == len(messages), 10)
        except (BrokenPipeError, OSError):
            problems.append("the server closed its input")
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
            reap(proc)
        answered = score_replies(reader.lines, messages)
        if answered < len(messages):
            problems.append("messages left unanswered")
        if reader.bad_lines:
            problems.append("non-JSON lines on stdout")
        tally.round(problems, len(messages) - answered)
        tally.notes.append(f"{answered}/{len(messages)} answered; "
                           f"{'alive' if _has_reply(reader.lines, 'alive') else 'NOT alive'} after them")
        tally.seconds = time.monotonic() - t0
        tallies.append(tally)
    return tallies


# -- Kura traversal and symlinks ---------------------------------------------------------------------


class Kura:
    def __init__(self, script: str, home: Path, env: dict):
        self.script, self.home = script, home
        self.env = {**env, "KURA_HOME": str(home)}

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.script, *args], env=self.env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    def search_mcp(self, db: str, q: str) -> str:
        """The raw text of a ``search_rag`` answer from ``kura mcp`` (stdin stays
        open until it arrives, so this holds whatever the server does at EOF)."""
        call = {"jsonrpc": "2.0", "id": "search", "method": "tools/call",
                "params": {"name": "search_rag", "arguments": {"db": db, "q": q}}}
        proc = subprocess.Popen([self.script, "mcp"], env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        reader = LineReader(proc.stdout)
        try:
            proc.stdin.write((json.dumps(INIT) + "\n" + json.dumps(call) + "\n").encode())
            proc.stdin.flush()
            reader.wait(lambda lines: _has_reply(lines, "search"), 60)
            return json.dumps(reader.lines)
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
            reap(proc)

    def daemon_search(self, db: str, q: str) -> str:
        url = (self.home / "endpoint").read_text().strip()
        return httpx.get(url + "/api/search", params={"db": db, "q": q}, timeout=10, trust_env=False).text

    def stop(self) -> None:
        self.run("stop")


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def make_docs(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "notes.md").write_text("Exponential backoff with jitter.\n", encoding="utf-8")


def run_kura_faults(scratch: Path, env: dict, budget: Budget) -> Tally:
    tally = Tally("Kura traversal and symlink cases", "leaks")
    script = console_script("kura")
    if script is None:
        tally.notes.append("kura not installed")
        return tally
    t0 = time.monotonic()
    base = scratch / "kura"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    secret_word = "nebulosity"
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"The {secret_word} passphrase.\n", encoding="utf-8")
    victim = base / "victim" / "data.db"
    victim.parent.mkdir()
    from memstrata.kura import store as kura_store

    with KuraDatabase(victim) as store, store.write() as conn:
        kura_store.replace_source(conn, kura_store.SourceRecord("diary.md", 1, 1, "h", "prose", 0.0),
                                  [f"the {secret_word} diary"])

    def case(name: str, check: Callable[[], tuple[list[str], int]]) -> None:
        if budget.spent():
            return
        try:
            problems, leaks = check()
        except Exception as exc:  # noqa: BLE001 - a crash of the case is a failed round
            problems, leaks = [f"{name}: {type(exc).__name__}: {exc}"], 0
        tally.round([f"{name}: {p}" for p in problems], leaks)

    home = base / "home"
    kura = Kura(script, home, env)
    docs = base / "docs"
    make_docs(docs)
    kura.run("add", "x")

    def traversal_names() -> tuple[list[str], int]:
        problems, leaks = [], 0
        for name in ("x%2f..%2f..%2fvictim", "..%2fvictim", "a..b", "50%", "x/../victim", "bell\x07"):
            done = kura.run("add", name, str(docs))
            if done.returncode != 1 or "invalid database name" not in done.stderr:
                problems.append(f"name {name!r} accepted")
                leaks += secret_word in kura.search_mcp(name, secret_word)
        return problems, leaks

    def planted_entry() -> tuple[list[str], int]:
        planted = "x%2f..%2f..%2fvictim"
        (home / planted).mkdir(exist_ok=True)
        with KuraDatabase(home / planted / "data.db"):
            pass
        registry = json.loads((home / "db.json").read_text())
        registry.append({"db": planted, "createAt": "2026-01-01T00:00:00Z"})
        (home / "db.json").write_text(json.dumps(registry))
        try:
            leaked = secret_word in kura.search_mcp(planted, secret_word)
            return (["planted name read the victim"] if leaked else []), int(leaked)
        finally:
            registry.pop()
            (home / "db.json").write_text(json.dumps(registry))
            shutil.rmtree(home / planted)

    case("percent-encoded and traversal names", traversal_names)
    case("planted registry entry", planted_entry)

    for n, odd in enumerate(("home#frag", "home?mode=rwc", "home%25x")):
        def odd_home(odd=odd, n=n) -> tuple[list[str], int]:
            parent = base / f"odd_{n}"
            parent.mkdir()
            k = Kura(script, parent / odd, env)
            problems = []
            if k.run("add", "notes", str(docs)).returncode != 0:
                return ["kura add failed"], 0
            before = tree(parent)
            if "backoff" not in k.search_mcp("notes", "backoff"):
                problems.append("kura mcp could not read its own database")
            k.run("list")
            stray = {p for p in tree(parent) - before if not p.startswith(odd + os.sep)}
            if stray or sorted(os.listdir(parent)) != [odd]:
                problems.append("stray files outside the home")
            return problems, len(stray)
        case(f"KURA_HOME named {odd!r}", odd_home)

    def symlinks_at_add() -> tuple[list[str], int]:
        folder = base / "linked"
        make_docs(folder)
        (folder / "leak.md").symlink_to(outside / "secret.md")
        (folder / "leakdir").symlink_to(outside, target_is_directory=True)
        done = kura.run("add", "linked", str(folder))
        problems = [] if "2 symlink_outside_project" in done.stdout else ["symlinks not counted as skipped"]
        leaked = secret_word in kura.search_mcp("linked", secret_word)
        return problems + (["served over kura mcp"] if leaked else []), int(leaked)

    def symlinks_while_watching() -> tuple[list[str], int]:
        folder = base / "linked"
        if kura.run().returncode != 0:
            return ["the daemon did not start"], 0
        try:
            (folder / "late.md").symlink_to(outside / "secret.md")
            (folder / "marker.md").write_text("A pangolin appears.", encoding="utf-8")
            if not wait_for(lambda: "pangolin" in kura.daemon_search("linked", "pangolin"), timeout=20):
                return ["the watcher never indexed a new file"], 0
            leaked = secret_word in kura.daemon_search("linked", secret_word)
            return (["served over /api/search"] if leaked else []), int(leaked)
        finally:
            kura.stop()

    case("symlinks leading out of a folder at kura add", symlinks_at_add)
    case("symlink made while the daemon watches", symlinks_while_watching)
    tally.seconds = time.monotonic() - t0
    return tally


# -- the report --------------------------------------------------------------------------------------


def print_table(tallies: list[Tally], seconds: float) -> None:
    width = max(len(t.fault) for t in tallies)
    print()
    print(f"{'fault':<{width}}  {'tried':>5}  {'survived':>8}  {'lost':>5}  {'unit':<20} {'time':>6}")
    for t in tallies:
        print(f"{t.fault:<{width}}  {t.tried:>5}  {t.survived:>8}  {t.lost:>5}  {t.lost_unit:<20} {t.seconds:>5.0f}s")
        for note in t.notes:
            print(f"{'':<{width}}    - {note}")
        for problem, n in t.failures.most_common():
            print(f"{'':<{width}}    ! {problem} ({n} rounds)")
    rounds = sum(t.tried for t in tallies)
    ok = sum(t.survived for t in tallies)
    print(f"\n{ok}/{rounds} rounds survived, {sum(t.lost for t in tallies)} lost in all; "
          f"the whole run took {seconds:.0f}s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index-rounds", type=int, default=50, help="SIGKILLs of each index kind (default 50)")
    p.add_argument("--files", type=int, default=300, help="modules in the generated project (default 300)")
    p.add_argument("--serve-rounds", type=int, default=10, help="SIGKILLs of serve (default 10)")
    p.add_argument("--streams", type=int, default=20, help="concurrent client streams during them (default 20)")
    p.add_argument("--messages", type=int, default=100, help="malformed messages per MCP server (default 100)")
    p.add_argument("--budget", type=float, default=1800, help="no round starts after this many seconds (default 1800)")
    p.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "memstrata-faults")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--only", choices=["index", "serve", "mcp", "kura"], action="append",
                   help="run only these faults (repeatable)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)

    memstrata = console_script("memstrata")
    if memstrata is None:
        raise SystemExit("memstrata is not installed beside this interpreter (pip install -e .)")
    scratch = args.scratch.resolve()
    if scratch == REPO or REPO in scratch.parents:
        raise SystemExit("--scratch must be outside the repository")
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MEMSTRATA_HOME": str(scratch / "memstrata_home"), "HOME": str(scratch / "home"),
           "KURA_HOME": str(scratch / "kura_home"), "NO_PROXY": "*", "no_proxy": "*"}
    (scratch / "home").mkdir(exist_ok=True)
    rng = random.Random(args.seed)
    budget = Budget(args.budget)
    only = set(args.only or ["index", "serve", "mcp", "kura"])
    started = time.monotonic()
    tallies: list[Tally] = []
    if "index" in only:
        print(f"index kills: {args.index_rounds} cold + {args.index_rounds} incremental, {args.files} files ...",
              flush=True)
        tallies += run_index_faults(memstrata, scratch, env, args.files, args.index_rounds, budget, rng)
    if "serve" in only:
        print(f"serve kills: {args.serve_rounds} rounds under {args.streams} streams ...", flush=True)
        tallies.append(run_serve_faults(memstrata, scratch, env, args.serve_rounds, args.streams, budget, rng))
    if "mcp" in only:
        print(f"malformed JSON-RPC: {args.messages} per MCP server ...", flush=True)
        tallies += run_malformed_faults(scratch, env, args.messages, budget)
    if "kura" in only:
        print("kura traversal and symlink cases ...", flush=True)
        tallies.append(run_kura_faults(scratch, env, budget))
    seconds = time.monotonic() - started
    print_table(tallies, seconds)
    if budget.spent():
        print(f"(the --budget of {args.budget:.0f}s ran out: rounds not started are not counted)")
    if args.json:
        args.json.write_text(json.dumps({"seconds": round(seconds, 1), "faults": [t.as_dict() for t in tallies]},
                                        indent=2))
    return 0 if all(t.survived == t.tried and not t.lost for t in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
