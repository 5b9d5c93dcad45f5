"""Crash safety: `kill -9` a real `memvm serve` at a random point while it runs scripted turns (sync,
and background runs, one queued behind a busy agent), REST edits of a block those turns also edit, and
an agent-file import; restart it and check what it left:

- every tool call in every touched agent's history is paired with its return;
- every touched block's version is its newest history entry, and its history has no gaps;
- no run stays active (`created` or `running`);
- the import left nothing or everything (the file's agents, blocks and history, complete);
- nothing the server acknowledged before the kill is missing (turn messages, PATCHed versions, imports);
- the next turn of every touched agent works.

Each trial is one kill; the next trial starts with the restart that checks it. The kill points come
from a seeded random: the seed is printed, and MEMVM_CRASH_SEED replays one. The bounded form runs
in CI (3 trials); `python -m pytest -m heavy tests/e2e/test_crash_safety.py -s` runs 100 trials.
"""

import asyncio
import itertools
import json
import os
import random
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support import agentfiles
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import Served, child_env, free_port, serve

MODEL = "openai/scripted-model"
IMPORT_TURNS = 150  # the generated file: two agents sharing a block, ~400 messages, a custom tool
KILL_WINDOW = (0.05, 1.6)  # seconds after the workload starts (which takes about 1-2 s)
LLM_DELAY = (0.02, 0.25)  # each model answer: long enough that kills land mid-turn, too
EDIT = re.compile(r"edit ([\w/-]+(?: [\w/-]+)*)")


@dataclass
class Acknowledged:
    """What the server answered 200 for before it was killed: it must survive the kill."""

    messages: dict[str, set[str]] = field(default_factory=dict)  # agent id → message ids a sync turn returned
    patches: list[tuple[str, int, str]] = field(default_factory=list)  # block id, version, value
    runs: list[str] = field(default_factory=list)  # background runs created
    imported: list[str] = field(default_factory=list)  # agent ids an import answered with
    errors: list[str] = field(default_factory=list)  # answers no request should get (5xx, an unexpected 4xx)


@dataclass
class Trial:
    number: int
    agents: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    import_names: tuple[str, str] = ("", "")
    acknowledged: Acknowledged = field(default_factory=Acknowledged)
    in_flight: list[str] = field(default_factory=list)  # what was still running when the kill came
    kill_at: float = 0.0


@dataclass
class Report:
    seed: int
    trials: int = 0
    corruptions: list[str] = field(default_factory=list)
    kills_during: Counter[str] = field(default_factory=Counter)  # what was in flight at each kill
    imports_kept: int = 0
    imports_dropped: int = 0
    stuck: set[str] = field(default_factory=set)  # runs found active after a restart


