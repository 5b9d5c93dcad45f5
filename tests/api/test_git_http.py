"""MemFS's git smart HTTP routes in process: advertisements, keys (Bearer and Basic), isolation,
request bodies (gzip, caps, garbage). Pushes with the real git CLI: tests/e2e/test_memfs_git.py."""

import base64
import gzip

import pytest
from pydantic import SecretStr

from tests.support.api import app_client

ADMIN_KEY = "admin-key-for-git-tests"
UPLOAD = "application/x-git-upload-pack-request"


@pytest.fixture
async def server(settings):
    capped = settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY), "max_request_bytes": 64 * 1024})
    async with app_client(capped) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def basic(key: str, user: str = "letta") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()}


async def organization_key(server, organization: str) -> str:
    created = await server.post("/v1/admin/api-keys", json={"organization": organization}, headers=bearer(ADMIN_KEY))
    assert created.status_code == 200, created.text
    return created.json()["key"]


async def agent_of(server, key: str, blocks: list[dict]) -> str:
    created = await server.post("/v1/agents/", json={"name": "git", "memory_blocks": blocks}, headers=bearer(key))
    assert created.status_code == 200, created.text
    return created.json()["id"]


def repo(agent_id: str) -> str:
    return f"/v1/git/{agent_id}/state.git"


def pkt(line: bytes) -> bytes:
    return f"{len(line) + 4:04x}".encode() + line


def fetch_request(head: str) -> bytes:
    """What git sends to fetch everything: one want (with its capabilities), a flush, done."""
    return pkt(f"want {head} multi_ack_detailed side-band-64k thin-pack ofs-delta\n".encode()) + b"0000" + pkt(b"done\n")


