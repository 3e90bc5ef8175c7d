"""``memstrata mcp`` next to another MemStrata process on the same project's index."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from memstrata.storage import Store

from .mcp_helpers import memstrata_command, stdio_session, text_of, wait_ready, wait_until


@pytest.mark.parametrize("mcp_args", [(), ("--no-watch",)], ids=["both-watching", "mcp-reads-only"])
def test_side_by_side_with_a_watching_process(project: Path, tmp_path: Path, mcp_args: tuple[str, ...]):
    # `memstrata watch` stands in for `memstrata serve`: another process that
    # indexes and keeps the same index fresh.
    other_log = tmp_path / "watch.stderr"
    with other_log.open("w") as err:
        other = subprocess.Popen([*memstrata_command(), "watch", str(project)], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=err)
    errlog_path = tmp_path / "mcp.stderr"
    try:
        async def main():
            with errlog_path.open("w") as errlog:
                async with stdio_session(project, errlog, extra_args=mcp_args) as (s, _init):
                    await wait_ready(s)
                    for i in range(4):
                        # A new file and an edit to an existing one, each time.
                        (project / "app" / f"billing_{i}.py").write_text(
                            f"from app.auth.service import AuthService\n\n\n"
                            f"def charge_{i}(service: AuthService, user: str) -> bool:\n"
                            f"    return service.login(user, 'x')\n")
                        reports = project / "app" / "reports.py"
                        reports.write_text(reports.read_text() + f"\n\ndef report_{i}() -> int:\n    return {i}\n")

                        async def seen(i=i):
                            r = await s.call_tool("context_query", {"query": f"charge_{i} report_{i}"})
                            if r.is_error:
                                return False
                            ctx = r.structured_content["context"]
                            return f"def charge_{i}" in ctx and f"def report_{i}" in ctx

                        assert await wait_until(seen, timeout=30), f"round {i} never became visible"

                    async def settled():
                        r = await s.call_tool("index_status", {})
                        st = r.structured_content
                        return st if st and st["status"] == "ready" and st["files_indexed"] == 14 else None

                    status = await wait_until(settled, timeout=30)
                    assert status, text_of(await s.call_tool("index_status", {}))

        anyio.run(main)
    finally:
        other.terminate()
        other.wait(timeout=30)
    assert "Traceback" not in errlog_path.read_text()
    assert "Traceback" not in other_log.read_text()

    store = Store(project / ".memstrata" / "index.db", readonly=True)
    try:
        assert store.execute("PRAGMA integrity_check")[0][0] == "ok"
        paths = {row[0] for row in store.execute("SELECT path FROM files")}
    finally:
        store.close()
    on_disk = {p.relative_to(project).as_posix() for p in project.rglob("*.py") if ".memstrata" not in p.parts}
    assert paths == on_disk
