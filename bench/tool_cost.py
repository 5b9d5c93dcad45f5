#!/usr/bin/env python3
"""Overhead of one sandboxed custom-tool call, next to an in-process call (`bench/run.sh tools`).

Every phase runs at concurrency 1 and interleaves its variants call by call, in a rotating order.
1. In-process: a plain call; interpreter starts with the jail's flags; the launchers alone (prlimit,
   bwrap, setpriv as root) running `true`; `Sandbox.run` in bubblewrap and process mode, and with
   `pip_requirements` (its venv built beforehand, empty); `-X importtime` of a start with the bootstrap.
2. HTTP, against a running `memvm serve`: `GET /v1/health/` (the HTTP floor) and `POST /v1/tools/run`.
3. Agent turns with the instant fake LLM, which calls the tool a `#tool=NAME` directive in the user
   message names: a custom tool vs. built-ins vs. no tool; one fresh agent each, same tools attached.

    bench/run.sh tools [--quick]    # starts the fake LLM and memvm, runs this, stops everything
    python3 bench/tool_cost.py --base-url http://127.0.0.1:9283 --llm-url http://127.0.0.1:8399/v1 --out-json x.json
Without --base-url only phase 1 runs. Phase 3 writes agents and tools: use a throwaway data dir."""

import argparse
import asyncio
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx

from memvm.config import Settings
from memvm.sandbox import command, venvs
from memvm.sandbox import launchers as sandbox_launchers
from memvm.sandbox.calls import ToolRun
from memvm.sandbox.identities import Identity
from memvm.sandbox.runner import Sandbox

# Run as a file, this script's directory is on sys.path: the search bench's helpers import from there.
from search.common import loadavg, pct

TOOL = "bench_add"
SOURCE = f'''def {TOOL}(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b
'''
ARGS = {"a": 1, "b": 2}
REQUIREMENTS = ("memvm-bench-nothing==0",)  # never installed: see empty_venv
# name: (directive for the fake LLM, the tool it must call, what the row is)
TURNS: dict[str, tuple[str, str | None, str]] = {
    "custom tool": (f"#tool={TOOL}", TOOL, f"model calls `{TOOL}` (sandboxed), then answers: 2 steps"),
    "conversation_search": ("#tool=conversation_search", "conversation_search", "built-in: embeds the query, hybrid SQL search"),
    "memory_insert": ("#tool=memory_insert", "memory_insert", "built-in: edits the `human` block (the workload's tool)"),
    "no tool": ("#tool=none", None, "model answers at once: 1 step, no tool"),
}

Call = Callable[[], Awaitable[None]]
CpuMeter = Callable[[], float | None]


@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    call: Call
    cpu_counted: bool = True  # bubblewrap: its PID namespace keeps the tool's CPU out of our children's times


async def interleave(
    label: str, variants: list[Variant], rounds: int, cpu: CpuMeter, settle: Call | None = None, warmup: int = 3
) -> list[dict[str, Any]]:
    """Concurrency 1, one call of each variant per round, the order rotating from round to round."""
    print(f"[tools {time.strftime('%H:%M:%S')}] {label}: {len(variants)} variants x {rounds} calls", flush=True)
    latencies: dict[str, list[float]] = {v.name: [] for v in variants}
    cpu_s: dict[str, float | None] = {v.name: 0.0 if v.cpu_counted else None for v in variants}
    rows: list[dict[str, Any]] = [{"name": v.name, "what": v.what, "n": rounds} for v in variants]
    for r in range(warmup + rounds):
        for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
            if settle is not None:
                await settle()
            c0, t0 = cpu(), time.perf_counter()
            await v.call()
            elapsed, c1, total = time.perf_counter() - t0, cpu(), cpu_s[v.name]
            if r >= warmup:
                latencies[v.name].append(1000 * elapsed)
                cpu_s[v.name] = None if total is None or c0 is None or c1 is None else total + c1 - c0
    for row in rows:
        values, total = sorted(latencies[row["name"]]), cpu_s[row["name"]]
        row.update(p50_ms=pct(values, 50), p95_ms=pct(values, 95), cpu_ms=None if total is None else 1000 * total / rounds)
    return rows


