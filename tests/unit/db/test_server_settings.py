"""The embedded PostgreSQL's memory, sized to the host: the host's memory as its cgroup limits it, and
the settings made of it (the started server reading them: tests/e2e/test_embedded_start.py)."""

from pathlib import Path

import pytest

from memvm.db.server_settings import MIB, host_memory_bytes, server_settings, settings_file_text

GIB = 1024 * MIB


def host(tmp_path: Path, meminfo_kb: int | None = None, **cgroup_files: str) -> Path:
    """A root directory holding /proc/meminfo and the cgroup files named (`v2` memory.max, `v1`
    memory/memory.limit_in_bytes) with these contents."""
    if meminfo_kb is not None:
        (tmp_path / "proc").mkdir()
        (tmp_path / "proc/meminfo").write_text(f"MemTotal:       {meminfo_kb} kB\nMemFree:         1024 kB\n")
    paths = {"v2": "memory.max", "v1": "memory/memory.limit_in_bytes"}
    for version, content in cgroup_files.items():
        path = tmp_path / "sys/fs/cgroup" / paths[version]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content + "\n")
    return tmp_path


def test_the_machine_s_memory_when_no_cgroup_limits_it(tmp_path: Path) -> None:
    root = host(tmp_path, 16 * 1024 * 1024, v2="max", v1="9223372036854771712")
    assert host_memory_bytes(root) == 16 * GIB


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_a_container_s_limit_below_the_machine_s_memory_wins(tmp_path: Path, version: str) -> None:
    """A container's /proc/meminfo shows the whole machine; its cgroup says what it may use."""
    root = host(tmp_path, 64 * 1024 * 1024, **{version: str(2 * GIB)})
    assert host_memory_bytes(root) == 2 * GIB


def test_nothing_readable_is_unknown(tmp_path: Path) -> None:
    assert host_memory_bytes(tmp_path) is None
    assert host_memory_bytes(host(tmp_path, v2="max")) is None


@pytest.mark.parametrize(
    ("memory", "buffers", "maintenance"),
    [
        (None, "128MB", "64MB"),  # unknown: PostgreSQL's own defaults
        (512 * MIB, "128MB", "64MB"),  # a small host keeps the floors
        (8 * GIB, "1024MB", "512MB"),  # an eighth and a sixteenth
        (24 * GIB, "3072MB", "1024MB"),
        (256 * GIB, "4096MB", "1024MB"),  # capped
    ],
)
def test_the_buffers_are_an_eighth_of_the_host_within_bounds(memory: int | None, buffers: str, maintenance: str) -> None:
    settings = server_settings(150, memory)
    assert settings == {"max_connections": "150", "shared_buffers": buffers, "maintenance_work_mem": maintenance}


def test_the_operator_s_buffers_win_over_the_sizing() -> None:
    assert server_settings(100, 64 * GIB, shared_buffers_mib=200)["shared_buffers"] == "200MB"


def test_the_file_quotes_every_value() -> None:
    text = settings_file_text({"max_connections": "100", "shared_buffers": "128MB"})
    assert text == "max_connections = '100'\nshared_buffers = '128MB'\n"
