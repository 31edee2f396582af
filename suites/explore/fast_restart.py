"""A schedule's fast restart on real nodes: a broker killed and started again at once,
before its session ends (runrecord.schedule_steps.Kill with `restart`; the model's side:
checkers.simulate)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from faults import process
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from observe import kraft
from suites.broker_logs import log_lines, log_mark


def fences(cluster: Cluster, broker: int) -> int:
    """KRaft: how often the metadata log has fenced the broker so far (0 in ZooKeeper
    mode)."""
    if cluster.mode != "kraft":
        return 0
    return len(kraft.fence_offsets(cluster.controllers, broker))


def fast_restart(
    cluster: Cluster, node: Node, broker: int, signal: str, start: Callable[[], None]
) -> tuple[dict[str, Any], float]:
    """Kill the broker, then `start` it at once; proven by it serving again, with what its
    registration met on the way: the refusals of a controller that waits out the old session
    (DUPLICATE_BROKER_REGISTRATION, KRaft from 4.0, KAFKA-18106) and whether it was fenced
    in between. Returns the step's targets and when the kill happened (monotonic)."""
    mark = log_mark(node)
    fenced_before = fences(cluster, broker)
    since = time.monotonic()
    process.kill(cluster, node, signal=signal)
    start()
    refusals = sum(1 for _ in log_lines(node, "DUPLICATE_BROKER_REGISTRATION", since=mark))
    targets = {
        "broker": broker,
        "back_in_seconds": round(time.monotonic() - since, 1),
        "registration_refused": refusals,
        "fenced_meanwhile": fences(cluster, broker) > fenced_before,
    }
    return targets, since
