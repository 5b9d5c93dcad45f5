"""What the rest of memvm gives the MCP port and gets back from it: plain values, no SDK types."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ServerType = Literal["stdio", "sse", "streamable_http"]


@dataclass(frozen=True)
class ServerConfig:
    """How to reach one MCP server, secrets in the clear (they never leave the process, and are
    never logged). `fingerprint` changes whenever any of it does, so an edited server reconnects."""

    server_id: str
    server_type: ServerType
    command: str | None = None  # stdio
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False  # stdio: the jail keeps the host's network only when the config opts in
    url: str | None = None  # sse, streamable_http
    headers: Mapping[str, str] = field(default_factory=dict)  # the auth header included

    @property
    def fingerprint(self) -> str:
        shown = [self.server_type, self.command, self.args, sorted(self.env.items()), self.network, self.url]
        shown.append(sorted(self.headers.items()))
        return hashlib.sha256(json.dumps(shown, default=list).encode()).hexdigest()


@dataclass(frozen=True)
class RemoteTool:
    """One tool of a server's `tools/list`."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class CallResult:
    """A `tools/call` answer: its content as text (text parts joined; other parts described), and
    whether the server marked it an error."""

    text: str
    is_error: bool


class McpUnavailable(Exception):
    """Connecting, listing or calling failed: the server hung past a timeout, crashed, refused, or
    answered what is not MCP. The message says which, in one line, without secrets."""
