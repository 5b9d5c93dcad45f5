"""Behind a TLS proxy the console's sign-in cookie must still be `Secure`: uvicorn takes the scheme
from X-Forwarded-Proto when the request comes from an address in FORWARDED_ALLOW_IPS (by default
loopback), and from nowhere else."""

from pathlib import Path

import httpx

from tests.support.serve import child_env, free_port, serve

ADMIN_KEY = "admin-secret-proxy"


def sign_in_cookie(base_url: str, headers: dict[str, str]) -> str:
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        answer = http.post("/ui/sign-in", data={"key": ADMIN_KEY}, headers=headers)
    assert answer.status_code == 303, answer.text
    return answer.headers["set-cookie"]


def cookies_from(tmp_path: Path, database_url: str, **environment: str) -> tuple[str, str]:
    env = {**child_env(MEMVM_DATABASE_URL=database_url, MEMVM_ADMIN_API_KEY=ADMIN_KEY), **environment}
    port = free_port()
    with serve(tmp_path / f"serve-{port}.log", env, "--port", str(port), port=port) as served:
        proxied = sign_in_cookie(served.base_url, {"X-Forwarded-Proto": "https"})
        direct = sign_in_cookie(served.base_url, {})
    return proxied, direct


def test_the_cookie_is_secure_when_a_trusted_proxy_says_https(tmp_path: Path, database_url: str) -> None:
    proxied, direct = cookies_from(tmp_path, database_url)  # the proxy is on loopback: trusted by default

    assert "secure" in proxied.lower() and "httponly" in proxied.lower()
    assert "secure" not in direct.lower()  # plain http straight to the server


def test_a_forwarded_scheme_from_an_untrusted_address_is_ignored(tmp_path: Path, database_url: str) -> None:
    proxied, _ = cookies_from(tmp_path, database_url, FORWARDED_ALLOW_IPS="10.9.8.7")

    assert "secure" not in proxied.lower()
