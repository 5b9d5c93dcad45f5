"""Fixtures for the letta-client SDK conformance suite.

One real `memvm serve` process per test module, on a database cloned once for that module
from the session's migrated template, talking to a module-scoped ScriptedLLM that runs in
pytest's (session-scoped) event loop. Tests use the SDK's *async* client so the loop stays
free to answer the fake model while a request is in flight. Tests in a module share the
server, so each test creates its own agents/blocks and never relies on global counts.
"""

import itertools
import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from letta_client import AsyncLetta, DefaultAsyncHttpxClient

from tests.support.pg import TEMPLATE_DB, admin_execute, with_database
from tests.support.scripted_llm import ScriptedLLM
from tests.support.serve import Served, child_env, free_port, serve

_module_numbers = itertools.count(1)
# The suite runs authenticated, as Letta deployments do: the SDK sends an organization's key.
ADMIN_KEY = "sdk-suite-admin-key"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Remember each phase's report on the item, so fixtures can tell whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="module")
async def module_database_url(request: pytest.FixtureRequest, server_url: str, template_url: str) -> AsyncIterator[str]:
    """A fresh, migrated database shared by every test of one module."""
    stem = re.sub(r"\W", "_", request.module.__name__.rsplit(".", 1)[-1]).lower()[:40]
    name = f"sdk_{next(_module_numbers)}_{stem}"
    await admin_execute(server_url, f"CREATE DATABASE {name} TEMPLATE {TEMPLATE_DB}")
    yield with_database(server_url, name)
    await admin_execute(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
async def module_llm() -> AsyncIterator[ScriptedLLM]:
    async with ScriptedLLM() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def memvm_server(module_database_url: str, module_llm: ScriptedLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real `memvm serve` process (stopped with SIGINT after the module's last test)."""
    port = free_port()
    env = child_env(
        MEMVM_DATABASE_URL=module_database_url,
        MEMVM_MIGRATE_ON_START="false",
        MEMVM_OPENAI_BASE_URL=module_llm.base_url,
        MEMVM_OPENAI_API_KEY="test-key",
        MEMVM_LLM_ATTEMPTS="2",
        MEMVM_LLM_TIMEOUT_SECONDS="10",
        MEMVM_TURN_LOCK_TIMEOUT_SECONDS="5",
        MEMVM_ADMIN_API_KEY=ADMIN_KEY,
    )
    log_path = tmp_path_factory.mktemp("memvm-sdk") / "serve.log"
    with serve(log_path, env, "--port", str(port), port=port) as served:
        yield served


@pytest.fixture(scope="module")
def api_key(memvm_server: Served) -> str:
    """A key of the module's own organization, made through the admin API."""
    created = httpx.post(
        f"{memvm_server.base_url}/v1/admin/api-keys",
        json={"organization": "sdk-suite", "name": "conformance"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=10.0,
    )
    assert created.status_code == 200, created.text
    return str(created.json()["key"])


@pytest.fixture
def llm(module_llm: ScriptedLLM) -> ScriptedLLM:
    """The module's ScriptedLLM with an empty script (no default, no responder) and an empty request log for this test."""
    module_llm._script.clear()
    module_llm._default = None
    module_llm._responder = None
    module_llm.requests.clear()
    module_llm.request_headers.clear()
    return module_llm


@pytest.fixture
def sdk_requests() -> list[httpx.Request]:
    """Every HTTP request the test's `letta` client put on the wire (retries included)."""
    return []


@pytest.fixture
async def letta(
    request: pytest.FixtureRequest, memvm_server: Served, api_key: str, sdk_requests: list[httpx.Request]
) -> AsyncIterator[AsyncLetta]:
    """The official async SDK client, with its default retry policy (max_retries=2)."""

    async def record(sent: httpx.Request) -> None:
        sdk_requests.append(sent)

    log_start = len(memvm_server.log())
    http = DefaultAsyncHttpxClient(event_hooks={"request": [record]})
    async with AsyncLetta(base_url=memvm_server.base_url, api_key=api_key, timeout=30.0, http_client=http) as client:
        yield client
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"---- memvm serve log during this test ----\n{memvm_server.log()[log_start:][-20000:]}")
