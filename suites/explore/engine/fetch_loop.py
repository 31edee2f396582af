"""After the heal: a follower that keeps resetting its fetch to the offset it stands at has
made no progress, though its log ends where its leader's does and the ISR still names it
(a leader drops a follower only after replica.lag.time.max.ms). KAFKA-20961: a replica
swapped in from another log dir lost its leader epochs that hold no records, and as leader
it answers its followers OFFSET_OUT_OF_RANGE until new writes arrive."""

from __future__ import annotations

from collections.abc import Iterable

from fixtures.cluster import Cluster
from fixtures.waiting import WaitTimeout, wait_until
from suites.broker_logs import fetch_resets, log_mark

# Resets to one offset that make a loop rather than a leader change's one reset: seen after
# convergence, within LOOP_WAIT (a follower fetches again within replica.fetch.backoff.ms,
# 1 s by default; the loops seen came every 50 ms).
LOOP_ROUNDS = 5
LOOP_WAIT = 15.0


def fetch_loops(
    cluster: Cluster, topic: str, brokers: Iterable[int], healed: dict[int, int]
) -> dict[int, dict[int, str]]:
    """Partition -> broker -> what its log says, for each follower of `topic` still looping
    once the replicas converged. `healed`: each broker's log mark at the heal. Only a
    follower that already reset to the same offset twice since the heal is watched."""
    brokers = list(brokers)
    nodes = {b: cluster.broker(b) for b in brokers}
    suspects = [
        b
        for b in brokers
        if any(n >= 2 for n, _ in fetch_resets(nodes[b], topic, since=healed.get(b, 0)).values())
    ]
    if not suspects:
        return {}
    marks = {b: log_mark(nodes[b]) for b in suspects}

    def seen() -> dict[int, dict[int, tuple[int, str]]]:
        return {b: fetch_resets(nodes[b], topic, since=marks[b]) for b in suspects}

    try:
        found = wait_until(
            seen,
            lambda s: any(n >= LOOP_ROUNDS for r in s.values() for n, _ in r.values()),
            what=f"a follower of {topic} resetting its fetch {LOOP_ROUNDS} times",
            timeout=LOOP_WAIT,
            interval=0.5,
            max_interval=1.0,
        )
    except WaitTimeout:
        return {}  # the resets stopped: the follower moved on
    loops: dict[int, dict[int, str]] = {}
    for b, resets in found.items():
        for p, (n, line) in resets.items():
            if n >= LOOP_ROUNDS:
                loops.setdefault(p, {})[b] = f"{n} resets to one offset after convergence: {line}"
    return loops
