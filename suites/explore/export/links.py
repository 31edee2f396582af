"""Links in a script: each node runs in a network namespace of its own, on a bridge (lib.sh's
make_network), so that iptables and tc inside a node's namespace tell its peers apart by
address, as logfork's rules do inside each container (faults.network, faults.slow_link).

A cut is DROP rules both ways in one end's namespace, proven by a handshake that no longer
completes; a slow link an HTB class on the sender's interface, proven by tc's own account;
a session expiry a cut from every controller, awaited until the metadata log fences the
broker (KIP-631). The namespace outlives a node's restart, so its rules stay until healed.
A heal of every cut lifts slow links first, so that what they held back arrives before a
cut heals, as the replay's does (suites.explore.live.links)."""

from __future__ import annotations

from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack, Slow
from suites.explore.export.registry import Ran, cannot_export, exporter

cannot_export(
    HoldAlterPartition,
    "holding one API's requests matches each TCP segment's payload (iptables u32), whose "
    "release after a heal logfork proves from the host's socket queues; scripts do not",
)


@exporter(HoldBack, needs=("network",))
def hold_back(step: HoldBack, ran: Ran) -> list[str]:
    return [f'cut_link "{ran.node("follower")}" "{ran.node("leader")}"']


@exporter(Cut, needs=("network",))
def cut(step: Cut, ran: Ran) -> list[str]:
    return [f'cut_link "{ran.node("a")}" "{ran.node("b")}"']


@exporter(Slow, needs=("network",))
def slow(step: Slow, ran: Ran) -> list[str]:
    return [f'slow_link "{ran.node("a")}" "{ran.node("b")}" {step.rate}']


@exporter(Heal, needs=("network",))
def heal(step: Heal, ran: Ran) -> list[str]:
    if step.a is None:
        return ["heal_all"]
    return [f'heal_link "{ran.node("a")}" "{ran.node("b")}"']


@exporter(ExpireSession, needs=("network",))
def expire_session(step: ExpireSession, ran: Ran) -> list[str]:
    b = ran.broker
    return [
        f'cut_link "${{NODE_OF[{b}]}}" quorum session',
        f'wait_until "the controller fenced broker {b} (its session expired)" 120 is_fenced {b}',
    ]
