"""The settings memvm gives the embedded PostgreSQL (its `memvm.conf`): the connections serve may open,
and memory sized to the host, which PostgreSQL's own defaults (128 MB of buffers) are not: an archive's
HNSW index that outgrows its buffers is read from the OS cache at every search (a 1536-d index of 100k
passages is 780 MB; its search took 39.5 ms p50 with 128 MB of buffers and 24.0 ms with 3 GB, the
same data side by side: bench/README.md, "Buffers for the vector index")."""

from pathlib import Path

MIB = 1 << 20
# An eighth of the memory, not the quarter PostgreSQL's manual suggests for a dedicated server: the
# embedded server shares its host with memvm's own processes and whatever else the user runs.
SHARED_BUFFERS_SHARE = 8
SHARED_BUFFERS_MIB = (128, 4096)  # PostgreSQL's default is the floor
# Index builds (an HNSW build is many times faster when its graph fits) and vacuum; a sixteenth.
MAINTENANCE_WORK_MEM_SHARE = 16
MAINTENANCE_WORK_MEM_MIB = (64, 1024)
# What a cgroup without a memory limit reports (v1: a page-rounded 2**63 - 1).
_UNLIMITED = 1 << 62


def host_memory_bytes(root: Path = Path("/")) -> int | None:
    """The memory this host gives its processes: the machine's, or its cgroup's limit when lower (a
    container's /proc/meminfo shows the whole machine). None when neither can be read."""
    limits = [_meminfo_total(root / "proc/meminfo")]
    limits += [_cgroup_limit(root / "sys/fs/cgroup" / name) for name in ("memory.max", "memory/memory.limit_in_bytes")]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def server_settings(max_connections: int, memory_bytes: int | None, shared_buffers_mib: int | None = None) -> dict[str, str]:
    """PostgreSQL's settings for a server admitting `max_connections` on a host of `memory_bytes`;
    `shared_buffers_mib` (MEMVM_EMBEDDED_SHARED_BUFFERS_MIB) overrides the sizing of the buffers."""
    buffers = shared_buffers_mib or _share_of(memory_bytes, SHARED_BUFFERS_SHARE, SHARED_BUFFERS_MIB)
    maintenance = _share_of(memory_bytes, MAINTENANCE_WORK_MEM_SHARE, MAINTENANCE_WORK_MEM_MIB)
    return {
        "max_connections": str(max_connections),
        "shared_buffers": f"{buffers}MB",
        "maintenance_work_mem": f"{maintenance}MB",
    }


def settings_file_text(settings: dict[str, str]) -> str:
    return "".join(f"{name} = '{value}'\n" for name, value in settings.items())


def _share_of(memory_bytes: int | None, share: int, bounds: tuple[int, int]) -> int:
    low, high = bounds
    if memory_bytes is None:
        return low
    return max(low, min(high, memory_bytes // share // MIB))


def _meminfo_total(path: Path) -> int | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(":")
        if name == "MemTotal" and value.strip().endswith("kB"):
            return int(value.split()[0]) * 1024
    return None


def _cgroup_limit(path: Path) -> int | None:
    try:
        value = path.read_text().strip()
    except OSError:
        return None
    if not value.isdigit() or int(value) >= _UNLIMITED:  # "max" (v2), or v1's unlimited
        return None
    return int(value)
