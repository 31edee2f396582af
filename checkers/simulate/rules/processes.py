"""A broker's process and power on the simulated cluster: kill, restart, pause, resume, power
loss, and an outage of every broker's power."""

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
    Skip,
    cannot_register,
    cannot_shut_down,
)
from runrecord.steps.processes import Kill, Outage, Pause, PowerLoss, Restart, Resume

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
    lost = _lose_power(sim, b, step.lose)
    sim.control.advance(sim._session_timeout(b))
    return {"broker": b, "lost_batches": lost}


@rule(Outage)
def outage(sim: Simulator, step: Outage) -> dict[str, Any]:
    paused = [b for b in sorted(sim.nodes) if sim.nodes[b].status == PAUSED]
    if paused:  # a paused broker cannot be frozen again: the live step refuses it too
        raise Skip(f"broker {paused[0]} is paused")
    running = [b for b in sorted(sim.nodes) if sim.alive(b)]
    if not running:
        raise Skip("no broker is running")
    lost = {b: _lose_power(sim, b, None) for b in running}
    sim.control.advance(max(sim._session_timeout(b) for b in running))
    return {"brokers": running, "lost_batches": sum(lost.values())}


def _lose_power(sim: Simulator, b: int, lose: int | None) -> int:
    """Broker b loses power: its replica keeps what it flushed (and, under `lose`, all but
    its last `lose` batches), or where a run told the log end it ended at, that; it stops.
    Returns how many batches it lost."""
    r = sim.replicas.get(b)
    lost: list[SimBatch] = []
    told = {(i, x): end for i, x, end in sim.options.kept_after_power_loss}.get((sim._step, b))
    if r is not None:
        cut = r.flushed
        if lose is not None and r.batches:
            nth = r.batches[-lose].base if lose <= len(r.batches) else 0
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
    return len(lost)