def server_cpu(pid: int | None) -> float | None:
    """memvm and its reaped children, not PostgreSQL (a separate daemon), nor a jailed tool (see Variant)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split() if pid else []
    except OSError:
        return None
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK") if fields else None


# ---------------------------------------------------------------- phase 1: in-process
async def empty_venv(settings: Settings) -> str:
    """The venv a tool with REQUIREMENTS runs in, built by the server's own code but with pip's install
    step skipped: no index is needed, and what a call costs is the venv's start, no package imported."""
    build = venvs._run

    async def no_install(argv: list[str], what: str) -> None:
        if not what.startswith("install"):
            await build(argv, what)

    with mock.patch.object(venvs, "_run", no_install):
        return await venvs.Venvs(settings.data_dir / "tool-venvs").interpreter(REQUIREMENTS)


def launchers(settings: Settings, *, jail: bool) -> list[str]:
    """What `Sandbox.run` puts in front of the interpreter (prlimit, bwrap, setpriv as root), running `true`."""
    found = sandbox_launchers.find(jail=jail, switch_uid=os.geteuid() == 0)
    identity = Identity(settings.tool_sandbox_first_uid if os.geteuid() == 0 else None, settings.tool_max_processes)
    switch = identity.switch(found.setpriv)
    limits, python = command.Limits.of(settings), command.base_interpreter()
    return [*command.launch(found, limits, python, switch=switch, processes=identity.processes(), network=False), "/bin/true"]


def started(argv: list[str]) -> Call:
    async def call() -> None:
        process = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL, env=command.BASE_ENV)
        if await process.wait() != 0:
            raise RuntimeError(f"{argv[0]} … {argv[-1]} failed")

    return call


def sandboxed(sandbox: Sandbox, requirements: tuple[str, ...]) -> Call:
    async def call() -> None:
        result = await sandbox.run(ToolRun(SOURCE, TOOL, ARGS, requirements=requirements))
        if result.status != "success" or result.value != "3":
            raise RuntimeError(f"sandboxed call failed ({sandbox.mode}, {requirements}): {result}")

    return call


def plain() -> Call:
    namespace: dict[str, Any] = {}
    exec(SOURCE, namespace)  # compiled once, as a built-in is imported once

    async def call() -> None:
        if namespace[TOOL](**ARGS) != 3:
            raise RuntimeError("plain call failed")

    return call


def start_imports(python: str, runs: int = 5, top: int = 6) -> dict[str, Any]:
    """Median cumulative import time (ms) of every top-level import of a start with the bootstrap (the
    interpreter's own start-up imports included), over a few runs, no jail: where a start goes."""
    request = json.dumps({"source": SOURCE, "function": TOOL, "arguments": ARGS, "env": {}, "agent_state": None, "result_fd": 1})
    by_module: dict[str, list[float]] = {}
    for _ in range(runs):
        argv = [python, "-X", "importtime", *command.interpreter(python)[1:]]
        done = subprocess.run(argv, input=request.encode(), capture_output=True, check=True)
        for line in done.stderr.decode().splitlines():
            parts = line.removeprefix("import time:").split("|")
            if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
                by_module.setdefault(parts[2].strip(), []).append(int(parts[1]) / 1000)
    medians = {name: statistics.median(v) for name, v in by_module.items()}
    top_ms = [(name, round(t, 1)) for name, t in sorted(medians.items(), key=lambda kv: -kv[1])[:top]]
    return {"total_ms": round(sum(medians.values()), 1), "top": top_ms}