class Model:
    """Answers each request from its own conversation: a user message `edit A B` makes the agent call
    memory_insert on block A, then B (one step each), then answer in text."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines = itertools.count(1)

    def __call__(self, body: dict) -> dict:
        messages = body["messages"]
        last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
        done = sum(1 for message in messages[last_user + 1 :] if message["role"] == "tool")
        wanted = EDIT.match(messages[last_user]["content"] or "")
        labels = wanted.group(1).split() if wanted else []
        delay = self.rng.uniform(*LLM_DELAY)
        if done < len(labels):
            arguments = {"label": labels[done], "new_string": f"line {next(self.lines)}"}
            return {"tool_calls": [("memory_insert", arguments)], "delay": delay}
        return {"content": "done", "delay": delay}


# ---------------------------------------------------------------- reading the server


async def agent_history(http: httpx.AsyncClient, agent_id: str) -> list[dict]:
    """The whole history, oldest first (pages are bounded by stored messages, which share their id
    with the Letta messages they expand to)."""
    messages: list[dict] = []
    params: dict = {"order": "asc", "limit": 1000}
    while True:
        response = await http.get(f"/v1/agents/{agent_id}/messages", params=params)
        response.raise_for_status()
        page = response.json()
        messages += page
        if len({message["id"] for message in page}) < params["limit"]:
            return messages
        params["after"] = page[-1]["id"]


async def block_history(http: httpx.AsyncClient, block_id: str) -> list[dict]:
    """Newest first."""
    entries: list[dict] = []
    params: dict = {"limit": 1000}
    while True:
        response = await http.get(f"/v1/blocks/{block_id}/history", params=params)
        response.raise_for_status()
        entries += response.json()
        if len(response.json()) < params["limit"]:
            return entries
        params["before"] = entries[-1]["version"]


async def unpaired_calls(http: httpx.AsyncClient, agent_id: str) -> list[str]:
    history = await agent_history(http, agent_id)
    calls = [m["tool_call"]["tool_call_id"] for m in history if m["message_type"] == "tool_call_message"]
    returns = [m["tool_call_id"] for m in history if m["message_type"] == "tool_return_message"]
    unpaired = [f"call {c} has no return" for c in calls if c not in returns]
    unpaired += [f"return {r} has no call" for r in returns if r not in calls]
    unpaired += [f"call {c} returned {returns.count(c)} times" for c in set(calls) if returns.count(c) > 1]
    return unpaired


async def block_problems(http: httpx.AsyncClient, block_id: str) -> list[str]:
    block = await http.get(f"/v1/blocks/{block_id}")
    if block.status_code == 404:
        return []  # a block the killed import never committed
    entries = await block_history(http, block_id)
    versions = [entry["version"] for entry in entries][::-1]
    problems = []
    if block.json()["version"] != versions[-1]:
        problems.append(f"block {block_id} is at version {block.json()['version']}, its history at {versions[-1]}")
    if versions != list(range(versions[0], versions[0] + len(versions))) or entries[-1]["change"] != "create":
        problems.append(f"block {block_id} history has gaps or no create: {versions}")
    if entries[0]["new"].get("value", block.json()["value"]) != block.json()["value"] and entries[0]["change"] != "create":
        problems.append(f"block {block_id}: its newest history entry is not its value")
    return problems


async def agents_named(http: httpx.AsyncClient, name: str) -> list[dict]:
    response = await http.get("/v1/agents/", params={"name": name, "limit": 10})
    response.raise_for_status()
    return response.json()


async def imported_shape(http: httpx.AsyncClient, agent: dict) -> dict:
    history = await agent_history(http, agent["id"])
    return {
        "messages": len({m["id"] for m in history}),
        "blocks": sorted((b["label"], b["value"]) for b in agent["blocks"]),
        "tools": sorted(t["name"] for t in agent["tools"]),
    }


# ---------------------------------------------------------------- one trial


def import_file(trial: int) -> tuple[bytes, tuple[str, str]]:
    data = agentfiles.build(agentfiles.Shape(turns=IMPORT_TURNS, shared_blocks=1))
    for agent in data["agents"]:
        agent["name"] = f"trial{trial}_{agent['name']}"
    names = (data["agents"][0]["name"], data["agents"][1]["name"])
    return json.dumps(data).encode(), names


async def prepare(http: httpx.AsyncClient, trial: Trial) -> None:
    shared = (await http.post("/v1/blocks/", json={"label": "shared", "value": "", "limit": 100_000})).json()
    trial.blocks.append(shared["id"])
    for _ in range(3):
        body = {"model": MODEL, "block_ids": [shared["id"]], "memory_blocks": [{"label": "human", "value": "", "limit": 100_000}]}
        agent = (await http.post("/v1/agents/", json=body)).json()
        trial.agents.append(agent["id"])
        trial.blocks += [block["id"] for block in agent["blocks"] if block["label"] == "human"]


async def workload(http: httpx.AsyncClient, trial: Trial, rng: random.Random) -> dict[str, asyncio.Task]:
    """Start everything at once (each after a small random offset); returns the tasks by name."""
    ack = trial.acknowledged
    a0, a1, a2 = trial.agents

    def answered(response: httpx.Response, what: str) -> None:
        if response.status_code != 200:
            ack.errors.append(f"{what} answered {response.status_code}: {response.text[:300]}")
            raise AssertionError(ack.errors[-1])

    async def after(offset: float, coroutine):
        await asyncio.sleep(offset)
        return await coroutine

    async def sync_turn(agent_id: str, text: str) -> None:
        response = await http.post(f"/v1/agents/{agent_id}/messages", json={"input": text})
        answered(response, "turn")
        ack.messages.setdefault(agent_id, set()).update(m["id"] for m in response.json()["messages"])

    async def background(agent_id: str, text: str) -> None:
        response = await http.post(f"/v1/agents/{agent_id}/messages/async", json={"input": text})
        answered(response, "background send")
        ack.runs.append(response.json()["id"])

    async def patches(block_id: str) -> None:
        for k in itertools.count():
            current = await http.get(f"/v1/blocks/{block_id}")
            headers = {"If-Match": current.headers["etag"]} if k % 2 else {}
            value = f"{current.json()['value']}\nrest {trial.number}.{k}"
            response = await http.patch(f"/v1/blocks/{block_id}", json={"value": value}, headers=headers)
            if response.status_code != 412:
                answered(response, "PATCH")
                ack.patches.append((block_id, response.json()["version"], value))
            await asyncio.sleep(rng.uniform(0.01, 0.1))

    async def import_agents() -> None:
        content, _ = import_file(trial.number)
        files = {"file": ("trial.af", content, "application/json")}
        response = await http.post("/v1/agents/import", files=files, data={"model": MODEL})
        answered(response, "import")
        ack.imported += response.json()["agent_ids"]

    jobs = {
        "sync turn": sync_turn(a0, "edit shared human"),
        "sync turn 2": sync_turn(a1, "edit human shared"),
        "background run": background(a2, "edit shared human"),
        "queued background run": background(a0, "edit human"),  # waits for a0's sync turn: `created`
        "block PATCHes": patches(trial.blocks[0]),
        "import": import_agents(),
    }
    return {name: asyncio.create_task(after(rng.uniform(0, 0.4), job)) for name, job in jobs.items()}


async def check(http: httpx.AsyncClient, trial: Trial, reference: dict[str, dict], report: Report) -> list[str]:
    """After the restart: the invariants over everything the trial touched; then a turn on each agent."""
    problems = list(trial.acknowledged.errors)
    active = (await http.get("/v1/runs/", params={"active": "true", "limit": 1000})).json()
    problems += [f"run {run['id']} stays {run['status']} after the restart" for run in active if run["id"] not in report.stuck]
    report.stuck |= {run["id"] for run in active}  # each counted once, by the trial that left it
    for run_id in trial.acknowledged.runs:
        run = (await http.get(f"/v1/runs/{run_id}")).json()
        if run.get("status") in (None, "created", "running"):
            problems.append(f"acknowledged background run {run_id}: {run}")
        elif run["status"] == "failed":  # the kill came while it ran (or before it began)
            report.kills_during["a background run's turn"] += 1

    imported: list[dict] = []
    for name in trial.import_names:
        found = await agents_named(http, name)
        imported += found
    if imported:
        report.imports_kept += 1
        if len(imported) != 2:
            problems.append(f"import of trial {trial.number} is partial: {[a['name'] for a in imported]}")
        for agent in imported:
            shape = await imported_shape(http, agent)
            expected = reference[agent["name"].split("_", 1)[1]]
            if shape != expected:
                problems.append(f"imported agent {agent['name']} differs from a whole import: {shape} != {expected}")
    else:
        report.imports_dropped += 1
    if missing := set(trial.acknowledged.imported) - {agent["id"] for agent in imported}:
        problems.append(f"acknowledged import lost agents {sorted(missing)}")

    agents = trial.agents + [agent["id"] for agent in imported]
    blocks = set(trial.blocks)
    for agent in imported:
        blocks |= {block["id"] for block in agent["blocks"]}
    for agent_id in agents:
        problems += [f"agent {agent_id}: {problem}" for problem in await unpaired_calls(http, agent_id)]
        stored = {m["id"] for m in await agent_history(http, agent_id)}
        if lost := trial.acknowledged.messages.get(agent_id, set()) - stored:
            problems.append(f"agent {agent_id}: acknowledged messages lost: {sorted(lost)}")
    for block_id in sorted(blocks):
        problems += await block_problems(http, block_id)
    for block_id, version, value in trial.acknowledged.patches:
        at = await http.get(f"/v1/blocks/{block_id}/versions/{version}")
        if at.status_code != 200 or at.json()["value"] != value:
            problems.append(f"acknowledged PATCH of {block_id} to version {version} lost: {at.status_code}")

    problems += [problem for found in await asyncio.gather(*(next_turn(http, a, trial) for a in agents)) for problem in found]
    for block_id in sorted(blocks):
        problems += await block_problems(http, block_id)
    return problems


async def next_turn(http: httpx.AsyncClient, agent_id: str, trial: Trial) -> list[str]:
    """A turn that edits a block works (turns of different agents run at once)."""
    label = "shared" if agent_id in trial.agents else "persona"
    response = await http.post(f"/v1/agents/{agent_id}/messages", json={"input": f"edit {label}"})
    body = response.json() if response.status_code == 200 else {}
    returns = [m for m in body.get("messages", []) if m["message_type"] == "tool_return_message"]
    if body.get("stop_reason", {}).get("stop_reason") != "end_turn" or [r["status"] for r in returns] != ["success"]:
        return [f"agent {agent_id}: the next turn failed: {response.status_code} {response.text[:500]}"]
    return []


def kill(served: Served) -> None:
    """SIGKILL the server's whole process group (it was started in its own session)."""
    os.killpg(served.process.pid, signal.SIGKILL)
    served.process.wait(timeout=10)


