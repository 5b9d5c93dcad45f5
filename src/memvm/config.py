"""Settings: the one place memvm reads its environment (prefix MEMVM_)."""

import os
from pathlib import Path
from typing import Literal

from platformdirs import user_data_dir
from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Root's data dir, as for a system service: a home dir is no place for a service's data, and the
# embedded PostgreSQL's own system user could not enter a 0700 /root.
ROOT_DATA_DIR = Path("/var/lib/memvm")


def default_data_dir() -> Path:
    """The user's data dir (platformdirs); for root, ROOT_DATA_DIR, unless root's former default
    (the user data dir under /root) holds a database and ROOT_DATA_DIR does not: that one is kept
    rather than silently left behind (the embedded server's start says if it cannot be reached)."""
    user_dir = Path(user_data_dir("memvm", appauthor=False))
    if os.geteuid() != 0 or (_holds_database(user_dir) and not _holds_database(ROOT_DATA_DIR)):
        return user_dir
    return ROOT_DATA_DIR


def _holds_database(data_dir: Path) -> bool:
    return (data_dir / "pg" / "PG_VERSION").exists()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMVM_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = Field(8283, ge=1, le=65535)
    workers: int | None = Field(None, ge=1, le=64, description="HTTP processes of `memvm serve`; default one per core.")
    # Unset → an embedded PostgreSQL+pgvector under data_dir/pg is started.
    database_url: str | None = None
    data_dir: Path = Field(default_factory=default_data_dir)
    # The connection budget of one HTTP process (docs/scale-out.md, "Connections per replica",
    # connections_per_process below). The embedding worker's process has a session pool of its own.
    db_pool_size: int = Field(20, ge=1, description="Session connections a process keeps open.")
    db_max_overflow: int = Field(20, ge=0, description="Session connections a process may open beyond db_pool_size.")
    db_turn_lock_pool_size: int = Field(
        20,
        ge=1,
        description="Turns a process runs at once: each holds one connection of this pool (its turn lock) for the "
        "whole turn; further sends wait for one (db_pool_timeout_seconds). A process opens at most db_pool_size + "
        "db_max_overflow + db_turn_lock_pool_size + 2 (LISTEN) + 1 (background runs' claims) connections.",
    )
    db_pool_timeout_seconds: float = Field(
        30.0, gt=0, description="How long a request or send waits for a free connection of either pool before it gets 503."
    )
    embedded_shared_buffers_mib: int | None = Field(
        None,
        ge=16,
        description="shared_buffers of the embedded PostgreSQL, in MiB; unset: an eighth of the host's memory "
        "(its cgroup limit when lower), between 128 MiB and 4 GiB. Read when memvm starts the server.",
    )
    # A pooled connection unused this long is pinged before use (one that was used more recently is
    # trusted: a ping is three round trips, a large share of a short request).
    db_idle_ping_seconds: float = Field(5.0, ge=0)
    log_level: str = "info"
    migrate_on_start: bool = True
    # The operator console at /ui/ (server-rendered pages behind the same API keys).
    ui: bool = True

    # Access control: with an admin key (or once any API key exists) every route but /v1/health/
    # needs a key. Without, the server is for this machine only: a non-loopback host is refused
    # unless `insecure` says the operator means it.
    admin_api_key: SecretStr | None = None
    insecure: bool = False
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="Larger request bodies get 413.")
    max_agent_file_bytes: int = Field(512 * 1024 * 1024, ge=1024, description="The cap for POST /v1/agents/import.")
    max_file_upload_bytes: int = Field(
        50 * 1024 * 1024, ge=1024, description="The cap for a file uploaded to a folder (Letta's is 50 MB)."
    )
    # A request's head is capped while `memvm serve` reads it (cli/head_limits.py): more is a 431.
    max_header_bytes: int = Field(64 * 1024, ge=1024, description="The request line and all headers, in bytes.")
    max_header_line_bytes: int = Field(8 * 1024, ge=256, description="One header's name and value, in bytes.")

    # The model: any OpenAI-compatible endpoint. The SDK's own variables work too.
    openai_api_key: SecretStr | None = Field(None, validation_alias=AliasChoices("MEMVM_OPENAI_API_KEY", "OPENAI_API_KEY"))
    openai_base_url: str | None = Field(None, validation_alias=AliasChoices("MEMVM_OPENAI_BASE_URL", "OPENAI_BASE_URL"))
    default_model: str | None = Field(None, description="Handle used for agents created without model or llm_config.")
    default_context_window: int = Field(32_768, ge=1024)
    llm_timeout_seconds: float = Field(60.0, gt=0)
    llm_attempts: int = Field(3, ge=1, le=10)
    # Embeddings: the offline local model by default; other handles use this OpenAI-compatible endpoint
    # (falling back to the chat endpoint and key).
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    embedding_dim: int | None = Field(None, ge=1, description="Vector size of non-local embedding models not known by name.")
    embedding_batch_size: int = Field(64, ge=1, le=2048)
    # Block history is kept for each block's lifetime unless one of these is set (pruned in the background).
    block_history_keep_versions: int | None = Field(None, ge=1, description="Keep each block's newest N versions.")
    block_history_keep_days: int | None = Field(None, ge=1, description="Keep N days (and each block's current version).")
    block_history_prune_seconds: float = Field(3600.0, gt=0, description="How often retention runs.")
    # Embed stored messages in the background (every replica runs a worker; they share the queue).
    embedding_worker: bool = True
    # `memvm serve` runs the worker as a process of its own (niced), not in the server's event loop.
    embedding_process: bool = True
    embedding_poll_seconds: float = Field(1.0, gt=0, description="Idle worker's wait between queue checks.")
    window_cache_tokens: int = Field(
        1_000_000,
        ge=0,
        description="Context windows each process keeps between turns, in estimated tokens (runtime/loop/kept_windows.py); "
        "a turn then reads only the messages stored since; 0 keeps none.",
    )
    # A second send to a busy agent waits this long for the running turn, then gets 409.
    turn_lock_timeout_seconds: float = Field(30.0, ge=0)
    # Hybrid message search (search/tuning.py; defaults measured on LoCoMo, bench/eval).
    search_rrf_k: int = Field(10, ge=1, le=1000, description="Reciprocal rank fusion constant (60 is the classic value).")
    search_neighbour_weight: float = Field(
        0.25, ge=0, le=1, description="Share of a hit's score lent to the messages next to it; 0 turns it off."
    )
    search_archival_hybrid: bool = Field(
        True,
        description="Archival passage search fuses full text with vectors (RRF, search_rrf_k); false ranks by vector alone.",
    )
    search_feedback_terms: int = Field(
        0,
        ge=0,
        le=12,
        description="Hybrid message search adds up to this many words of its first best hits to the full-text query; 0: off.",
    )
    search_context_weight: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Hybrid message search: a message also matches its previous turn's words at this share of its own; 0: off.",
    )

    # Custom tools run in a sandbox: bubblewrap (Linux namespaces: no network, no view of the server's
    # files or environment) unless the operator accepts a plain subprocess with rlimits ("process").
    tool_sandbox: Literal["bubblewrap", "process"] = "bubblewrap"
    tool_timeout_seconds: float = Field(30.0, gt=0, description="Wall clock per tool call; then its process tree is killed.")
    tool_memory_mb: int = Field(512, ge=64, description="Address-space limit of a tool call.")
    tool_max_processes: int = Field(32, ge=1, description="Processes (and threads) one tool call may run at once.")
    tool_max_output_bytes: int = Field(1 << 20, ge=1024, description="stdout + stderr + result of one call; more is an error.")
    tool_tmp_mb: int = Field(64, ge=1, description="Size of the private /tmp of a sandboxed call.")
    tool_concurrency: int = Field(16, ge=1, le=1024, description="Tool calls running at once in this process.")
    # When the server runs as root, each concurrent call runs as its own unprivileged uid from here on,
    # so that the process limit counts that call's processes alone.
    tool_sandbox_first_uid: int = Field(200_000, ge=1000)

    # MCP servers (tool sources). Each step of a session has its own timeout: a server that hangs
    # gives the agent an error result and its status, never a stuck turn. stdio servers run long-lived
    # in the tool sandbox's jail with their own limits (a server lives for hours: its CPU limit is
    # cumulative, and a server killed by it is restarted).
    mcp_connect_timeout_seconds: float = Field(15.0, gt=0, description="Start (or connect) and initialize a session.")
    mcp_list_timeout_seconds: float = Field(15.0, gt=0, description="One tools/list.")
    mcp_call_timeout_seconds: float = Field(60.0, gt=0, description="One tools/call; the agent then gets an error result.")
    mcp_max_message_bytes: int = Field(8 << 20, ge=64 * 1024, description="Largest message a stdio server may send.")
    mcp_memory_mb: int = Field(1024, ge=64, description="Address-space limit of a stdio server's processes.")
    mcp_cpu_seconds: int = Field(3600, ge=1, description="CPU time a stdio server may use before it is restarted.")
    mcp_retry_max_seconds: float = Field(60.0, gt=0, description="Longest back-off between reconnects to a failed server.")

    # The built-in web tools (they run in the server, not the sandbox). fetch_webpage refuses addresses
    # that are not public (loopback, private, link-local…) unless allowed: a model must not reach the
    # server's own network. web_search needs a SearxNG-style backend (GET <url>?q=…&format=json).
    web_fetch_allow_private: bool = False
    web_fetch_timeout_seconds: float = Field(10.0, gt=0, description="Connect, read and whole-fetch timeout.")
    web_fetch_max_bytes: int = Field(2 * 1024 * 1024, ge=1024, description="A page's body is read up to this size.")
    web_search_url: str | None = Field(None, description="SearxNG-style JSON search endpoint, e.g. http://127.0.0.1:8888/search.")

    @field_validator("database_url")
    @classmethod
    def _require_asyncpg(cls, url: str | None) -> str | None:
        if url is None or url == "":
            return None
        if url.startswith(("postgresql://", "postgres://")):
            return "postgresql+asyncpg://" + url.split("://", 1)[1]
        if not url.startswith("postgresql+asyncpg://"):
            raise ValueError("MEMVM_DATABASE_URL must be a PostgreSQL URL, e.g. postgresql+asyncpg://user:pass@host:5432/db")
        return url

    # Not a setting (no variable sets it, so a tool's or MCP server's subprocess inherits none): where
    # `memvm serve`'s worker lends its local model to the HTTP processes (embeddings/model_socket.py).
    _model_socket: Path | None = PrivateAttr(None)

    def with_model_socket(self, path: Path | None) -> "Settings":
        settings = self.model_copy()
        settings._model_socket = path
        return settings

    @property
    def model_socket(self) -> Path | None:
        return self._model_socket

    @property
    def embedded_pg_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def http_processes(self) -> int:
        """How many HTTP processes `memvm serve` runs."""
        return self.workers or os.cpu_count() or 1

    @property
    def connections_per_process(self) -> int:
        """The most connections one HTTP process opens: its session and turn-lock pools, its two LISTEN
        connections and the one that holds its background runs' claims."""
        return self.db_pool_size + self.db_max_overflow + self.db_turn_lock_pool_size + 3

    @property
    def serve_connections(self) -> int:
        """The most connections `memvm serve` opens with these settings, every pool full: each HTTP
        process's, and the embedding worker's session pool."""
        return self.http_processes * self.connections_per_process + self.db_pool_size + self.db_max_overflow
