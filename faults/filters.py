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
import subprocess
from dataclasses import dataclass, field

from basics.errors import NotReached, Refused
from faults.network import (
    RULE_COMMENT,
    defer_removal,
    delete_rules,
    insert_rules,
    listen_port,
    reachable,
)
from fixtures.cluster import Cluster
from fixtures.config import EXTERNAL_PORT
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until

# Bytes 4-5 of a TCP segment's payload: the api key of the Kafka request it starts with
# (a request is int32 size, int16 api key, ...). The first term skips the IP header, the
# second the TCP header; a segment without payload never matches.
U32_API_KEY = "0>>22&0x3C@ 12>>26&0x3C@ 4>>16={:#x}"
ALTER_PARTITION = 56  # AlterIsr before 3.2 (KIP-497), AlterPartition since (KIP-841)
END_TXN = 26  # a transactional producer's commit or abort, to its coordinator (KIP-98)
ASSIGN_REPLICAS_TO_DIRS = 73  # KIP-858: a broker reports which log dir holds a replica


@dataclass
class Filter:
    cluster: Cluster
    node: Node  # whose namespace holds the rule
    peer: Node | None  # a node the filter must not cut `node` off from (None: no probe)
    match: list[str]  # the rule without its comment and target
    what: str
    # Rules (with their targets) evaluated before the drop, to mark what it drops
    marks: list[list[str]] = field(default_factory=list)
    rules: list[list[str]] = field(default_factory=list)
    tag: str = field(default_factory=lambda: f"{RULE_COMMENT}-filter-{secrets.token_hex(3)}")
    healed: bool = False
    _dropped: int = 0
    _earlier: int = 0  # dropped by the rules of the node's earlier incarnations
    _incarnation: str | None = None

    def inject(self) -> Filter:
        spec = [*self.match, "-m", "comment", "--comment", self.tag, "-j", "DROP"]
        # Each insert goes first in its chain: the marks end up before the drop.
        self.rules = insert_rules(self.node, [spec, *self.marks])
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
            raise Refused(f"could not remove rules in {self.node.name}: {'; '.join(failed)}")
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


def hold_first_client_request(cluster: Cluster, node: Node, api_key: int, name: str) -> Filter:
    """Hold the first request of one API that a client outside the cluster sends `node`,
    and everything after it on that connection; the client's retry, on a new connection,
    passes. Once healed, the held request arrives late, as it was sent: the host keeps
    retransmitting it after the client gave up on its connection (the engine's userland
    proxy holds the other end; `await_held_delivered` proves it).

    The first packet of that API is marked by its connection (an nth statistic that
    matches once), and the drop takes the marked connection's packets."""
    mark = f"{0x17540000 | secrets.randbelow(0xFFFF):#x}"
    port = ["-p", "tcp", "--dport", str(EXTERNAL_PORT)]
    once = ["-m", "statistic", "--mode", "nth", "--every", "1000000000", "--packet", "0"]
    first = ["-m", "u32", "--u32", U32_API_KEY.format(api_key), *once]
    marking = [
        "INPUT", *port, *first, "-m", "comment", "--comment", f"{RULE_COMMENT}-mark-{mark}",
        "-j", "CONNMARK", "--set-mark", mark,
    ]  # fmt: skip
    what = f"a client's first {name} request to {node.name} held, with its connection"
    match = ["INPUT", *port, "-m", "connmark", "--mark", mark]
    return Filter(cluster, node, None, match, what, marks=[marking]).inject()


def held_in_flight(node: Node) -> int:
    """Bytes the host still holds unacknowledged, on connections closed on its side, for
    `node`'s client listener (`ss`, state FIN-WAIT-1): a held request whose sender gave up
    on it, not yet delivered. The engine's userland proxy connects to the node's address;
    without it (NAT) the client's own socket is to the published port."""
    total = 0
    for dst in (f"{node.address}:{EXTERNAL_PORT}", f"127.0.0.1:{node.published[EXTERNAL_PORT]}"):
        out = subprocess.run(
            ["ss", "-Htn", "state", "fin-wait-1", "dst", dst],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        total += sum(int(line.split()[1]) for line in out.splitlines() if line.split())  # Send-Q
    return total


# Linux's TCP_RTO_MAX: a segment dropped for minutes is retransmitted at a timer that has
# backed off exponentially up to it, so the next try after a heal may be that far away.
TCP_RTO_MAX = 120.0


def await_held_delivered(filt: Filter, what: str, *, timeout: float = TCP_RTO_MAX + 30) -> None:
    """After `filt` healed: wait until nothing the host held for its node is left
    unacknowledged, so that the late request has reached the node's process. (4.4.0
    explore: a request held for 147 s was still in flight 70 s after the heal.)"""
    try:
        wait_until(lambda: held_in_flight(filt.node), lambda n: n == 0, what=what, timeout=timeout)
    except WaitTimeout as exc:
        raise NotReached(what, f"{exc.last} bytes still in flight") from None
