"""A broker's process and power on the simulated cluster: kill, restart, pause, resume, power
loss."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkers.simulate.rules.registry import rule
from checkers.simulate.state import (
    PAUSED,
    RUNNING,
    STOPPED,
    SimBatch,
)
from runrecord.schedule_roles import (
    cannot_register,
    cannot_shut_down,
)
from runrecord.steps.processes import Kill, Pause, PowerLoss, Restart, Resume

if TYPE_CHECKING:
    from checkers.simulate.simulator import Simulator


@rule(Kill)
def kill(sim: Simulator, step: Kill) -> dict[str, Any]:
    running = sim._status_is(RUNNING)

    def ok(b: Any) -> str | None:
        if running(b) is None and step.signal == "SIGTERM":
            return cannot_shut_down(b, sim._controller_broker(), sim.linked)
        return running(b) or (cannot_register(b, sim.linked) if step.restart else None)

    b = sim._pick(step.target, ok, "kill")
    if step.signal == "SIGTERM":
        sim.control._controlled_shutdown(b)
        sim.control.settle()
    else:
        sim._stop(b)
        sim._event(f"broker {b} killed (SIGKILL)")
        if not step.restart or sim._waits_out_its_session():
            sim.control.advance(sim._session_timeout(b))
    if step.restart:
        if sim.nodes[b].registered and sim._waits_out_its_session():
            sim.control.advance(sim._session_timeout(b))
        sim._start(b)
        sim._event(f"broker {b} restarted at once")
        sim.control.settle()
    return {"broker": b}


@rule(Restart)
def restart(sim: Simulator, step: Restart) -> dict[str, Any]:
    stopped = sim._status_is(STOPPED)

    def ok(b: Any) -> str | None:
        return stopped(b) or cannot_register(b, sim.linked)

    b = sim._pick(step.target, ok, "restart")
    sim._start(b)
    sim.control.settle()
    return {"broker": b}


@rule(Pause)
def pause(sim: Simulator, step: Pause) -> dict[str, Any]:
    b = sim._pick(step.target, sim._status_is(RUNNING), "pause")
    sim.nodes[b].status = PAUSED
    sim._event(f"broker {b} paused")
    sim.control.settle()
    return {"broker": b}


@rule(Resume)
def resume(sim: Simulator, step: Resume) -> dict[str, Any]:
    b = sim._pick(step.target, sim._status_is(PAUSED), "resume")
    sim.nodes[b].status = RUNNING
    sim._event(f"broker {b} resumed")
    sim.control.settle()
    return {"broker": b}


@rule(PowerLoss)
def power_loss(sim: Simulator, step: PowerLoss) -> dict[str, Any]:
    b = sim._pick(step.target, sim._status_is(RUNNING), "cut the power of")
    r = sim.replicas.get(b)
    lost: list[SimBatch] = []
    told = dict(sim.options.kept_after_power_loss).get(sim._step)
    if r is not None:
        cut = r.flushed
        if step.lose is not None and r.batches:
            nth = r.batches[-step.lose].base if step.lose <= len(r.batches) else 0
            cut = max(cut, nth)
        if told is not None:
            cut = told
        lost = [x for x in r.batches if x.last >= cut]
        r.batches = [x for x in r.batches if x.last < cut]
        before, r.leo = r.leo, r.batches[-1].last + 1 if r.batches else 0
        if r.leo < before:
            sim.power_drops.append((r.leo, before))
    sim._stop(b)
    sim.power_losses += 1
    spans = ", ".join(x.span for x in lost) or "nothing"
    sim._event(f"broker {b} loses power; unflushed {spans} gone")
    sim.control.advance(sim._session_timeout(b))
    return {"broker": b, "lost_batches": len(lost)}
