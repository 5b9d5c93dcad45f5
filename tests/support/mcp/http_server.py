"""The test tools over streamable HTTP (/mcp) and SSE (/sse) on one loopback port:
`python http_server.py PORT`; `served_http()` starts it as a subprocess and stops it."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_STARTUP_SECONDS = 20.0


@dataclass(frozen=True)
class HttpServer:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def streamable_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse"


@contextmanager
def served_http(port: int | None = None) -> Iterator[HttpServer]:
    """Started on a free port (or `port`), and listening when this yields."""
    port = port or _free_port()
    command = [os.path.realpath(sys.executable), __file__, str(port)]  # the pyenv `python3` is a shim
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_listening(process, port)
        yield HttpServer(process, port)
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + _STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the test MCP server exited with status {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the test MCP server did not listen on {port} within {_STARTUP_SECONDS:g} s")


def _serve(port: int) -> None:
    import uvicorn
    from tools import build_server  # run as a script: its own directory is on sys.path

    server = build_server()
    app = server.streamable_http_app()  # its lifespan runs the streamable HTTP sessions
    app.router.routes.extend(server.sse_app().routes)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
