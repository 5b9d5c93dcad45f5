"""Every route of letta-client 1.12.1 that open-source Letta serves, memvm serves too. The list of
routes comes from the installed SDK itself: each method of each resource is called once against a
transport that records the request (method and path) and sends nothing. A route counts as served
when a route of memvm's app matches its method and path, so "no such route" (a 404 or 405 from
routing) is told apart from "no such object" (a 404 of the route itself)."""

import contextlib
import inspect
import warnings
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from letta_client import APIConnectionError, Letta
from letta_client._resource import SyncAPIResource
from starlette.routing import Match

from tests.support.api import build_app

# Routes only Letta Cloud serves; memvm answers each with a 501 (api/cloud_only.py).
CLOUD_ONLY_PREFIXES = ("/v1/templates", "/v1/environments", "/v1/client-side-access-tokens")
CLOUD_ONLY_RESOURCES = ("agents.schedule.",)
# Arguments a method's signature cannot tell (overloads that need one of several groups).
EXTRA_ARGUMENTS = {"templates.create": {"agent_id": "x-1", "type": "agent"}}


def _resources(owner: object, prefix: str = "") -> Iterator[tuple[str, SyncAPIResource]]:
    for name in dir(type(owner)):
        if name.startswith("_") or name.startswith("with_"):
            continue
        if not isinstance(inspect.getattr_static(type(owner), name), property) and not hasattr(
            inspect.getattr_static(type(owner), name), "func"
        ):
            continue  # resources are (cached) properties; methods are not
        value = getattr(owner, name)
        if isinstance(value, SyncAPIResource):
            yield prefix + name, value
            yield from _resources(value, f"{prefix}{name}.")


def _placeholder_arguments(method) -> dict[str, object]:
    arguments: dict[str, object] = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.default is inspect.Parameter.empty and parameter.kind is not parameter.VAR_KEYWORD:
            arguments[parameter.name] = b"x" if parameter.name == "file" else "x-1"
    return arguments


def sdk_routes() -> dict[str, tuple[str, str]]:
    """Each SDK method's name (`agents.tools.run`) and the method and path it requests."""
    recorded: list[tuple[str, str]] = []

    def record(request: httpx.Request) -> httpx.Response:
        recorded.append((request.method, request.url.path))
        raise httpx.ConnectError("recorded; nothing is sent")

    transport = httpx.MockTransport(record)
    letta = Letta(base_url="http://sdk.test", api_key="k", max_retries=0, http_client=httpx.Client(transport=transport))
    routes = {}
    for resource_name, resource in _resources(letta):
        for method_name, method in inspect.getmembers(resource, inspect.ismethod):
            if method_name.startswith("_") or method_name.startswith("with_"):
                continue
            name = f"{resource_name}.{method_name}"
            arguments = {**_placeholder_arguments(method), **EXTRA_ARGUMENTS.get(name, {})}
            with contextlib.suppress(APIConnectionError), warnings.catch_warnings(action="ignore", category=DeprecationWarning):
                method(**arguments)
            assert len(recorded) == len(routes) + 1, f"{name} sent no request"
            routes[name] = recorded[-1]
    return routes


def is_cloud_only(name: str, path: str) -> bool:
    return path.startswith(CLOUD_ONLY_PREFIXES) or name.startswith(CLOUD_ONLY_RESOURCES)


def served(app: FastAPI, method: str, path: str) -> bool:
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    return any(route.matches(scope)[0] is Match.FULL for route in app.router.routes)


@pytest.fixture(scope="module")
def routes() -> dict[str, tuple[str, str]]:
    return sdk_routes()


def test_the_walk_finds_every_method_of_the_sdk(routes):
    # letta-client 1.12.1: 128 methods on 125 distinct routes (sync and async resources mirror each other).
    assert len(routes) == 128
    assert routes["agents.tools.run"] == ("POST", "/v1/agents/x-1/tools/x-1/run")
    assert routes["folders.files.upload"] == ("POST", "/v1/folders/x-1/upload")


def test_every_open_source_route_of_the_sdk_is_served(routes, settings):
    app = build_app(settings)
    open_source = {name: route for name, route in routes.items() if not is_cloud_only(name, route[1])}
    unserved = {name for name, (method, path) in open_source.items() if not served(app, method, path)}
    print(f"\nletta-client 1.12.1 routes served by memvm: {len(open_source) - len(unserved)} of {len(open_source)}")
    assert len(open_source) == 112
    assert unserved == set()


async def test_cloud_only_routes_answer_that_they_are_letta_cloud_features(routes, client):
    cloud = {name: route for name, route in routes.items() if is_cloud_only(name, route[1])}
    assert len(cloud) == 16
    for name, (method, path) in sorted(cloud.items()):
        response = await client.request(method, path, json={} if method in ("POST", "PATCH") else None)
        assert response.status_code == 501, (name, response.status_code, response.text)
        assert response.json()["detail"].endswith("is a Letta Cloud feature; memvm does not serve it."), name