async def crash_trials(tmp_path: Path, database_url: str, llm: ScriptedLLM, trials: int, seed: int) -> Report:
    rng = random.Random(seed)
    llm.respond(Model(random.Random(seed + 1)))
    env = child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="k",
        MEMVM_TURN_LOCK_TIMEOUT_SECONDS="20",
        MEMVM_LLM_TIMEOUT_SECONDS="20",
    )
    report = Report(seed)
    reference: dict[str, dict] = {}
    previous: Trial | None = None
    for number in range(trials + 1):  # the last start only checks the last kill
        port = free_port()
        with serve(tmp_path / f"serve-{number}.log", env, "--port", str(port), port=port) as served:
            async with httpx.AsyncClient(base_url=served.base_url, timeout=60) as http:
                if previous is None:  # a whole import, to compare what the killed ones left with
                    content, names = import_file(-1)
                    files = {"file": ("whole.af", content, "application/json")}
                    ids = (await http.post("/v1/agents/import", files=files, data={"model": MODEL})).json()["agent_ids"]
                    for agent_id in ids:
                        agent = (await http.get(f"/v1/agents/{agent_id}")).json()
                        reference[agent["name"].split("_", 1)[1]] = await imported_shape(http, agent)
                else:
                    problems = await check(http, previous, reference, report)
                    report.trials += 1
                    report.corruptions += [f"trial {previous.number} (seed {seed}): {p}" for p in problems]
                    if problems:
                        print(f"\ntrial {previous.number} (in flight: {', '.join(previous.in_flight)}): {problems}")
                if number == trials:
                    break
                trial = Trial(number, import_names=import_file(number)[1])
                await prepare(http, trial)
                tasks = await workload(http, trial, rng)
                trial.kill_at = rng.uniform(*KILL_WINDOW)
                await asyncio.sleep(trial.kill_at)
                trial.in_flight = [name for name, task in tasks.items() if not task.done()]
                kill(served)
                report.kills_during.update(trial.in_flight)
                await asyncio.gather(*tasks.values(), return_exceptions=True)
                previous = trial
    return report


