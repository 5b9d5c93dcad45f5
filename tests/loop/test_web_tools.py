"""The built-in web tools through the step loop, against a loopback HTTP server (never the internet):
`fetch_webpage` returns a page's text when the operator allows private addresses and refuses
loopback by default; `web_search` asks a SearxNG-style backend, or says how to configure one."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.api import app_client, create_agent

MODEL = {"model": "openai/scripted-model"}
PAGE = (
    "<html><head><title>Tea notes</title><style>body {color: red}</style></head>"
    "<body><h1>Green tea</h1><p>Steep at 80&deg;C for two minutes.</p>"
    "<script>secret_script_text()</script></body></html>"
)
SEARCH_ANSWER = {"results": [{"title": f"Tea {n}", "url": f"https://tea.example/{n}", "content": "leaves"} for n in range(8)]}


class _Site(BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        if self.path.startswith("/search"):
            self._send("application/json", json.dumps(SEARCH_ANSWER).encode())
        elif self.path == "/big":
            self._send("text/plain", b"x" * 100_000)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("location", "/tea")
            self.end_headers()
        elif self.path == "/gone":
            self.send_error(404)
        else:
            self._send("text/html; charset=utf-8", PAGE.encode())

    def _send(self, kind: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    _Site.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def call_once(client, llm, name: str, args: dict) -> dict:
    """An agent with both web tools calls `name` once, then answers; the tool return message."""
    agent = await create_agent(client, **MODEL, tools=["web_search", "fetch_webpage"])
    llm.reply(tool_calls=[(name, args)]).reply("done")
    response = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "go"})
    assert response.status_code == 200, response.text
    [returned] = [m for m in response.json()["messages"] if m["message_type"] == "tool_return_message"]
    return returned


async def test_an_agent_is_created_with_the_web_tools(client):
    agent = await create_agent(client, **MODEL, tools=["web_search", "fetch_webpage"])

    assert {"web_search", "fetch_webpage"} <= {tool["name"] for tool in agent["tools"]}
    assert {tool["tool_type"] for tool in agent["tools"] if tool["name"].endswith(("search", "webpage"))} >= {"letta_builtin"}


async def test_fetch_webpage_returns_the_page_text_when_private_addresses_are_allowed(settings, llm, site):
    async with app_client(settings.model_copy(update={"web_fetch_allow_private": True})) as client:
        returned = await call_once(client, llm, "fetch_webpage", {"url": f"{site}/tea"})

    assert returned["status"] == "success", returned["tool_return"]
    assert returned["tool_return"] == "Tea notes\nGreen tea\nSteep at 80°C for two minutes."
    assert _Site.requests == ["/tea"]


async def test_fetch_webpage_follows_redirects_and_reports_http_errors(settings, llm, site):
    async with app_client(settings.model_copy(update={"web_fetch_allow_private": True})) as client:
        moved = await call_once(client, llm, "fetch_webpage", {"url": f"{site}/moved"})
        gone = await call_once(client, llm, "fetch_webpage", {"url": f"{site}/gone"})

    assert moved["status"] == "success" and moved["tool_return"].startswith("Tea notes")
    assert gone["status"] == "error" and "HTTP 404" in gone["tool_return"]
    assert _Site.requests == ["/moved", "/tea", "/gone"]


async def test_fetch_webpage_refuses_loopback_by_default(client, llm, site):
    for url in (f"{site}/tea", site.replace("127.0.0.1", "localhost") + "/tea"):
        returned = await call_once(client, llm, "fetch_webpage", {"url": url})

        assert returned["status"] == "error"
        assert "non-public address" in returned["tool_return"] and "MEMVM_WEB_FETCH_ALLOW_PRIVATE" in returned["tool_return"]
    assert _Site.requests == []


async def test_fetch_webpage_refuses_other_schemes_and_caps_the_body(settings, llm, site):
    capped = settings.model_copy(update={"web_fetch_allow_private": True, "web_fetch_max_bytes": 2048})
    async with app_client(capped) as client:
        refused = await call_once(client, llm, "fetch_webpage", {"url": "file:///etc/passwd"})
        big = await call_once(client, llm, "fetch_webpage", {"url": f"{site}/big"})

    assert refused["status"] == "error" and "only http:// and https://" in refused["tool_return"]
    assert big["status"] == "success" and big["tool_return"] == "x" * 2048


async def test_web_search_says_how_to_enable_it_when_no_backend_is_set(client, llm):
    returned = await call_once(client, llm, "web_search", {"query": "green tea"})

    assert returned["status"] == "error"
    assert "MEMVM_WEB_SEARCH_URL" in returned["tool_return"]


async def test_web_search_returns_the_backends_top_results(settings, llm, site):
    async with app_client(settings.model_copy(update={"web_search_url": f"{site}/search"})) as client:
        returned = await call_once(client, llm, "web_search", {"query": "green tea", "num_results": 3})

    assert returned["status"] == "success", returned["tool_return"]
    assert json.loads(returned["tool_return"]) == SEARCH_ANSWER["results"][:3]
    assert _Site.requests == ["/search?q=green+tea&format=json"]
