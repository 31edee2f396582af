"""Packet filters: drop some of the packets between two nodes, not all of them.

A cut (`faults.network`) drops everything; a filter drops only the packets it matches, so
that one kind of request is held back, or one peer's large responses are lost, while the
rest of the conversation goes on. TCP delivers in order and retransmits what was dropped:
a held request stalls its connection until the filter is healed, then arrives, late, with
the content it had when it was sent. That is how a delayed AlterPartition is made (KIP-903).

Every filter counts the packets it dropped (iptables' own counters): a scenario proves
with them that the filter met the traffic it was meant for. `heal` deletes exactly the rule
the filter added.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from faults.network import (
    RULE_COMMENT,
    defer_removal,
    delete_rules,
    insert_rules,
    listen_port,
    reachable,
)
from fixtures.cluster import Cluster
from fixtures.errors import LogforkError, NotReached
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until

# Bytes 4-5 of a TCP segment's payload: the api key of the Kafka request it starts with
# (a request is int32 size, int16 api key, ...). The first term skips the IP header, the
# second the TCP header; a segment without payload never matches.
U32_API_KEY = "0>>22&0x3C@ 12>>26&0x3C@ 4>>16={:#x}"
ALTER_PARTITION = 56  # AlterIsr before 3.2 (KIP-497), AlterPartition since (KIP-841)
ASSIGN_REPLICAS_TO_DIRS = 73  # KIP-858: a broker reports which log dir holds a replica


@dataclass
class Filter:
    cluster: Cluster
    node: Node  # whose namespace holds the rule
    peer: Node | None  # a node the filter must not cut `node` off from (None: no probe)
    match: list[str]  # the rule without its comment and target
    what: str
    rules: list[list[str]] = field(default_factory=list)
    tag: str = field(default_factory=lambda: f"{RULE_COMMENT}-filter-{secrets.token_hex(3)}")
    healed: bool = False
    _dropped: int = 0
    _earlier: int = 0  # dropped by the rules of the node's earlier incarnations
    _incarnation: str | None = None

    def inject(self) -> Filter:
        spec = [*self.match, "-m", "comment", "--comment", self.tag, "-j", "DROP"]
        self.rules = insert_rules(self.node, [spec])
        self._incarnation = self.node.started_at()
        # A filter is not a cut: the two nodes must still reach each other.
        peer = self.peer
        if (
            peer is not None
            and peer.status() == "running"
            and not reachable(self.cluster, self.node, peer)
        ):
            self.heal()
            raise NotReached(
                f"{self.what}, with {self.node.name} still reaching {peer.name}",
                f"{self.node.name} cannot reach {peer.name}",
            )
        self.cluster.timeline.record("fault", "filter", node=self.node.name, filter=self.what)
        return self

    def dropped(self) -> int:
        """Packets the rule has dropped so far, in every incarnation of the node (the last
        count while the node is down)."""
        node = self.node
        if self.rules and node.status() == "running" and node.started_at() == self._incarnation:
            chain = self.match[0]
            out = self.node.exec(["iptables", "-L", chain, "-v", "-x", "-n"]).output
            for line in out.splitlines():
                if self.tag in line and line.split()[0].isdigit():
                    self._dropped = int(line.split()[0])
        return self._earlier + self._dropped

    def restore(self) -> None:
        """Put the rule back into a node that was restarted (its old namespace took the
        rule with it), counting what the old one dropped."""
        if self.healed or self.node.started_at() == self._incarnation:
            return
        self._earlier += self._dropped
        self._dropped = 0
        self.rules = []
        self.inject()
        self.cluster.timeline.record("fault", "filter-restored", filter=self.what)

    def await_dropped(self, what: str, *, timeout: float = 60.0) -> int:
        """Wait until the filter has dropped something: proof that `what` happened."""
        try:
            return wait_until(self.dropped, lambda n: n > 0, what=what, timeout=timeout)
        except WaitTimeout:
            raise NotReached(f"{what} ({self.what} dropping it)", "no packet dropped") from None

    def heal(self) -> None:
        if self.healed:
            return
        self.dropped()
        if self.node.started_at() != self._incarnation:
            self.rules = []  # they went with the namespace of an earlier incarnation
        elif self.node.status() == "paused":
            # A frozen node sends nothing: its rule goes as it resumes (faults.process).
            defer_removal(self.node, self.rules)
            self.rules = []
        failed = delete_rules(self.node, self.rules)
        if failed:
            raise LogforkError(f"could not remove rules in {self.node.name}: {'; '.join(failed)}")
        self.healed = True
        self.cluster.timeline.record(
            "heal", "filter", node=self.node.name, filter=self.what, dropped=self._dropped
        )

    def __enter__(self) -> Filter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()


def hold_requests(
    cluster: Cluster, node: Node, to: Node, api_key: int, name: str, *, at_receiver: bool = False
) -> Filter:
    """Hold `node`'s requests of one API to `to` (name: the API's, for the record). Held,
    not lost: they reach `to` once the filter is healed. The rule lives in `node`'s
    namespace, or in `to`'s (`at_receiver`), which outlives a `node` that restarts."""
    port = ["-p", "tcp", "--dport", str(listen_port(to))]
    u32 = ["-m", "u32", "--u32", U32_API_KEY.format(api_key)]
    what = f"{node.name}'s {name} requests to {to.name} held"
    if at_receiver:
        return Filter(cluster, to, node, ["INPUT", "-s", node.address, *port, *u32], what).inject()
    return Filter(cluster, node, to, ["OUTPUT", "-d", to.address, *port, *u32], what).inject()


def hold_api(
    cluster: Cluster, node: Node, port: int, api_key: int, name: str, *, probe: Node | None
) -> Filter:
    """Hold every request of one API that `node` sends to `port` on any node (name: the
    API's, for the record): the controller's port, wherever the controller is or moves.
    `probe`: a node on that port that must stay reachable."""
    match = ["OUTPUT", "-p", "tcp", "--dport", str(port)]
    match += ["-m", "u32", "--u32", U32_API_KEY.format(api_key)]
    what = f"{node.name}'s {name} requests held"
    return Filter(cluster, node, probe, match, what).inject()


def drop_large(cluster: Cluster, node: Node, from_: Node, at_least: int) -> Filter:
    """Drop every packet of `at_least` bytes or more that `from_` sends to `node`: its large
    responses (records) are lost, its small ones (handshakes, empty answers) arrive."""
    match = ["INPUT", "-s", from_.address, "-p", "tcp", "-m", "length"]
    match += ["--length", f"{at_least}:65535"]
    what = f"packets of {at_least}+ bytes from {from_.name} to {node.name} dropped"
    return Filter(cluster, node, from_, match, what).inject()