async def inprocess(settings: Settings, calls: int) -> dict[str, Any]:
    sandboxes = {mode: Sandbox(settings.model_copy(update={"tool_sandbox": mode})) for mode in ("bubblewrap", "process")}
    for sandbox in sandboxes.values():
        await sandbox.probe()
    if sandboxes["bubblewrap"].unavailable is not None:
        raise SystemExit(f"tool_cost: the bubblewrap sandbox is unavailable: {sandboxes['bubblewrap'].unavailable}")
    pythons = {"runtime": command.base_interpreter(), "venv": await empty_venv(settings)}
    switch = "prlimit + setpriv" if os.geteuid() == 0 else "prlimit"
    bare = {k: [*command.interpreter(exe)[:-1], "pass"] for k, exe in pythons.items()}  # the jail's flags, no bootstrap
    bare["runtime + json"] = [*bare["runtime"][:-1], "import json"]  # the bootstrap's one costly import
    jailed, venv_path, server_path = sandboxes["bubblewrap"], "a `pip_requirements` tool's path", "the server's path"
    variants = [
        Variant("plain call", f"`{TOOL}(a=1, b=2)` in this process", plain()),
        *(Variant(f"bare start, {k}", f"`{' '.join(argv[1:])}`", started(argv)) for k, argv in bare.items()),
        Variant("launchers", f"{switch} + `true`, no interpreter", started(launchers(settings, jail=False))),
        Variant("launchers + bwrap", f"{switch} + bwrap + `true`", started(launchers(settings, jail=True)), False),
        Variant("Sandbox.run bubblewrap, runtime", f"{switch} + bwrap + bootstrap: {server_path}", sandboxed(jailed, ()), False),
        Variant("Sandbox.run process, runtime", f"{switch} + bootstrap, no bwrap", sandboxed(sandboxes["process"], ())),
        Variant("Sandbox.run bubblewrap, venv", venv_path, sandboxed(jailed, REQUIREMENTS), False),
    ]
    # CPU: this process and its reaped children (user + system); a call's processes are waited for within it.
    rows = await interleave("in-process", variants, calls, lambda: sum(os.times()[:4]))
    return {"rows": rows, "start_imports": {k: start_imports(exe) for k, exe in pythons.items()}, "pythons": pythons}


# ---------------------------------------------------------------- phases 2 and 3: over HTTP
async def http_calls(client: httpx.AsyncClient, calls: int, cpu: CpuMeter) -> list[dict[str, Any]]:
    async def health() -> None:
        (await client.get("/v1/health/")).raise_for_status()

    async def tools_run() -> None:
        response = await client.post("/v1/tools/run", json={"source_code": SOURCE, "args": ARGS})
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success" or body.get("tool_return") != "3":
            raise RuntimeError(f"POST /v1/tools/run: {response.status_code} {body}")

    run = Variant("POST /v1/tools/run", f"`{TOOL}` with {json.dumps(ARGS)}", tools_run)
    return await interleave("HTTP", [Variant("GET /v1/health/", "HTTP floor", health), run], calls, cpu)


@dataclass
class Turn:
    """One agent's turns for one variant: numbered user messages that carry the fake LLM's directive."""

    client: httpx.AsyncClient
    agent_id: str
    directive: str
    expected: str | None
    count: int = 0

    async def __call__(self) -> None:
        self.count += 1
        text = f"Hello {self.count}, please remember that my favourite word is bench{self.count}. {self.directive}"
        body = {"messages": [{"role": "user", "content": text}]}
        response = await self.client.post(f"/v1/agents/{self.agent_id}/messages", json=body)
        response.raise_for_status()
        # The turn must have run the tool asked for, successfully: otherwise its time means something else.
        messages = response.json().get("messages") or []
        called = [m["tool_call"]["name"] for m in messages if m.get("message_type") == "tool_call_message" and m.get("tool_call")]
        returns = [m for m in messages if m.get("message_type") == "tool_return_message"]
        ok = called == ([self.expected] if self.expected else []) and all(r.get("status") == "success" for r in returns)
        if self.expected == TOOL:  # the fake LLM fills integer arguments with 0
            ok = ok and [r.get("tool_return") for r in returns] == ["0"]
        if not ok:
            raise RuntimeError(f"turn '{self.directive}' did not run {self.expected or 'no tool'}: {json.dumps(messages)[:1500]}")


async def quiet(pid: int | None) -> None:
    """Until memvm spends no CPU tick in 100 ms (its embedding worker is done), at most 5 s."""
    for _ in range(50):
        if (before := server_cpu(pid)) is None:
            return
        await asyncio.sleep(0.1)
        if server_cpu(pid) == before:
            return