async def advertised_head(server, agent_id: str, headers: dict[str, str]) -> str:
    answer = await server.get(f"{repo(agent_id)}/info/refs", params={"service": "git-upload-pack"}, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.content.split(b"# service=git-upload-pack\n0000", 1)[1][4:44].decode()


async def test_advertisements_of_a_repository_with_files_and_of_an_empty_one(server):
    key = await organization_key(server, "acme")
    agent = await agent_of(server, key, [{"label": "human", "value": "Name: Bob"}])
    empty = await agent_of(server, key, [])

    upload = await server.get(f"{repo(agent)}/info/refs", params={"service": "git-upload-pack"}, headers=basic(key))
    receive = await server.get(f"{repo(empty)}/info/refs", params={"service": "git-receive-pack"}, headers=basic(key))
    empty_upload = await server.get(f"{repo(empty)}/info/refs", params={"service": "git-upload-pack"}, headers=basic(key))
    dumb = await server.get(f"{repo(agent)}/info/refs", headers=basic(key))

    assert upload.status_code == 200 and upload.headers["content-type"] == "application/x-git-upload-pack-advertisement"
    assert upload.headers["cache-control"] == "no-cache"
    assert upload.content.startswith(b"001e# service=git-upload-pack\n0000")
    head = upload.content[38:78]
    assert f"{head.decode()} HEAD\0".encode() in upload.content and b"symref=HEAD:refs/heads/main" in upload.content
    assert f"{head.decode()} refs/heads/main\n".encode() in upload.content and upload.content.endswith(b"0000")
    for answer in (receive, empty_upload):
        assert answer.status_code == 200
        assert b"0000000000000000000000000000000000000000 capabilities^{}\0" in answer.content
    assert receive.headers["content-type"] == "application/x-git-receive-pack-advertisement"
    assert b"report-status" in receive.content and b"delete-refs" in receive.content
    assert dumb.status_code == 422


async def test_upload_pack_answers_a_plain_and_a_gzipped_body_alike(server):
    key = await organization_key(server, "acme")
    agent = await agent_of(server, key, [{"label": "human", "value": "Name: Bob"}])
    head = await advertised_head(server, agent, bearer(key))
    url = f"{repo(agent)}/git-upload-pack"

    plain = await server.post(url, content=fetch_request(head), headers={**bearer(key), "Content-Type": UPLOAD})
    gzipped = await server.post(
        url,
        content=gzip.compress(fetch_request(head)),
        headers={**bearer(key), "Content-Type": UPLOAD, "Content-Encoding": "gzip"},
    )

    assert plain.status_code == 200, plain.text
    assert plain.headers["content-type"] == "application/x-git-upload-pack-result"
    assert plain.headers["cache-control"] == "no-cache"
    assert plain.content.startswith(b"0008NAK\n") and b"PACK" in plain.content
    assert gzipped.status_code == 200 and gzipped.content == plain.content


async def test_bodies_that_are_not_git_requests_are_4xx_and_change_nothing(server):
    key = await organization_key(server, "acme")
    agent = await agent_of(server, key, [{"label": "human", "value": "Name: Bob"}])
    head = await advertised_head(server, agent, bearer(key))
    headers = {**bearer(key), "Content-Type": UPLOAD}
    url = f"{repo(agent)}/git-upload-pack"

    not_gzip = await server.post(url, content=b"plain text", headers={**headers, "Content-Encoding": "gzip"})
    bomb = await server.post(url, content=gzip.compress(b"0" * 1_000_000), headers={**headers, "Content-Encoding": "gzip"})
    garbage = await server.post(url, content=b"this is not a pkt-line", headers=headers)
    cut_short = await server.post(url, content=fetch_request(head)[:20], headers=headers)
    wrong_type = await server.post(url, content=fetch_request(head), headers=bearer(key))
    receive = await server.post(
        f"{repo(agent)}/git-receive-pack",
        content=b"garbage",
        headers={**bearer(key), "Content-Type": "application/x-git-receive-pack-request"},
    )

    assert not_gzip.status_code == 400 and "gzip" in not_gzip.json()["detail"]
    assert bomb.status_code == 413 and "MEMVM_MAX_REQUEST_BYTES" in bomb.json()["detail"]
    for answer in (garbage, cut_short, receive):
        assert answer.status_code == 400, answer.text
        assert "request git would send" in answer.json()["detail"]
    assert wrong_type.status_code == 400 and UPLOAD in wrong_type.json()["detail"]
    assert await advertised_head(server, agent, bearer(key)) == head


async def test_keys_basic_and_bearer_work_and_a_refusal_challenges_with_basic_on_git_routes_only(server):
    key = await organization_key(server, "acme")
    agent = await agent_of(server, key, [])
    refs = f"{repo(agent)}/info/refs"
    params = {"service": "git-upload-pack"}

    with_basic = await server.get(refs, params=params, headers=basic(key, user="anyone"))
    with_bearer = await server.get(refs, params=params, headers=bearer(key))
    wrong = await server.get(refs, params=params, headers=basic("mvk_wrong"))
    missing = await server.get(refs, params=params)
    no_password = await server.get(refs, params=params, headers={"Authorization": "Basic " + base64.b64encode(b"letta").decode()})
    not_base64 = await server.get(refs, params=params, headers={"Authorization": "Basic !!!"})
    rest_with_basic = await server.get("/v1/agents/", headers=basic(key))
    rest_refused = await server.get("/v1/agents/", headers=basic("mvk_wrong"))

    assert with_basic.status_code == 200 and with_bearer.status_code == 200
    for refused in (wrong, missing, no_password, not_base64):
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == 'Basic realm="memvm"'
    assert rest_with_basic.status_code == 200  # Basic is accepted everywhere, as Bearer is
    assert rest_refused.status_code == 401 and rest_refused.headers["www-authenticate"] == "Bearer"


async def test_another_organizations_repository_is_not_found_on_every_git_route(server):
    owner = await organization_key(server, "acme")
    other = await organization_key(server, "globex")
    agent = await agent_of(server, owner, [{"label": "human", "value": "Name: Bob"}])
    head = await advertised_head(server, agent, bearer(owner))

    answers = [
        await server.get(f"{repo(agent)}/info/refs", params={"service": service}, headers=basic(other))
        for service in ("git-upload-pack", "git-receive-pack")
    ]
    answers.append(
        await server.post(
            f"{repo(agent)}/git-upload-pack", content=fetch_request(head), headers={**basic(other), "Content-Type": UPLOAD}
        )
    )
    push = pkt(f"{head} {'1' * 40} refs/heads/main\0report-status\n".encode()) + b"0000"
    answers.append(
        await server.post(
            f"{repo(agent)}/git-receive-pack",
            content=push,
            headers={**basic(other), "Content-Type": "application/x-git-receive-pack-request"},
        )
    )

    for answer in answers:
        assert answer.status_code == 404, answer.text
    assert await advertised_head(server, agent, bearer(owner)) == head
