"""After each step of a schedule run beside the protocol model: waiting for the cluster to
stand where the model's does (the model lets the cluster act until nothing changes; brokers
need a moment to fetch and to widen the ISR)."""

from __future__ import annotations

from checkers.lineage import Lineage
from checkers.simulate import Simulator
from fixtures.cluster import Cluster
from fixtures.waiting import STEADY, Aborted, WaitTimeout, wait_until
from observe.replicas import replica
from observe.state import partition_state
from suites.broker_logs import dead_fetcher

# Those that came did within half a second (197 steps of six 1.1.1 schedules); one that
# does not come is a cluster gone its own way, and every later step would wait for it in
# full.
SETTLE_TIMEOUT = 5.0


def settle(cluster: Cluster, topic: str, sim: Simulator, since: dict[int, int]) -> str:
    """Wait for the schedule's partition to stand where the simulator has it: its leader,
    its ISR, and each live replica's log end and the leader epoch of its last batch (equal
    log ends can hide a follower that has not yet truncated to its new leader's log: on
    1.1.1 a follower holding the old leader's [0, 10] still had to trade it for the new
    leader's, and the next step's crash came first). "" once it does, else where it stood.
    `since`: each broker's log mark at its last start (suites.broker_logs)."""
    # Behind a slow link a replica's log end is late by the link's rate, not the model's to
    # say (checkers.simulate.slow_links).
    late = sim.slow.slow_receivers()
    expected = (
        sim.ctl.leader if sim.ctl.leader is not None else -1,
        tuple(sorted(sim.ctl.isr)),
        {
            b: (r.leo, r.batches[-1].epoch if r.batches else None)
            for b, r in sorted(sim.replicas.items())
            if sim.alive(b) and b not in late
        },
    )

    def probe() -> tuple[int, tuple[int, ...], dict[int, tuple[int, int | None]]]:
        state = partition_state(cluster, topic, 0)
        ends = {b: _log_end(replica(cluster, b, topic)) for b in expected[2]}
        return state.leader, tuple(sorted(state.isr)), ends

    reasons: list[str] = []

    def stopped() -> str | None:
        """A follower whose fetcher thread died stays behind until its broker restarts:
        where the model's kept fetching, the cluster will not stand where the model's does."""
        fetching = [b for b in expected[2] if sim.replicas[b].stuck is None]
        found = dead_fetcher(cluster, fetching, topic, since)
        if found is None:
            return None
        reasons.append(f"broker {found[0]}'s replication stopped: {found[1][:300]}")
        return reasons[-1]

    model = f"model: leader, ISR, (log end, last epoch) {expected}"
    try:
        wait_until(
            probe,
            lambda seen: seen == expected,
            what="the cluster to stand where the model's does",
            timeout=SETTLE_TIMEOUT,
            interval=STEADY,
            max_interval=STEADY,
            abort=stopped,
        )
    except WaitTimeout as exc:
        return f"{model}; brokers: {exc.last}"
    except Aborted:
        return f"{model}; {reasons[-1]}"
    return ""


def _log_end(lineage: Lineage) -> tuple[int, int | None]:
    """A replica's log end offset and the leader epoch of its last batch (-1 before 0.11)."""
    return lineage.leo, lineage.batches[-1].leader_epoch if lineage.batches else None
