"""Log dirs on the simulated cluster: moves between them, a dir failing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from runrecord.steps.disks import FailDir, MoveDir

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(MoveDir)
def move_dir(sim: Simulator, step: MoveDir) -> dict[str, Any]:
    b = sim._log_dir_target(step.target, False, "move the replica of")
    # The swap puts a copy of the log in its place (KIP-113): its batches and its
    # leader epoch cache are the same, so nothing the model keeps changes. A move left
    # in flight changes nothing either: the current log serves until the swap.
    how = "throttled" if step.throttle else "swapped in"
    sim._event(f"broker {b}'s replica moved to its other log dir ({how})")
    return {"broker": b}


@rule(FailDir)
def fail_dir(sim: Simulator, step: FailDir) -> dict[str, Any]:
    b = sim._log_dir_target(step.target, True, "fail the log dir of")
    # The broker takes the dir offline, with the replica, and tells the controller
    # (KRaft: its next heartbeat names the dir, KIP-858; ZooKeeper mode: a
    # log_dir_event_notification, KIP-112), which acts as for a broker that lost its
    # session: out of the ISR, its leadership moved. For this partition the broker is
    # down until it restarts on the disk, after a controlled shutdown (faults.disk)
    # that the controller sees as clean; what reached the disk stays there.
    sim._stop(b, clean=True)
    if sim.nodes[b].registered:
        sim.nodes[b].registered = False
        sim._failed.add(b)
    sim._event(f"broker {b}'s log dir fails: its replica goes offline")
    sim.control.settle()
    return {"broker": b}
