"""Letta Code (npm `@letta-ai/letta-code`, pinned), the client Letta's users run, started headless
against a server on loopback.

A plain `npm install` of the package fails on this registry (one of its optional dependencies is
missing there), but its `letta.js` is one bundle that needs only `ws` beside it. So the tarball is
fetched with `npm pack`, checked against the integrity the registry published for that version,
unpacked, and `ws` is installed next to it, pinned too: once per machine, in
`~/.cache/memvm-tests/letta-code-<version>/` (`$XDG_CACHE_HOME` is honoured), made in a directory of
its own and renamed into place, so a half-made copy is never used and concurrent runs do not clash.

Each `LettaCode` is one user: a fresh HOME (Letta Code keeps its settings there) and a working
directory of its own. Its telemetry and auto-updater are off, so it talks to `LETTA_BASE_URL` alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.support.serve import Served, child_env, free_port, serve

PACKAGE = "@letta-ai/letta-code"
VERSION = "0.32.18"
# `npm view @letta-ai/letta-code@0.32.18 dist.integrity`: a tarball that differs is refused.
INTEGRITY = "sha512-PkpJewqQAQq5faHW4wIfmbKyIMCapiIVbsYhXs9CalB1oyUzV8Gg7+ZhhjK52PdSNgP20juc2KP2pQEPfmA6SQ=="
WS_VERSION = "8.23.0"  # the bundle's only runtime dependency (it asks for ^8.19.0)
WS_INTEGRITY = "sha512-wCkmX8QMOrKjgO8HW2WyDbTSGeqkocxgDzS9iR79rEAexty6/2qzilx3Ag8Tqf9ykop3irLKle0MtVn5qjVnoQ=="
NPM_TIMEOUT = 300.0
RUN_TIMEOUT = 30.0  # one invocation; a turn against the scripted model takes 1-2 s
# npm's codes for a registry it could not reach (DNS, refused, cut, timed out): the only npm
# failures that skip; any other is a failure of the test.
# uvicorn's access log line: `INFO:     127.0.0.1:40312 - "GET /v1/models/ HTTP/1.1" 200 OK`
ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH")


class Run(NamedTuple):
    """One finished `letta` invocation; unpacks as (returncode, stdout, stderr)."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> Any:
        """stdout parsed as JSON (headless `--output-format json` and the `messages` subcommands
        print JSON), or None when it is not JSON."""
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None

    def describe(self) -> str:
        """For assertion messages: the exit code and the ends of both streams."""
        return f"exit {self.returncode}\n--- stdout:\n{self.stdout[-3000:]}\n--- stderr:\n{self.stderr[-3000:]}"


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "memvm-tests" / f"letta-code-{VERSION}"


def bundle() -> Path:
    """`letta.js` of the pinned release, fetched on first use. Skips the calling test when `node` or
    `npm` is missing or the npm registry cannot be reached; fails it on any other problem."""
    if shutil.which("node") is None:
        pytest.skip("Letta Code needs Node.js: no `node` on the PATH (Debian: apt-get install nodejs npm)")
    cached = cache_dir() / "package" / "letta.js"
    if not cached.is_file():
        if shutil.which("npm") is None:
            pytest.skip(f"fetching Letta Code needs npm: no `npm` on the PATH and no copy in {cache_dir()}")
        _install(cache_dir())
    return cached


