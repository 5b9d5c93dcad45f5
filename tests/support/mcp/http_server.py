"""The test tools over streamable HTTP (/mcp) and SSE (/sse) on one loopback port:
`python http_server.py FD` serves on the listening socket FD it inherits; `served_http()` binds it,
starts the server as a subprocess and stops it."""

import http.client
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
    """Started on a free port (or `port`), and listening when this yields. The socket is bound here and
    handed to the server process: a port chosen first and bound by the server later could be taken
    in between by another process (its 404s then answer the tests)."""
    listener = socket.create_server(("127.0.0.1", port or 0))
    with listener:
        command = [os.path.realpath(sys.executable), __file__, str(listener.fileno())]  # the pyenv `python3` is a shim
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(listener.fileno(),)
        )
        bound = int(listener.getsockname()[1])
    try:
        _wait_serving(process, bound)
        yield HttpServer(process, bound)
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(timeout=10)


def _wait_serving(process: subprocess.Popen[bytes], port: int) -> None:
    """Until the server answers HTTP (its socket accepted connections before it ran)."""
    deadline = time.monotonic() + _STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the test MCP server exited with status {process.returncode}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
        try:
            connection.request("GET", "/")  # no such route: a 404 says the server runs
            connection.getresponse().read()
            return
        except OSError:
            time.sleep(0.05)
        finally:
            connection.close()
    raise RuntimeError(f"the test MCP server did not answer on {port} within {_STARTUP_SECONDS:g} s")


def _serve(listener_fd: int) -> None:
    import uvicorn
    from tools import build_server  # run as a script: its own directory is on sys.path

    server = build_server()
    app = server.streamable_http_app()  # its lifespan runs the streamable HTTP sessions
    app.router.routes.extend(server.sse_app().routes)
    listener = socket.socket(fileno=listener_fd)  # bound and listening: served_http's
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
