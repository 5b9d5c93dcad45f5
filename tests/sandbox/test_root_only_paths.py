"""An interpreter under a directory only root may enter (pyenv, conda and uv install Python in root's
home, mode 0700): a server running as root still runs tools with it in the bubblewrap sandbox, each
call as its own uid; the process sandbox, which binds nothing, says why it cannot. A venv made with
`--copies` in such a directory stands in for it on any host, wherever its own Python lives."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from memvm.config import Settings
from memvm.sandbox import command
from memvm.sandbox.calls import ToolRun
from memvm.sandbox.runner import Sandbox

WHERE = ToolRun(
    source="def where() -> dict:\n    import os, sys\n    return {'prefix': sys.prefix, 'uid': os.getuid()}\n",
    function="where",
    arguments={},
)


@pytest.fixture
def root_only_python(tmp_path: Path, monkeypatch) -> Path:
    """The sandbox's base interpreter, moved to a venv in a mode-0700 directory."""
    root_only = tmp_path / "root-only"
    root_only.mkdir(mode=0o700)
    venv = root_only / "python"
    subprocess.run([command.base_interpreter(), "-m", "venv", "--copies", "--without-pip", str(venv)], check=True)
    monkeypatch.setattr(command, "base_interpreter", lambda: str(venv / "bin" / "python"))
    return venv


async def test_an_interpreter_under_a_root_only_directory_runs_tools_as_their_own_uid(settings: Settings, root_only_python):
    sandbox = Sandbox(settings)
    await sandbox.probe()
    ran = await sandbox.run(WHERE)

    assert sandbox.unavailable is None, sandbox.unavailable
    assert ran.status == "success", ran
    seen = json.loads(ran.value)
    assert seen["prefix"] == str(root_only_python)
    assert seen["uid"] >= settings.tool_sandbox_first_uid if os.geteuid() == 0 else seen["uid"] == os.getuid()


@pytest.mark.skipif(os.geteuid() != 0, reason="only a server running as root runs calls as another uid")
async def test_the_process_sandbox_says_why_it_cannot_use_a_root_only_interpreter(settings: Settings, root_only_python):
    sandbox = Sandbox(settings.model_copy(update={"tool_sandbox": "process"}))
    await sandbox.probe()
    ran = await sandbox.run(WHERE)

    assert sandbox.unavailable is not None and "lets no other user in" in sandbox.unavailable
    assert ran.status == "error" and "cannot be started as the call's own uid" in ran.value
    assert "MEMVM_TOOL_SANDBOX=process binds nothing" in ran.value


async def test_a_call_holds_no_capability_whatever_the_jail_was_built_with(settings: Settings):
    """As root, bubblewrap builds the jail with root's rights: none of them reaches the tool."""
    sandbox = Sandbox(settings)
    await sandbox.probe()
    ran = await sandbox.run(
        ToolRun(
            source="def caps() -> dict:\n    lines = open('/proc/self/status').read().splitlines()\n"
            "    return dict(line.split(':\\t') for line in lines if line.startswith(('Cap', 'Uid', 'NoNewPrivs')))\n",
            function="caps",
            arguments={},
        )
    )

    assert ran.status == "success", ran
    seen = json.loads(ran.value)
    assert {seen[name] for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {"0000000000000000"}, seen
    assert seen["NoNewPrivs"] == "1" and "0" not in seen["Uid"].split("\t"), seen
