"""The cap on a request's head (memvm/cli/head_limits.py) in a real `memvm serve`, over raw sockets: a
head over MEMVM_MAX_HEADER_BYTES in all, or a header over MEMVM_MAX_HEADER_LINE_BYTES, gets a 431
at once (before its key is checked), changes nothing, and the server keeps answering meanwhile.
Before the cap, a 128 MB header took tens of seconds of the process to get its 401."""

import json
import socket
import threading
import time
from pathlib import Path

import httpx

from tests.support.serve import child_env, free_port, serve

ADMIN_KEY = "admin-secret"
AUTH = f"Authorization: Bearer {ADMIN_KEY}\r\n".encode()
HUGE = 128 * 1024 * 1024
AT_ONCE = 5.0  # seconds: the old server took 20-40 to answer a 128 MB header


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 answer with a Content-Length: status, headers, body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(status_line.split()[1]), headers, body


def ask(port: int, head: bytes, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """`head` is the request line and headers without the blank line that ends them."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + b"\r\n" + body)
        return read_answer(sock)


def huge_header_answer(port: int) -> tuple[int, bytes, float]:
    """A 128 MB header sent from a thread while the answer is read: its status, body and how long it took."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    started = time.monotonic()

    def send() -> None:
        try:
            sock.sendall(b"GET /v1/agents/ HTTP/1.1\r\nHost: memvm\r\nX-Huge: ")
            for _ in range(HUGE // (1 << 20)):
                sock.sendall(b"a" * (1 << 20))
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # the server closed the connection once it had answered

    sender = threading.Thread(target=send)
    sender.start()
    try:
        status, _, body = read_answer(sock)
        return status, body, time.monotonic() - started
    finally:
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        sender.join(60)


def padded_get(headers: int, size: int) -> bytes:
    pad = b"".join(b"X-Pad-%d: %s\r\n" % (n, b"p" * size) for n in range(headers))
    return b"GET /v1/blocks/ HTTP/1.1\r\nHost: memvm\r\n" + AUTH + pad


def test_heads_over_the_caps_get_431_at_once_and_change_nothing(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_ADMIN_API_KEY=ADMIN_KEY)
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port) as served:
        within = ask(port, padded_get(7, 8000))  # 56 kB in all, each header under 8 KiB
        too_many = ask(port, padded_get(9, 8000))  # 72 kB in all
        too_long = ask(port, padded_get(1, 8200))
        block = json.dumps({"label": "x", "value": "y"}).encode()
        post = b"POST /v1/blocks/ HTTP/1.1\r\nHost: memvm\r\nContent-Type: application/json\r\n"
        post += b"Content-Length: %d\r\n" % len(block)
        refused_post = ask(port, post + AUTH + b"X-Long: " + b"l" * 9000 + b"\r\n", block)
        kept_alive = _normal_then_oversized(port)

        health: dict[str, float | int] = {}
        checker = threading.Timer(0.3, _time_health, (served.base_url, health))
        checker.start()
        status, body, seconds = huge_header_answer(port)
        checker.join(30)
        blocks = httpx.get(f"{served.base_url}/v1/blocks/", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=10)

    print(f"\n128 MB header: {status} after {seconds:.3f} s; /v1/health/ meanwhile: {health}")
    assert within[0] == 200
    assert too_many[0] == 431 and "MEMVM_MAX_HEADER_BYTES" in json.loads(too_many[2])["detail"]
    assert too_long[0] == 431 and "'X-Pad-0' is larger than 8192 bytes" in json.loads(too_long[2])["detail"]
    assert too_long[1]["x-should-retry"] == "false" and too_long[1]["connection"] == "close"
    assert refused_post[0] == 431 and "'X-Long'" in json.loads(refused_post[2])["detail"]
    assert kept_alive == (200, 431)
    assert status == 431 and "MEMVM_MAX_HEADER_BYTES" in json.loads(body)["detail"]
    assert seconds < AT_ONCE
    assert health["status"] == 200 and health["seconds"] < AT_ONCE
    assert blocks.status_code == 200 and blocks.json() == []


def test_every_http_process_caps_heads(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = child_env(MEMVM_DATABASE_URL=database_url, MEMVM_WORKERS="2", MEMVM_MAX_HEADER_BYTES="4096")
    with serve(tmp_path / "serve.log", env, "--port", str(port), port=port):
        answers = [ask(port, b"GET /v1/health/ HTTP/1.1\r\nHost: memvm\r\nX-Pad: " + b"p" * 5000 + b"\r\n") for _ in range(6)]
        status, _, seconds = huge_header_answer(port)

    print(f"\n128 MB header, two HTTP processes: {status} after {seconds:.3f} s")
    assert {answer[0] for answer in answers} == {431}
    assert all("larger than 4096 bytes in all" in json.loads(answer[2])["detail"] for answer in answers)
    assert status == 431 and seconds < AT_ONCE


def _normal_then_oversized(port: int) -> tuple[int, int]:
    """Two requests on one connection: the head count starts again with each request."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(padded_get(7, 8000) + b"\r\n")
        first = read_answer(sock)[0]
        sock.sendall(padded_get(9, 8000) + b"\r\n")
        return first, read_answer(sock)[0]


def _time_health(base_url: str, into: dict[str, float | int]) -> None:
    started = time.monotonic()
    response = httpx.get(f"{base_url}/v1/health/", timeout=60)
    into.update(status=response.status_code, seconds=round(time.monotonic() - started, 3))
