"""Constants and measuring helpers shared by the search bench modules."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

MODEL = "local/all-MiniLM-L6-v2"
DIM = 384
RARE_TAG = "bench-rare"
COMMON_TAG = "notes"


def pct(sorted_vals: list[float], p: float) -> float | None:
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def stats_ms(lat_s: list[float]) -> dict[str, Any]:
    v = sorted(x * 1000 for x in lat_s)
    if not v:
        return {"n": 0}
    return {
        "n": len(v),
        "p50_ms": round(pct(v, 50), 2),
        "p95_ms": round(pct(v, 95), 2),
        "p99_ms": round(pct(v, 99), 2),
        "mean_ms": round(sum(v) / len(v), 2),
        "min_ms": round(v[0], 2),
        "max_ms": round(v[-1], 2),
    }


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _stat_fields(pid: int | str) -> list[str]:
    # split after the command name's closing parenthesis: the name itself may hold spaces and parentheses
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                children.setdefault(int(_stat_fields(p)[1]), []).append(int(p))
    return children


def proc_cpu_s(pid: int | None) -> float | None:
    """user+sys CPU seconds of pid and its descendants."""
    if not pid:
        return None
    total, todo, seen = 0.0, [pid], set()
    tick = os.sysconf("SC_CLK_TCK")
    children = _children()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            f = _stat_fields(p)
            total += (int(f[11]) + int(f[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
        todo += children.get(p, [])
    return total


class Log:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        print(f"[search {time.perf_counter() - self.t0:7.1f}s] {msg}", flush=True)


log = Log()