async def turns(client: httpx.AsyncClient, llm_url: str, rounds: int, server_pid: int | None) -> list[dict[str, Any]]:
    (await client.put("/v1/tools/", json={"source_code": SOURCE})).raise_for_status()  # upsert: reruns on one server
    # Like the workload's agent (config mode), the custom tool attached. No embedding_config: memvm embeds locally anyway.
    blocks = [{"label": label, "value": f"The {label} of a bench agent."} for label in ("persona", "human")]
    llm = {"model": "fake-gpt", "model_endpoint_type": "openai", "model_endpoint": llm_url, "context_window": 128000}
    variants = []
    for name, (directive, expected, what) in TURNS.items():
        body = {"name": f"tool-cost-{name.replace(' ', '-')}", "memory_blocks": blocks, "llm_config": llm, "tools": [TOOL]}
        response = await client.post("/v1/agents/", json=body)
        response.raise_for_status()
        variants.append(Variant(name, what, Turn(client, response.json()["id"], directive, expected)))
    # No CPU column: the background embedding worker's CPU would land on whichever turn comes next. And each
    # turn starts on a quiet server, so the previous turn's embeddings do not compete with this one's tool.
    return await interleave("agent turns", variants, rounds, lambda: None, settle=functools.partial(quiet, server_pid))


# ---------------------------------------------------------------- report
def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2g}" if value < 0.1 else f"{value:.2f}"


def table(rows: list[dict[str, Any]], cpu_label: str | None) -> list[str]:
    head = "| variant | what | n | p50 ms | p95 ms |" + (f" {cpu_label} |" if cpu_label else "")
    lines = [head, "|---|---|---:|---:|---:|" + ("---:|" if cpu_label else "")]
    for r in rows:
        cpu = f" {ms(r['cpu_ms'])} |" if cpu_label else ""
        lines.append(f"| {r['name']} | {r['what']} | {r['n']} | {ms(r['p50_ms'])} | {ms(r['p95_ms'])} |{cpu}")
    return lines


def findings(report: dict[str, Any]) -> list[str]:
    rows = [r for phase in ("inprocess", "http", "turns") for r in report.get(phase, {}).get("rows", [])]
    p50, p95 = {r["name"]: r["p50_ms"] for r in rows}, {r["name"]: r["p95_ms"] for r in rows}
    cpu = {r["name"]: r.get("cpu_ms") for r in rows}
    server, process, venv = (f"Sandbox.run {k}" for k in ("bubblewrap, runtime", "process, runtime", "bubblewrap, venv"))
    start, launch = p50["bare start, runtime"], p50["launchers"]
    jail, bootstrap = p50["launchers + bwrap"] - launch, p50[process] - start - launch
    imports, below = dict(report["inprocess"]["start_imports"]["runtime"]["top"]), {True: "below", False: "not below"}
    s50, s95 = p50[server], p95[server]
    out = [
        f"- One sandboxed call (the server's path): p50 **{ms(s50)} ms**, p95 **{ms(s95)} ms** (target: well under 100 ms; "
        f"p50 {below[s50 < 100]} 100, p95 {below[s95 < 100]} 100); ×{s50 / p50['plain call']:,.0f} a plain call.",
        f"- Where it goes (p50): interpreter start `python -I -S -c pass` {ms(start)} ms; the launchers' execs {ms(launch)} ms; "
        f"bwrap {jail:+.1f} ms; the bootstrap (process mode minus start minus launchers) {bootstrap:+.1f} ms, of which "
        f"`import json` {p50['bare start, runtime + json'] - start:+.1f} ms ({imports.get('json', '?')} by `-X importtime`). "
        f"Sum {start + launch + jail + bootstrap:.1f} ms vs. {ms(p50[server])} measured.",
        f"- bubblewrap adds {p50[server] - p50[process]:+.1f} ms p50 over process mode; process mode spends "
        f"{ms(cpu[process])} CPU ms per call (bench + children), so a core serves about "
        f"{1000 / cpu[process] if cpu[process] else 0:.0f} calls/s.",
        f"- A `pip_requirements` tool (its venv built, no package imported): p50 {ms(p50[venv])} ms, p95 "
        f"{ms(p95[venv])} ms; its interpreter starts with `site` (`python -I -c pass`: {ms(p50['bare start, venv'])} ms).",
    ]
    if "POST /v1/tools/run" in p50:
        run = p50["POST /v1/tools/run"]
        out.append(
            f"- `POST /v1/tools/run`: p50 **{ms(run)} ms**, p95 **{ms(p95['POST /v1/tools/run'])} ms**: "
            f"{run - p50['GET /v1/health/']:+.1f} ms over the HTTP floor, {run - p50[server]:+.1f} ms over `Sandbox.run`."
        )
    if "custom tool" in p50:
        deltas = ", ".join(f"{p50['custom tool'] - p50[n]:+.1f} ms vs. {n}" for n in TURNS if n != "custom tool")
        out.append(f"- Agent turn with the custom tool: p50 **{ms(p50['custom tool'])} ms**; {deltas}.")
    return out


