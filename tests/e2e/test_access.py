"""Access control from the outside: `memvm keys` against a database, and `memvm serve` refusing to
expose an unauthenticated server beyond loopback."""

import subprocess
import time
from pathlib import Path

import httpx

from tests.support.serve import CLI_TIMEOUT, child_env, free_port, memvm, memvm_command, serve


def first_refusal(http: httpx.Client, key: str) -> httpx.Response:
    """Another process revoked the key: the server learns it from a NOTIFY, which takes milliseconds,
    not zero. Give it a bounded moment rather than racing it."""
    deadline = time.monotonic() + 2.0
    while True:
        answer = http.get("/v1/agents/", headers={"Authorization": f"Bearer {key}"})
        if answer.status_code != 200 or time.monotonic() > deadline:
            return answer
        time.sleep(0.02)


def test_keys_create_list_and_revoke_against_a_database_a_running_server_honours(database_url: str, tmp_path: Path) -> None:
    env = child_env(MEMVM_DATABASE_URL=database_url)
    created = memvm(env, "keys", "create", "--org", "acme", "--name", "ci")
    key = created.stdout.strip()
    port = free_port()
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
            allowed = http.get("/v1/agents/", headers={"Authorization": f"Bearer {key}"})
            listed = memvm(env, "keys", "list")
            key_id = listed.stdout.split()[0]
            revoked = memvm(env, "keys", "revoke", key_id)
            refused = first_refusal(http, key)
        log = served.log()
    unknown = memvm(env, "keys", "revoke", "apikey-00000000-0000-4000-8000-000000000000")

    assert created.returncode == 0 and key.startswith("mvk_") and "shown only now" in created.stderr
    assert allowed.status_code == 200 and "authentication on" in log
    assert listed.returncode == 0 and "acme" in listed.stdout and "ci" in listed.stdout and key not in listed.stdout
    assert revoked.returncode == 0 and refused.status_code == 401
    assert "revoked" in memvm(env, "keys", "list").stdout
    assert unknown.returncode == 1 and "not found" in unknown.stderr


def test_keys_refuses_an_embedded_database_held_by_a_running_server(tmp_path: Path, data_dir: Path) -> None:
    env = child_env(MEMVM_DATA_DIR=str(data_dir))
    port = free_port()
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port):
        held = memvm(env, "keys", "list")
        second_worker = memvm(env, "worker")  # serve runs its own; a second one would start another postgres

    assert held.returncode == 1 and "held by a running server" in held.stderr, held.stderr
    assert second_worker.returncode == 1 and "runs its own embedding worker" in second_worker.stderr, second_worker.stderr


def test_serving_beyond_loopback_needs_auth_or_insecure(database_url: str, tmp_path: Path) -> None:
    env = child_env(MEMVM_DATABASE_URL=database_url)
    refused = subprocess.run(
        memvm_command("serve", "--host", "0.0.0.0", "--port", str(free_port())),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    port = free_port()
    with serve(tmp_path / "insecure.log", env, "--host", "0.0.0.0", "--port", str(port), "--insecure", port=port) as served:
        insecure_log = served.log()
    port = free_port()
    keyed = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_ADMIN_API_KEY="admin-secret")
    with serve(tmp_path / "keyed.log", keyed, "--host", "0.0.0.0", "--port", str(port), port=port) as served:
        keyed_log = served.log()
        with httpx.Client(base_url=served.base_url, timeout=10.0) as http:
            without_key = http.get("/v1/agents/")
            with_key = http.get("/v1/agents/", headers={"Authorization": "Bearer admin-secret"})

    assert refused.returncode != 0
    assert "Refusing to listen on 0.0.0.0 without authentication" in refused.stdout + refused.stderr
    assert "MEMVM_ADMIN_API_KEY" in refused.stdout + refused.stderr
    assert "WARNING" in insecure_log and "authentication OFF" in insecure_log
    assert "authentication on" in keyed_log and "admin-secret" not in keyed_log
    assert without_key.status_code == 401 and with_key.status_code == 200


async def test_no_key_reaches_the_log_even_at_debug_level(database_url: str, tmp_path: Path, llm) -> None:
    """Keys travel in headers and settings; none of them may be written out, whatever the log level."""
    admin_key, provider_key, wrong_key = "admin-secret-4f1c", "sk-provider-secret-9d2e", "mvk_wrong-secret-77ab"
    llm.reply("hello from the model")
    env = child_env(
        MEMVM_DATABASE_URL=database_url,
        MEMVM_ADMIN_API_KEY=admin_key,
        MEMVM_OPENAI_BASE_URL=llm.base_url,
        MEMVM_OPENAI_API_KEY=provider_key,
        MEMVM_LOG_LEVEL="debug",
    )
    port = free_port()
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30.0) as http:
            admin = {"Authorization": f"Bearer {admin_key}"}
            made = await http.post("/v1/admin/api-keys", json={"organization": "acme", "name": "ops"}, headers=admin)
            org_key = made.json()["key"]
            letta_style = {"X-BARE-PASSWORD": f"password {org_key}"}
            agent = await http.post(
                "/v1/agents/", json={"model": "openai/scripted-model", "memory_blocks": []}, headers=letta_style
            )
            turn = await http.post(
                f"/v1/agents/{agent.json()['id']}/messages",
                json={"input": "hi"},
                headers={"Authorization": f"Bearer {org_key}"},
            )
            refused = await http.get("/v1/agents/", headers={"Authorization": f"Bearer {wrong_key}"})
        log = served.log()

    assert made.status_code == agent.status_code == turn.status_code == 200
    assert llm.request_headers[0]["authorization"] == f"Bearer {provider_key}"  # the key was in use
    assert refused.status_code == 401
    assert "DEBUG" in log and "POST /v1/agents/" in log  # the debug log was on and did record the requests
    leaked = [
        name
        for name, secret in [("admin", admin_key), ("organization", org_key), ("provider", provider_key), ("refused", wrong_key)]
        if secret in log
    ]
    assert leaked == []


def test_keys_create_refuses_names_with_control_characters(database_url: str) -> None:
    env = child_env(MEMVM_DATABASE_URL=database_url)

    bad_org = memvm(env, "keys", "create", "--org", "acme\x1b[2J")
    bad_label = memvm(env, "keys", "create", "--org", "acme", "--name", "ci\r\nfake")
    listed = memvm(env, "keys", "list")

    assert bad_org.returncode == 2 and "argument --org: 'acme\\x1b[2J' is not an organization name" in bad_org.stderr
    assert bad_label.returncode == 2 and "argument --name: 'ci\\r\\nfake' is not a key label" in bad_label.stderr
    assert bad_org.stdout == bad_label.stdout == "" and listed.returncode == 0 and listed.stdout == ""
