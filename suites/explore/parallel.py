"""How many clusters `logfork explore --parallel` runs at once by default: what the
machine's cores and available memory allow.

A schedule spends most of its wall time waiting on the protocol (sessions expiring,
request timeouts, fetch rounds), so clusters share cores well; memory is what runs out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fixtures.config import JVM_HEAP_MB

# What one JVM of a cluster takes beyond its heap (metaspace, threads, page cache it
# churns), measured as container RSS on this project's clusters: about 250 MB.
JVM_OVERHEAD_MB = 256
RESERVE_MB = 3072  # for logfork itself, its clients and the host
MAX_DEFAULT = 3  # beyond this, a 2-core machine's steps no longer settle in time


@dataclass(frozen=True)
class Choice:
    clusters: int
    cores: int
    available_mb: int
    per_cluster_mb: int

    def describe(self) -> str:
        return (
            f"parallel: {self.clusters} cluster(s) at once ({self.cores} cores, "
            f"{self.available_mb / 1024:.1f} GiB available, about "
            f"{self.per_cluster_mb / 1024:.1f} GiB per cluster)"
        )


def cluster_mb(jvms: int) -> int:
    """What one cluster of `jvms` JVMs takes: the heaps and their overhead."""
    return jvms * (JVM_HEAP_MB + JVM_OVERHEAD_MB)


def available_mb(meminfo: Path = Path("/proc/meminfo")) -> int:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise ValueError(f"{meminfo} has no MemAvailable line")


def default_parallel(
    jvms: int, *, cores: int | None = None, memory_mb: int | None = None
) -> Choice:
    """One cluster per core and one more (their time goes to waiting), as many as the
    available memory holds beside the reserve, at most MAX_DEFAULT."""
    cores = cores or os.cpu_count() or 1
    memory = available_mb() if memory_mb is None else memory_mb
    per = cluster_mb(jvms)
    by_memory = max(1, (memory - RESERVE_MB) // per)
    clusters = max(1, min(cores + 1, by_memory, MAX_DEFAULT))
    return Choice(clusters, cores, memory, per)
