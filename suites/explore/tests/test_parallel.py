"""explore --parallel: the default the machine allows, and the one queue its workers share
(crafted candidates; the clusters themselves are the cluster tests')."""

from __future__ import annotations

import threading
from pathlib import Path

from suites.explore.parallel import RESERVE_MB, available_mb, cluster_mb, default_parallel


def test_the_default_is_one_cluster_per_core_and_one_more_while_memory_holds() -> None:
    kraft = cluster_mb(6)  # three brokers, three controllers
    assert default_parallel(6, cores=2, memory_mb=24 * 1024).clusters == 3
    assert default_parallel(6, cores=1, memory_mb=24 * 1024).clusters == 2
    tight = default_parallel(6, cores=8, memory_mb=RESERVE_MB + 2 * kraft)
    assert tight.clusters == 2
    assert default_parallel(6, cores=8, memory_mb=1024).clusters == 1  # never below one
    choice = default_parallel(4, cores=2, memory_mb=20 * 1024)
    assert choice.describe().startswith("parallel: 3 cluster(s) at once (2 cores, 20.0 GiB")


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   20971520 kB\n")
    assert available_mb(meminfo) == 20480


def test_workers_take_every_number_once_in_running_order() -> None:
    from runrecord.explore import ExploreRecord
    from suites.explore.explore import ExploreOptions, Explorer

    options = ExploreOptions(kafka="4.3.1", seed=1, budget=40)
    record = ExploreRecord("4.3.1", "kraft", 1, False, True, 40, None, 0.0, "")
    explorer = Explorer(options, Path("unused"), record, None, lambda line: None)  # type: ignore[arg-type]
    explorer._queue = iter(range(1000))  # type: ignore[assignment]
    taken: list[tuple[int, object]] = []

    def worker() -> None:
        while (item := explorer.take()) is not None:
            taken.append(item)

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(n for n, _ in taken) == list(range(1, 41))
    # The n-th schedule is the n-th candidate of the ranked queue, whoever ran it.
    assert all(candidate == n - 1 for n, candidate in taken)