def _install(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        _npm(staging, "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", str(staging))
        (tarball,) = staging.glob("*.tgz")
        _check_integrity(tarball)
        with tarfile.open(tarball) as archive:
            archive.extractall(staging, filter="data")  # the tarball's single top directory: package/
        tarball.unlink()
        _npm(staging, "install", f"ws@{WS_VERSION}", "--no-audit", "--no-fund", "--ignore-scripts")
        _check_ws(staging)
        staging.chmod(0o755)  # mkdtemp made it private; the finished copy is an ordinary directory
        try:
            staging.rename(target)
        except OSError:
            if not (target / "package" / "letta.js").is_file():  # not another run's finished copy
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _npm(cwd: Path, *args: str) -> None:
    command = ["npm", *args]
    try:
        done = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=NPM_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm registry unreachable: `{' '.join(command)}` still running after {NPM_TIMEOUT:.0f}s")
    if done.returncode == 0:
        return
    if any(code in done.stderr for code in UNREACHABLE):
        pytest.skip(f"npm registry unreachable: `{' '.join(command)}` said:\n{done.stderr[-1000:]}")
    pytest.fail(f"`{' '.join(command)}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def _check_integrity(tarball: Path) -> None:
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if digest != INTEGRITY:
        pytest.fail(f"{tarball.name} is not the published {PACKAGE}@{VERSION}: {digest} != {INTEGRITY}")


def _check_ws(staging: Path) -> None:
    lock = json.loads((staging / "package-lock.json").read_text())
    installed = lock["packages"].get("node_modules/ws", {})
    if (installed.get("version"), installed.get("integrity")) != (WS_VERSION, WS_INTEGRITY):
        pytest.fail(f"npm installed ws {installed.get('version')} ({installed.get('integrity')}), not {WS_VERSION}")


class LettaCode:
    """One Letta Code user on this machine, talking to `base_url` alone. `root` holds its HOME and
    its working directory."""

    def __init__(
        self, letta_js: Path, base_url: str, root: Path, timeout: float = RUN_TIMEOUT, extra_env: dict[str, str] | None = None
    ) -> None:
        self.letta_js = letta_js
        self.base_url = base_url
        self.extra_env = dict(extra_env or {})
        self.home = root / "home"
        self.workdir = root / "work"
        self.timeout = timeout
        self.home.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        """Built from nothing, so no key or setting of the host's (LETTA_API_KEY, a provider's key,
        a proxy) reaches it; only `extra_env` is added (e.g. MemFS's LETTA_MEMFS_*). Local mode needs
        no API key."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "LETTA_BASE_URL": self.base_url,
            "LETTA_CODE_TELEM": "0",
            "DO_NOT_TRACK": "1",
            "DISABLE_AUTOUPDATER": "1",
        } | self.extra_env

    def memory_dir(self, agent_id: str) -> Path:
        """Where Letta Code keeps the agent's MemFS checkout (a clone of the agent's git repository)."""
        return self.home / ".letta" / "agents" / agent_id / "memory"

    async def run(self, args: Sequence[str], prompt: str | None = None) -> Run:
        """`node letta.js [-p PROMPT] ARGS...` with stdin from /dev/null, to its end (at most
        `timeout` seconds). Async, so a scripted model serving in this event loop can answer."""
        command = ["node", str(self.letta_js), *(["-p", prompt] if prompt is not None else []), *args]
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=self.workdir,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, ended whole below
        )
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=self.timeout)
        except TimeoutError:
            pytest.fail(f"letta {' '.join(args)} still running after {self.timeout:.0f}s")
        finally:
            # Whatever it left running (a background helper), and itself on a timeout.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        assert process.returncode is not None
        return Run(process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"))


@contextlib.contextmanager
def memvm_serving(log_path: Path, database_url: str, model_url: str, **settings: str) -> Iterator[Served]:
    """`memvm serve` on a free loopback port, its model the scripted fake at `model_url`, with
    uvicorn's access log on (where every 4xx/5xx shows); `settings` are more MEMVM_* variables."""
    env = child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_OPENAI_BASE_URL=model_url,
        MEMVM_OPENAI_API_KEY="k",
        MEMVM_LOG_LEVEL="info",
        **settings,
    )
    port = free_port()
    with serve(log_path, env, "--port", str(port), port=port) as served:
        yield served


def access_log(served: Served) -> list[str]:
    """Every request memvm answered, with its status: `"METHOD /path?query HTTP/1.1" 404`."""
    return [match.group(0) for match in map(ACCESS_LINE.search, served.log().splitlines()) if match]


def error_responses(served: Served) -> list[str]:
    """Every request memvm answered with a 4xx or 5xx."""
    return [line for line in access_log(served) if int(line.rsplit(" ", 1)[1]) >= 400]


def succeeded(run: Run, served: Served, step: str) -> Any:
    """The step's JSON output, after checking that it exited 0 and printed JSON."""
    why = f"{step}: {run.describe()}\n--- memvm's 4xx/5xx so far: {error_responses(served)}"
    assert run.returncode == 0, why
    assert run.output is not None, why
    return run.output
