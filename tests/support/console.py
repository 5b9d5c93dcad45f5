"""Helpers for driving the operator console (/ui/) over HTTP: sign in, read the form token."""

import re

import httpx

_CSRF = re.compile(r'"X-CSRF-Token": "([0-9a-f]*)"')


def csrf_of(page: str) -> str:
    match = _CSRF.search(page)
    assert match is not None, "the page carries no CSRF token"
    return match.group(1)


async def sign_in(client: httpx.AsyncClient, key: str | None = None) -> str:
    """Signs the client in (local mode when `key` is None) and returns the form token of its pages."""
    if key is None:
        response = await client.get("/ui/sign-in")
    else:
        response = await client.post("/ui/sign-in", data={"key": key})
    assert response.status_code == 303, response.text
    agents = await client.get("/ui/agents")
    assert agents.status_code == 200, agents.text
    return csrf_of(agents.text)


def form_headers(token: str) -> dict[str, str]:
    """What htmx sends with a console form."""
    return {"X-CSRF-Token": token, "HX-Request": "true"}
