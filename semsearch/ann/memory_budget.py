"""The memory an index may take when the user names no `--memory-budget`.

Why: without a budget `auto` chose an in-RAM IVF-SQfp16 index whatever the corpus, and a
20-million-row corpus then needed ~16 GB to search. The default is a share of the memory
this process can still get: the machine's `MemAvailable`, or less where a cgroup (a
container, `systemd-run -p MemoryMax=`) caps the process.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_BUDGET_SHARE = 0.5
MEMINFO = Path("/proc/meminfo")
# cgroup v2 (limit, usage), then cgroup v1.
CGROUP_FILES = (
    (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")),
    (
        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ),
)


def available_memory() -> int | None:
    """Bytes this process can still get: MemAvailable, capped by its cgroup's free share;
    None where neither can be read (not Linux)."""
    candidates = [value for value in (_mem_available(), _cgroup_free()) if value is not None]
    return min(candidates) if candidates else None


def default_memory_budget(share: float = DEFAULT_BUDGET_SHARE) -> int | None:
    """`share` of `available_memory()`: what `auto` fits an index into by default."""
    available = available_memory()
    return None if available is None else int(available * share)


def _mem_available() -> int | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_free() -> int | None:
    for limit_file, usage_file in CGROUP_FILES:
        try:
            limit = limit_file.read_text().strip()
            usage = int(usage_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 2**60:
            return None  # no cap (cgroup v1 writes a huge number for none)
        return max(0, int(limit) - usage)
    return None
