"""The deployment files run authenticated by default. CI has no Docker engine, so this checks what
each file makes the container do: compose refuses to render the app without an admin key, and the
image's command, run with the image's environment, refuses to listen without one."""

import json
import re
import subprocess
from pathlib import Path

import yaml

from tests.support.serve import CLI_TIMEOUT, child_env, free_port, memvm_command

ROOT = Path(__file__).resolve().parents[2]
# Compose's "required" interpolation: `${NAME:?message}` stops `docker compose up` with the message
# when NAME is unset or empty.
REQUIRED = re.compile(r"^\$\{MEMVM_ADMIN_API_KEY:\?(?P<message>[^}]+)\}$")


def image_environment_and_command() -> tuple[dict[str, str], list[str]]:
    """The Dockerfile's ENV assignments and its exec-form CMD."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    environment: dict[str, str] = {}
    command: list[str] = []
    for line in text.splitlines():
        instruction, _, rest = line.strip().partition(" ")
        if instruction == "ENV":
            environment.update(pair.split("=", 1) for pair in rest.split())
        elif instruction == "CMD":
            command = json.loads(rest)
    return environment, command


def test_compose_will_not_start_the_app_without_an_admin_key() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]

    required = REQUIRED.match(services["app"]["environment"]["MEMVM_ADMIN_API_KEY"])

    assert required is not None, "the app's MEMVM_ADMIN_API_KEY must be ${MEMVM_ADMIN_API_KEY:?message}"
    assert ".env" in required["message"]  # the message says where to put one
    assert "ports" not in services["db"]  # only the app reaches the database


def test_the_image_command_refuses_to_listen_without_a_key(database_url: str, tmp_path: Path) -> None:
    environment, command = image_environment_and_command()
    # The image's environment, with the test's database and a writable data dir in place of /data.
    image_env = {**environment, "MEMVM_PORT": str(free_port()), "MEMVM_DATA_DIR": str(tmp_path)}
    env = child_env(MEMVM_DATABASE_URL=database_url, **image_env)

    as_installed = memvm_command(*command[1:])  # `memvm` next to this interpreter, whatever PATH holds
    refused = subprocess.run(as_installed, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_TIMEOUT)

    assert environment["MEMVM_HOST"] == "0.0.0.0" and command[:2] == ["memvm", "serve"]
    assert refused.returncode != 0
    assert "Refusing to listen on 0.0.0.0 without authentication" in refused.stderr + refused.stdout
    assert "MEMVM_ADMIN_API_KEY" in refused.stderr + refused.stdout
