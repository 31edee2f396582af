"""A schedule's `hold-alter-partition` step on real brokers: a broker's AlterPartition
requests held on their way to the controller (faults.filters), put back into its namespace
when it restarts, and released by the `heal` of every cut.

The release proves the hold's effect: where the model says the broker asked for an ISR
change while held, the filter must have dropped its request, else the step did not do
what the schedule says (not reached).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError

from basics.errors import LogforkError, NotReached
from checkers.simulate import Simulator
from faults import filters
from fixtures import config
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from observe.controller import active_controller


@dataclass
class Holds:
    """The brokers whose AlterPartition requests a step holds, each with its filter."""

    cluster: Cluster
    filters: dict[int, filters.Filter] = field(default_factory=dict)

    def held(self) -> set[int]:
        return set(self.filters)

    def hold(self, broker: int, node: Node, *, reaching: bool = True) -> None:
        """Hold every AlterPartition the broker sends to the controller's port: in KRaft the
        voters' (whichever leads), in ZooKeeper mode the brokers' inter-broker listener
        (whichever broker is the controller). `reaching`: the broker is not cut off from
        the controller by a step, so the filter must leave it reaching it."""
        kraft = self.cluster.mode == "kraft"
        port = config.CONTROLLER_PORT if kraft else config.INTERNAL_PORT
        probe = _probe(self.cluster, node) if reaching else None
        self.filters[broker] = filters.hold_api(
            self.cluster, node, port, filters.ALTER_PARTITION, "AlterPartition", probe=probe
        )

    def restore(self, broker: int) -> None:
        """After the broker restarted: its hold goes on in its new namespace."""
        held = self.filters.get(broker)
        if held is not None:
            held.restore()

    def release(self, sim: Simulator | None) -> dict[str, int]:
        """Release every hold; returns the packets each broker's filter dropped. With the
        model beside the brokers, a broker it says asked for an ISR change while held must
        have had a request dropped."""
        dropped: dict[str, int] = {}
        for broker, held in sorted(self.filters.items()):
            held.heal()  # counts what it dropped as it goes
            count = held.dropped()
            dropped[str(broker)] = count
            asked = sim.held_changes.get(broker, []) if sim is not None else []
            if asked and count == 0:
                self.filters.clear()
                raise NotReached(
                    f"broker {broker}'s AlterPartition ({', '.join(asked)}) held",
                    "the filter dropped no AlterPartition request",
                )
        self.filters.clear()
        return dropped


def _probe(cluster: Cluster, node: Node) -> Node | None:
    """A node on the port the hold filters that must stay reachable: the filter holds one
    API, it is no cut."""
    try:
        controller = active_controller(cluster)
    except (LogforkError, NoNodeError):  # no quorum leader recorded; no /controller znode
        return None
    return controller if controller is not node else None
