"""A broker's process in a script: kill(1) with the step's signal, then the wait the
replay made (a crash: until the controller fences the broker; a shutdown: until it exits);
a restart starts the same command and waits until the broker is unfenced."""

from __future__ import annotations

from runrecord.steps.processes import Kill, Outage, Pause, PowerLoss, Restart, Resume
from suites.explore.export.registry import Ran, cannot_export, exporter

cannot_export(PowerLoss, "a power loss needs logfork's crash-simulating filesystem")
cannot_export(Outage, "an outage needs logfork's crash-simulating filesystem")


@exporter(Kill)
def kill(step: Kill, ran: Ran) -> list[str]:
    b = ran.broker
    lines = [f'kill -{step.signal.removeprefix("SIG")} "${{PID[${{NODE_OF[{b}]}}]}}"']
    if step.signal == "SIGKILL":
        lines.append(f'wait_until "broker {b}\'s process gone" 10 stopped "${{NODE_OF[{b}]}}"')
    if step.signal == "SIGTERM":
        lines.append(f'wait_until "broker {b} shut down" 300 stopped "${{NODE_OF[{b}]}}"')
    elif step.restart:
        lines.append(f'start_node "${{NODE_OF[{b}]}}"')
        lines.append(f'wait_until "broker {b} unfenced again" 120 is_unfenced {b}')
    else:
        # KIP-631: the controller fences a broker whose heartbeats stop for its session.
        lines.append(f'wait_until "broker {b} fenced (its session ended)" 120 is_fenced {b}')
    return lines


@exporter(Restart)
def restart(step: Restart, ran: Ran) -> list[str]:
    b = ran.broker
    return [
        f'start_node "${{NODE_OF[{b}]}}"',
        f'wait_until "broker {b} registered and unfenced" 180 is_unfenced {b}',
    ]


@exporter(Pause)
def pause(step: Pause, ran: Ran) -> list[str]:
    return [f'pause_node "${{NODE_OF[{ran.broker}]}}"']


@exporter(Resume)
def resume(step: Resume, ran: Ran) -> list[str]:
    return [f'resume_node "${{NODE_OF[{ran.broker}]}}"']