def summary(report: Report, elapsed: float) -> str:
    during = ", ".join(f"{name} {count}" for name, count in sorted(report.kills_during.items()))
    return (
        f"\ncrash safety: seed {report.seed}, {report.trials} trials in {elapsed:.0f}s, "
        f"{len(report.corruptions)} corruptions; kills during: {during}; "
        f"imports left whole {report.imports_kept}, left out {report.imports_dropped}"
    )


def seed_of() -> int:
    return int(os.environ.get("MEMVM_CRASH_SEED") or random.SystemRandom().randrange(2**32))


async def test_kill_9_at_random_points_leaves_a_consistent_server(tmp_path, database_url, llm):
    started, seed = time.monotonic(), seed_of()
    print(f"\ncrash safety seed {seed} (MEMVM_CRASH_SEED={seed} replays it)")
    report = await crash_trials(tmp_path, database_url, llm, trials=3, seed=seed)
    print(summary(report, time.monotonic() - started))
    assert report.corruptions == []


@pytest.mark.heavy
async def test_kill_9_one_hundred_times(tmp_path, database_url, llm):
    started, seed = time.monotonic(), seed_of()
    print(f"\ncrash safety seed {seed} (MEMVM_CRASH_SEED={seed} replays it)")
    report = await crash_trials(tmp_path, database_url, llm, trials=int(os.environ.get("MEMVM_CRASH_TRIALS", "100")), seed=seed)
    print(summary(report, time.monotonic() - started))
    assert report.trials >= 100 or "MEMVM_CRASH_TRIALS" in os.environ
    assert report.corruptions == []
