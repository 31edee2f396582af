"""Links in a script: none yet. A cut, a slow link or a held request between brokers that
share one host's loopback needs each broker in a network namespace of its own (ip netns,
a veth pair to a bridge) for iptables and tc to tell them apart; until the script builds
those, these steps are refused with that reason."""

from __future__ import annotations

from runrecord.steps.links import Cut, ExpireSession, Heal, HoldAlterPartition, HoldBack, Slow
from suites.explore.export.registry import cannot_export

WHY = (
    "network rules between brokers on one host need a network namespace per broker, which "
    "exported scripts do not build yet"
)
for _kind in (Cut, Heal, Slow, HoldBack, HoldAlterPartition, ExpireSession):
    cannot_export(_kind, WHY)
