"""Hostile tools against the sandbox, through POST /v1/tools/run on a real server: each attack ends
as a tool error (or finds nothing) within the limits, and the server keeps answering meanwhile."""

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import pytest

from memvm.config import Settings
from tests.support.api import app_client
from tests.support.sandbox import require_sandbox

TIMEOUT = 2.0
SERVER_SECRET = "server-only-secret-4f1c"


@pytest.fixture
async def sandboxed(settings: Settings, tmp_path: Path):
    """An app with short tool limits and a data dir holding a file; refuses to run where the host
    cannot create namespaces (the closing note of the issue says where that is)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "agents.db").write_text("private")
    tuned = settings.model_copy(update={"tool_timeout_seconds": TIMEOUT, "data_dir": data_dir})
    await require_sandbox(tuned)
    async with app_client(tuned) as client:
        yield client, data_dir


async def run(client: httpx.AsyncClient, body: str, **args) -> dict:
    source = "def attack(" + ", ".join(f"{name}: {type(v).__name__}" for name, v in args.items()) + "):\n"
    source += "".join(f"    {line}\n" for line in body.strip().splitlines())
    response = await client.post("/v1/tools/run", json={"source_code": source, "args": args}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_servers_environment_is_invisible(sandboxed, monkeypatch):
    client, _ = sandboxed
    monkeypatch.setenv("MEMVM_SERVER_SECRET", SERVER_SECRET)

    seen = await run(
        client,
        """
import os, glob
found = [dict(os.environ)]
for path in glob.glob("/proc/*/environ"):
    try:
        found.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
return found
""",
    )

    assert seen["status"] == "success"
    assert SERVER_SECRET not in seen["tool_return"] and "MEMVM_" not in seen["tool_return"]


async def test_the_data_dir_and_the_servers_files_are_invisible(sandboxed):
    client, data_dir = sandboxed

    seen = await run(
        client,
        """
import os, glob
found = {}
for path in (data, here, "/tmp"):
    try:
        found[path] = sorted(os.listdir(path))
    except OSError as error:
        found[path] = type(error).__name__
found["pg"] = glob.glob("/tmp/memvm-test-pg-*")
return found
""",
        data=str(data_dir),
        here=os.getcwd(),
    )

    found = json.loads(seen["tool_return"])
    assert found[str(data_dir)] == "FileNotFoundError" and found[os.getcwd()] == "FileNotFoundError"
    assert found["/tmp"] == [] and found["pg"] == []


async def test_the_servers_packages_are_out_of_reach(sandboxed):
    client, _ = sandboxed

    seen = await run(
        client,
        """
import importlib
found = {}
for name in ("memvm", "sqlalchemy", "asyncpg", "json"):
    try:
        importlib.import_module(name)
        found[name] = "imported"
    except ImportError:
        found[name] = "missing"
return found
""",
    )

    assert json.loads(seen["tool_return"]) == {
        "memvm": "missing",
        "sqlalchemy": "missing",
        "asyncpg": "missing",
        "json": "imported",
    }


async def test_no_network_not_even_the_servers_own_port(settings, tmp_path, live_url):
    port = int(live_url.rsplit(":", 1)[1])
    async with httpx.AsyncClient(base_url=live_url) as client:
        await require_sandbox(settings)
        seen = await run(
            client,
            """
import socket
socket.create_connection(("127.0.0.1", port), timeout=2).close()
return "connected"
""",
            port=port,
        )

    assert seen["status"] == "error" and seen["tool_return"].startswith(("ConnectionRefusedError", "OSError"))


async def test_a_fork_bomb_is_stopped_by_the_process_limit(sandboxed):
    client, _ = sandboxed
    started = time.monotonic()

    seen = await run(
        client,
        """
import os, time
children = 0
while True:
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
""",
    )

    assert seen["status"] == "error" and "Resource temporarily unavailable" in seen["tool_return"]
    assert time.monotonic() - started < TIMEOUT + 5


async def test_memory_past_the_limit_is_refused(sandboxed):
    client, _ = sandboxed

    seen = await run(client, "block = bytearray(4 * 1024 ** 3)\nreturn len(block)")

    assert seen["status"] == "error" and "MemoryError" in seen["tool_return"]


async def test_an_endless_loop_is_killed_with_its_whole_tree_while_the_server_answers(sandboxed):
    client, _ = sandboxed
    marker = str(int(time.time() * 1000) % 10_000_000 + 31_000_000)  # a sleep length no one else uses

    attack = asyncio.create_task(
        run(client, f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'])\nwhile True:\n    pass")
    )
    await asyncio.sleep(0.5)
    answered_at = time.monotonic()
    health = await client.get("/v1/health/")
    answer_seconds = time.monotonic() - answered_at
    seen = await attack

    assert health.status_code == 200 and answer_seconds < 1.0
    assert seen["status"] == "error" and f"did not finish within {TIMEOUT:g} s" in seen["tool_return"]
    assert await _gone_within(3.0, marker), f"the tool's child `sleep {marker}` outlived the tool"


async def test_a_flood_of_output_is_cut_off(sandboxed):
    client, _ = sandboxed
    started = time.monotonic()

    seen = await run(client, "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)\nreturn 'done'")

    assert seen["status"] == "error" and "bytes of output and was stopped" in seen["tool_return"]
    assert len(seen["stdout"][0]) <= 1 << 20 and time.monotonic() - started < TIMEOUT + 5


async def _gone_within(seconds: float, marker: str) -> bool:
    """The kernel ends the rest of the sandbox's PID namespace after its init dies, a few
    milliseconds after the tool's process is reaped: allow for that, not for a survivor."""
    deadline = time.monotonic() + seconds
    while [pid for pid in os.listdir("/proc") if pid.isdigit() and marker in _cmdline(pid)]:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
