"""One virtual environment per distinct set of `pip_requirements`, built once, kept under the data
dir and reused by every tool and agent that asks for the same set. Installing is the only moment
tool code's dependencies touch the network; the tools themselves run without it.

pip's own variables (PIP_INDEX_URL, PIP_FIND_LINKS, …) pass through, so an operator's mirror works.
A set that fails to install is not remembered: the next call tries again and reports pip's error."""

import asyncio
import contextlib
import hashlib
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from memvm.sandbox import command

INSTALL_TIMEOUT_SECONDS = 300.0
_READY = ".memvm-ready"


class RequirementsError(Exception):
    """The requirements could not be installed; the message says what pip said."""


class Venvs:
    def __init__(self, root: Path) -> None:
        self._root = root
        self._building: dict[str, asyncio.Lock] = {}

    async def interpreter(self, requirements: Sequence[str]) -> str:
        """The interpreter of the venv holding exactly these requirement specifiers ("name==1.2")."""
        specs = sorted(set(requirements))
        key = hashlib.sha256("\n".join(specs).encode()).hexdigest()[:24]
        venv = self._root / key
        python = str(venv / "bin" / "python")
        if (venv / _READY).exists():
            return python
        async with self._building.setdefault(key, asyncio.Lock()):
            if not (venv / _READY).exists():
                await self._build(venv, specs)
        return python

    async def _build(self, venv: Path, specs: list[str]) -> None:
        """Build next to the final place and rename, so a half-built venv is never used."""
        staging = venv.with_name(venv.name + f".building-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        self._root.mkdir(parents=True, exist_ok=True)
        try:
            # Without pip of its own (ensurepip takes seconds): the server's pip installs into it.
            await _run([command.base_interpreter(), "-m", "venv", "--without-pip", str(staging)], "create the venv")
            pip = [sys.executable, "-m", "pip", "--python", str(staging / "bin" / "python"), "install", "--no-cache-dir"]
            await _run([*pip, "--disable-pip-version-check", "--quiet", *specs], f"install {' '.join(specs)}")
            (staging / _READY).touch()
            with contextlib.suppress(FileExistsError, OSError):  # another process finished first: keep theirs
                staging.rename(venv)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if not (venv / _READY).exists():
            raise RequirementsError(f"the venv for {' '.join(specs)} was built but could not be put in place at {venv}")


async def _run(argv: list[str], what: str) -> None:
    env = {**command.BASE_ENV, **{k: v for k, v in os.environ.items() if k.startswith("PIP_")}}
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), INSTALL_TIMEOUT_SECONDS)
    except TimeoutError:
        raise RequirementsError(f"could not {what}: pip did not finish within {INSTALL_TIMEOUT_SECONDS:g} s") from None
    finally:  # timed out, or the server is stopping: pip must not outlive the build
        if process.returncode is None:
            process.kill()
            await process.wait()
    if process.returncode != 0:
        tail = output.decode(errors="replace").strip()[-1500:]
        raise RequirementsError(f"could not {what}: {tail}")
