"""MCP server shapes of the Letta v1 API (letta-client 1.12.1's Create*/Update*McpServerParam, and
StdioMcpServer, SseMcpServer, StreamableHTTPMcpServer), plus memvm's health fields. Secrets (env
values, the auth token, custom header values) are accepted and never answered: they come back
masked, and a masked value sent back keeps the stored one."""

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from memvm.orm import McpServer

MASK = "********"  # as GET /v1/agents/{id}/secrets masks tool variables
ServerType = Literal["stdio", "sse", "streamable_http"]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token


def _env_names(env: dict[str, str] | None) -> dict[str, str] | None:
    for name in env or {}:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"env name {name!r} is not a valid variable name (letters, digits and _, not starting with a digit)")
    return env


def _header_names(headers: dict[str, str] | None) -> dict[str, str] | None:
    for name in headers or {}:
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP header name")
    return headers


def _header_name(name: str | None) -> str | None:
    _header_names({name: ""} if name else None)
    return name


def _http_url(url: str | None) -> str | None:
    if url is not None and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
        raise ValueError(f"server_url {url!r} must be an http:// or https:// URL")
    return url


class _Config(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StdioUpdate(_Config):
    """What PATCH may change of a stdio server; None leaves a field as it is."""

    mcp_server_type: Literal["stdio"] = "stdio"
    command: str | None = Field(None, min_length=1, max_length=4096, description="The program to run; best an absolute path.")
    args: list[Annotated[str, Field(max_length=4096)]] | None = Field(None, max_length=256)
    env: dict[str, str] | None = Field(None, description="Variables for the server (secrets: never answered).")
    network: bool | None = Field(None, description="memvm: keep the host's network inside the server's sandbox.")

    _env = field_validator("env")(_env_names)


class StdioConfig(StdioUpdate):
    command: str = Field(min_length=1, max_length=4096, description="The program to run; best an absolute path.")
    args: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list, max_length=256)
    network: bool = Field(False, description="memvm: keep the host's network inside the server's sandbox.")


class HttpUpdate(_Config):
    """What PATCH may change of an SSE or streamable-HTTP server; None leaves a field as it is."""

    server_url: str | None = Field(None, max_length=4096)
    auth_header: str | None = Field(None, max_length=200, description="The header the token goes in, e.g. Authorization.")
    auth_token: str | None = Field(None, max_length=8192, description="Secret: never answered.")
    custom_headers: dict[str, str] | None = Field(None, description="Secret values: never answered.")

    _url = field_validator("server_url")(_http_url)
    _auth_header = field_validator("auth_header")(_header_name)
    _headers = field_validator("custom_headers")(_header_names)


class SseUpdate(HttpUpdate):
    mcp_server_type: Literal["sse"] = "sse"


class StreamableHttpUpdate(HttpUpdate):
    mcp_server_type: Literal["streamable_http"] = "streamable_http"


class SseConfig(SseUpdate):
    server_url: str = Field(max_length=4096)


class StreamableHttpConfig(StreamableHttpUpdate):
    server_url: str = Field(max_length=4096)


def _server_type(config: Any) -> str:
    """The type named, else stdio for a command and SSE for a URL (Letta's order for an untyped config)."""
    if isinstance(config, dict):
        return str(config.get("mcp_server_type") or ("stdio" if "command" in config else "sse"))
    return str(getattr(config, "mcp_server_type", "sse"))


CreateConfig = Annotated[
    Annotated[StdioConfig, Tag("stdio")]
    | Annotated[SseConfig, Tag("sse")]
    | Annotated[StreamableHttpConfig, Tag("streamable_http")],
    Discriminator(_server_type),
]


class McpServerCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    server_name: str = Field(min_length=1, max_length=200, description="Unique in the organization.")
    config: CreateConfig


def _update_type(config: Any) -> str:
    if isinstance(config, dict) and not config.get("mcp_server_type"):
        return "stdio" if {"command", "args", "env", "network"} & config.keys() else "sse"
    return _server_type(config)


UpdateConfig = Annotated[
    Annotated[StdioUpdate, Tag("stdio")]
    | Annotated[SseUpdate, Tag("sse")]
    | Annotated[StreamableHttpUpdate, Tag("streamable_http")],
    Discriminator(_update_type),
]


class McpServerUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    server_name: str | None = Field(None, min_length=1, max_length=200)
    config: UpdateConfig


AnyConfig = StdioUpdate | SseUpdate | StreamableHttpUpdate  # the create configs are these, with fields required


class McpServerRead(BaseModel):
    """One shape for the three types: the fields of the server's own type are filled."""

    id: str
    server_name: str
    mcp_server_type: ServerType
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    network: bool | None = None
    server_url: str | None = None
    auth_header: str | None = None
    auth_token: str | None = None
    custom_headers: dict[str, str] | None = None
    status: Literal["unknown", "connected", "error"] = Field(description="memvm: the last connect, list or call.")
    last_error: str | None = None
    checked_at: datetime | None = None
    organization_id: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, server: McpServer) -> "McpServerRead":
        secrets = server.secrets
        common = {
            "id": server.id,
            "server_name": server.server_name,
            "mcp_server_type": server.server_type,
            "status": server.status,
            "last_error": server.last_error,
            "checked_at": server.checked_at,
            "organization_id": server.organization_id,
            "created_at": server.created_at,
            "updated_at": server.updated_at,
        }
        if server.server_type == "stdio":
            return cls(
                **common, command=server.command, args=server.args, env=_masked(secrets.get("env")), network=server.network
            )
        return cls(
            **common,
            server_url=server.server_url,
            auth_header=server.auth_header,
            auth_token=MASK if secrets.get("auth_token") else None,
            custom_headers=_masked(secrets.get("custom_headers")),
        )


def _masked(values: dict[str, str] | None) -> dict[str, str] | None:
    return {name: MASK for name in values} if values else None


class RefreshResult(BaseModel):
    """PATCH /v1/mcp-servers/{id}/refresh (Letta's deleted/updated/added, by tool name), and what
    memvm could not add, with the reason."""

    deleted: list[str]
    updated: list[str]
    added: list[str]
    skipped: dict[str, str] = Field(default_factory=dict)


class McpToolRun(BaseModel):
    model_config = ConfigDict(extra="ignore")

    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")


class ToolSearch(BaseModel):
    """POST /v1/agents/{id}/mcp-servers/tools/search (Letta Code's `letta mcp`)."""

    model_config = ConfigDict(extra="ignore")

    query: str = Field(min_length=1, max_length=2000)
    search_mode: Literal["hybrid", "vector", "fts"] = "hybrid"
    limit: int = Field(10, ge=1, le=100)
