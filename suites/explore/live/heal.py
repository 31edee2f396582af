"""The end of a schedule on real brokers: everything healed, as the simulator's `finish`
does it (checkers.simulate.simulator)."""

from __future__ import annotations

from faults import process
from fixtures.waiting import NOT_REACHED, NOT_YET
from suites.explore.live import txn
from suites.explore.live.context import Live


def heal_all(live: Live) -> None:
    """Resume paused brokers, heal every cut, restart stopped ones (those in the ISR
    first, then by broker id). A broker that exits again on its own (a follower that
    halts rather than truncate) is left down and noted: the cluster's doing, judged
    as a follower that cannot make progress."""
    brokers = sorted(live.cluster.brokers)
    # Paused nodes first: the rules of a cut live in both ends' namespaces, and a
    # frozen container's cannot be removed (faults.network).
    for voter in live.cluster.controllers:
        if voter.status() == "paused":
            process.resume(live.cluster, voter)
    for b in brokers:
        if live.status(b) == "paused":
            process.resume(live.cluster, live.node(b))
    for link in live.slow_first():
        if link.kind == "slow":  # what they held back arrives before any cut heals
            live.heal_link(link)
    live.heal_voters()
    for voter in live.cluster.controllers:  # the quorum back before the brokers
        if voter.status() in ("exited", "created", "dead"):
            process.restart(live.cluster, voter)
    for link in list(live.links):
        live.heal_link(link)
    released = live.holds.release(live.sim)
    late = txn.release_held_end(live, live.txn)
    try:
        isr = set(live.state().isr)
    except NOT_YET:  # no state to read yet: restart in id order
        isr = set()
    for b in sorted(brokers, key=lambda x: (x not in isr, x)):
        if live.status(b) != "stopped":
            continue
        try:
            live.start_broker(b)
        except NOT_REACHED as exc:
            if live.node(b).status() == "running":
                raise
            live.exited[b] = f"{exc}"[:300] + "\n" + live.node(b).tail_log()
    live.ctx.timeline.record(
        "heal", "everything", exited=sorted(live.exited), alter_partition_dropped=released,
        **late,
    )  # fmt: skip