def markdown(report: dict[str, Any]) -> str:
    m, pythons = report["machine"], report["inprocess"]["pythons"]
    lines = [
        f"# memvm: cost of a sandboxed custom-tool call — {m['date_utc']}",
        "",
        f"{m['nproc']} cores ({m.get('cpu', '?')}), Python {m['python']}, {m['bwrap']}, uid {m['uid']}; load average "
        f"{m['loadavg_start']} at the start, {report.get('loadavg_end', '?')} at the end. Interpreters: runtime "
        f"`{pythons['runtime']}`, venv `{pythons['venv']}`.",
        "",
        "## In-process (`memvm.sandbox.runner.Sandbox`, no server)",
        "",
        *table(report["inprocess"]["rows"], "CPU ms/call (bench + reaped children; `-`: bwrap's PID namespace hides it)"),
        "",
        "Imports of a start with the bootstrap, by top-level module, median ms over 5 runs of "
        "`python -X importtime <the jail's flags> -c <bootstrap>`, no jail:",
        "",
    ]
    for name, imports in report["inprocess"]["start_imports"].items():
        lines.append(f"- {name}: {imports['total_ms']} ms in all; " + ", ".join(f"`{mod}` {t}" for mod, t in imports["top"]))
    if "http" in report:
        lines += ["", "## Over HTTP (`memvm serve`)", "", *table(report["http"]["rows"], "memvm CPU ms/op (not the jailed tool)")]
    if "turns" in report:
        lines += ["", "## Agent turns (instant fake LLM; each starts on idle memvm)", "", *table(report["turns"]["rows"], None)]
    return "\n".join([*lines, "", "## Findings", "", *findings(report), ""])


def machine() -> dict[str, Any]:
    cpuinfo, bwrap = Path("/proc/cpuinfo").read_text().splitlines(), shutil.which("bwrap")
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "nproc": os.cpu_count(),
        "cpu": next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?"),
        "python": sys.version.split()[0],
        "bwrap": subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip() if bwrap else "-",
        "uid": os.geteuid(),  # root: each call runs as its own unprivileged uid
        "loadavg_start": loadavg(),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine(), "params": vars(args)}
    with tempfile.TemporaryDirectory(prefix="memvm-tool-cost-") as data:  # for the venv only (tool-venvs/)
        os.chmod(data, 0o755)  # as root, each call runs as an unprivileged uid, which must read the venv
        report["inprocess"] = await inprocess(Settings(data_dir=Path(data)), args.calls)
    if args.base_url:
        async with httpx.AsyncClient(base_url=args.base_url, timeout=120) as client:
            report["http"] = {"rows": await http_calls(client, args.calls, functools.partial(server_cpu, args.server_pid))}
            if args.llm_url and args.turns:
                report["turns"] = {"rows": await turns(client, args.llm_url, args.turns, args.server_pid)}
    report["loadavg_end"] = loadavg()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="a running memvm serve; without it, only the in-process phase runs")
    parser.add_argument("--llm-url", help="the fake LLM (…/v1) for the agent turns; without it, no turns")
    parser.add_argument("--server-pid", type=int, help="memvm's pid, for its CPU per request")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per in-process and HTTP variant (200)")
    parser.add_argument("--turns", type=int, default=40, help="timed turns per agent-turn variant (40)")
    parser.add_argument("--quick", action="store_true", help="30 calls and 10 turns per variant")
    parser.add_argument("--out-json")
    parser.add_argument("--out-md")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.turns = min(args.calls, 30), min(args.turns, 10)
    text = markdown(report := asyncio.run(run(args)))
    if args.out_json:
        Path(args.out_json).write_text(json.dumps(report, indent=1, default=str))
    if args.out_md:
        Path(args.out_md).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
