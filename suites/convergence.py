"""Convergence after the faults: every replica of a topic's partitions in the ISR with
equal log ends, as read from the brokers' disks, or a follower that stopped for good."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

from checkers.lineage import Lineage
from fixtures.waiting import NOT_YET
from observe.replicas import replica
from observe.state import partition_state
from suites.broker_logs import stuck_follower
from suites.scenario import RunContext


@dataclass
class Convergence:
    converged: bool
    seconds: float
    stuck: dict[int, str] = field(default_factory=dict)  # broker -> the log line
    isr: tuple[int, ...] = ()  # partition 0's
    log_end_offsets: dict[int, int] = field(default_factory=dict)  # partition 0's
    stuck_partitions: dict[int, int] = field(default_factory=dict)  # broker -> partition
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)  # isr, leos
    stalled: bool = False  # nothing changed for the stall time before convergence
    # Of `seconds`, from every replica being in the ISR to convergence, where meanwhile a
    # replica's checkpointed high watermark stood past its file's end (`_replicated_to`):
    # standing in for a file left short, or a stale one above a truncated log, until the
    # next high watermark checkpoint.
    checkpoint_wait: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "converged": self.converged,
            "stuck": self.stuck,
            "isr": list(self.isr),
            "log_end_offsets": self.log_end_offsets,
            "stuck_partitions": self.stuck_partitions,
            "partitions": self.partitions,
            "stalled": self.stalled,
            "seconds": round(self.seconds, 1),
            "checkpoint_wait": round(self.checkpoint_wait, 1),
        }


def converge(
    ctx: RunContext,
    topic: str,
    replicas: list[int],
    *,
    timeout: float = 90.0,
    partitions: tuple[int, ...] = (0,),
    since: dict[int, int] | None = None,
    stall: float | None = None,
    stop_on_stuck: bool = True,
    replicas_of: dict[int, list[int]] | None = None,
) -> Convergence:
    """Give the cluster time to converge: every replica of each partition in its ISR with
    equal log end offsets. Returns early when a follower's replication has stopped for good
    (its log says so, from byte `since` of each broker's log on; `stop_on_stuck=False`:
    noted only, since from 2.3 a partition marked failed resumes with its next leader
    change, KIP-461), or when `stall` seconds passed with no ISR or log end offset
    changing. `replicas_of`: a partition's replicas where they are not `replicas` (one
    reassigned)."""
    ctx.timeline.phase("convergence")
    of = {p: list((replicas_of or {}).get(p, replicas)) for p in partitions}
    brokers = sorted({b for rs in of.values() for b in rs})
    cluster = ctx.cluster
    started = time.monotonic()
    changed, last = started, None
    in_sync: float | None = None  # when every replica was first seen in the ISR
    result = Convergence(False, 0.0)
    waited_on_checkpoint = False
    while time.monotonic() - started < timeout:
        ahead = False  # a replica's checkpointed high watermark past its file's end
        for b in brokers:
            found = stuck_follower(cluster, b, topic, since=(since or {}).get(b, 0))
            if found is not None:
                result.stuck_partitions[b], result.stuck[b] = found
        for p in partitions:
            try:
                isr = partition_state(cluster, topic, p).isr
            except NOT_YET:  # a controller failing over; look again
                isr = ()
            lineages = [replica(cluster, b, topic, p) for b in of[p]]
            leos = {lin.broker_id: _replicated_to(lin) for lin in lineages}
            ahead |= any(lin.leo < leos[lin.broker_id] for lin in lineages)
            result.partitions[p] = {"isr": list(isr), "leos": leos}
        first = result.partitions[partitions[0]]
        result.isr, result.log_end_offsets = tuple(first["isr"]), first["leos"]
        all_in_sync = all(sorted(v["isr"]) == sorted(of[p]) for p, v in result.partitions.items())
        if all_in_sync and in_sync is None:
            in_sync = time.monotonic()
        waited_on_checkpoint |= in_sync is not None and ahead
        equal = all(len(set(v["leos"].values())) == 1 for v in result.partitions.values())
        if all_in_sync and equal and in_sync is not None:
            result.converged = True
            if waited_on_checkpoint:
                result.checkpoint_wait = time.monotonic() - in_sync
            break
        if result.stuck and stop_on_stuck:
            break
        now = time.monotonic()
        if result.partitions != last:
            changed, last = now, copy.deepcopy(result.partitions)
        elif stall is not None and now - changed >= stall:
            result.stalled = True
            break
        time.sleep(0.5)
    result.seconds = time.monotonic() - started
    ctx.timeline.record(
        "note",
        "convergence",
        converged=result.converged,
        stuck=result.stuck,
        isr=list(result.isr),
        leos=result.log_end_offsets,
        partitions=result.partitions,
        stalled=result.stalled,
    )
    return result


def _replicated_to(lineage: Lineage) -> int:
    """How far a replica has come: its log end on disk, or its checkpointed high watermark
    where that is further. Before 2.0 a truncation to an offset inside a batch drops the
    whole batch from the file yet sets the in-memory log end to that offset, and the
    follower fetches on from there (KAFKA-6361's mid-batch case; Log.truncateTo): its file
    stays short for good, while its high watermark, which never passes its real log end,
    moves on."""
    return max(lineage.leo, lineage.high_watermark or 0)
