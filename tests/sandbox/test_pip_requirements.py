"""Tools with pip_requirements: a venv per distinct set, built on first use and reused; a set that
cannot be installed is an error result that quotes pip. pip reads a local wheel here (PIP_NO_INDEX,
PIP_FIND_LINKS pass through to it), so the test needs no network."""

import asyncio
import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from memvm.config import Settings
from tests.support.api import app_client

USES_DEP = '''
def answer() -> int:
    """The dependency's answer."""
    import memvm_probe_dep
    return memvm_probe_dep.ANSWER
'''


def build_wheel(folder: Path) -> None:
    """A minimal pure-Python wheel: memvm_probe_dep 1.0, whose module holds ANSWER = 42."""
    files = {
        "memvm_probe_dep/__init__.py": b"ANSWER = 42\n",
        "memvm_probe_dep-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: memvm-probe-dep\nVersion: 1.0\n",
        "memvm_probe_dep-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files["memvm_probe_dep-1.0.dist-info/RECORD"] = (
        "\n".join([*record, "memvm_probe_dep-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    with zipfile.ZipFile(folder / "memvm_probe_dep-1.0-py3-none-any.whl", "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)


@pytest.fixture
async def client(settings: Settings, tmp_path: Path, monkeypatch):
    """A data dir under a directory only its owner may enter, as root's home is: the venvs built
    there still run, each call as its own uid."""
    root = tmp_path / "root-only"
    root.mkdir(mode=0o700)
    (root / "wheels").mkdir()
    build_wheel(root / "wheels")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(root / "wheels"))
    async with app_client(settings.model_copy(update={"data_dir": root / "data"})) as http:
        yield http, root / "data" / "tool-venvs"


async def test_requirements_are_installed_once_and_reused(client):
    http, venvs = client
    body = {"source_code": USES_DEP, "pip_requirements": [{"name": "memvm-probe-dep", "version": "1.0"}]}

    first = await http.post("/v1/tools/run", json=body, timeout=300)
    again = await http.post("/v1/tools/run", json=body)
    bare = await http.post("/v1/tools/run", json={"source_code": USES_DEP})

    assert first.json()["status"] == "success" and first.json()["tool_return"] == "42", first.text
    assert again.json()["tool_return"] == "42"
    assert len([entry for entry in venvs.iterdir() if not entry.name.startswith(".")]) == 1
    assert bare.json()["status"] == "error" and "No module named 'memvm_probe_dep'" in bare.json()["tool_return"]


async def test_a_requirement_that_cannot_be_installed_is_an_error_that_quotes_pip(client):
    http, venvs = client
    body = {"source_code": USES_DEP, "pip_requirements": [{"name": "memvm-no-such-package"}]}

    failed = await http.post("/v1/tools/run", json=body, timeout=300)

    assert failed.status_code == 200 and failed.json()["status"] == "error"
    assert "pip_requirements could not be installed" in failed.json()["tool_return"]
    assert "memvm-no-such-package" in failed.json()["tool_return"]
    assert not venvs.exists() or not list(venvs.iterdir())


async def test_creating_a_tool_builds_its_venv_in_the_background(client):
    http, venvs = client
    body = {"source_code": USES_DEP, "pip_requirements": [{"name": "memvm-probe-dep", "version": "1.0"}]}

    created = await http.post("/v1/tools/", json=body)
    built = False
    for _ in range(600):  # no call has been made: only the background build can make it
        built = venvs.exists() and any((entry / ".memvm-ready").exists() for entry in venvs.iterdir())
        if built:
            break
        await asyncio.sleep(0.1)

    assert created.status_code == 200 and built
