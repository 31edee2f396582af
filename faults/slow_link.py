"""A slow link: what one node sends to another is shaped to a low rate (tc, an HTB class
with a u32 filter on the peer's address, in the sender's network namespace), while the rest
of its traffic flows at full speed.

Unlike a cut, nothing is lost: a response goes out in full, only late. A broker writes a
fetch response's log slices to the socket as the link drains (FileRecords.writeTo reads the
file at each write), so on a slow link what a follower receives is read from the leader's
log seconds after the leader answered: the window of KAFKA-18723.

The kernel's own account of the slow class proves the shaping is in place when it is set
up; the heal records what the class sent and how often it held packets back (`tc -s`), in
the timeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from basics.errors import LogforkError, NotReached, Refused
from fixtures.cluster import Cluster
from fixtures.nodes import Node
from fixtures.waiting import WaitTimeout, wait_until

DEVICE = "eth0"  # a node's one interface, on the cluster's network
SLOW_CLASS = "1:20"
# The HTB class everything else goes through: far above what the bridge carries, so it
# shapes nothing.
FAST_RATE = "10gbit"


@dataclass(frozen=True)
class Shaped:
    """What the slow class let through: bytes sent, and how often it held packets back."""

    bytes_sent: int
    overlimits: int


@dataclass
class SlowLink:
    """`node`'s traffic to `peer` shaped to `kbytes_per_second`."""

    cluster: Cluster
    node: Node
    peer: Node
    kbytes_per_second: int
    installed: bool = False
    healed: bool = False
    _incarnation: str | None = None  # the sender's start the shaping went into

    def describe(self) -> str:
        return f"{self.node.name} --{self.kbytes_per_second}KB/s-> {self.peer.name}"

    def _tc(self, *args: str) -> str:
        result = self.node.exec(["tc", *args])
        if result.exit_code != 0:
            raise Refused(f"tc in {self.node.name} refused {' '.join(args)}: {result.output}")
        return result.output

    def inject(self) -> SlowLink:
        rate = f"{self.kbytes_per_second * 8}kbit"
        peer_ip = self.peer.ip(self.cluster.network_name)
        self._tc("qdisc", "add", "dev", DEVICE, "root", "handle", "1:", "htb", "default", "10")
        self.installed, self._incarnation = True, self.node.started_at()
        try:
            root = ["dev", DEVICE, "parent", "1:"]
            self._tc("class", "add", *root, "classid", "1:10", "htb", "rate", FAST_RATE)
            capped = ["htb", "rate", rate, "ceil", rate]
            self._tc("class", "add", *root, "classid", SLOW_CLASS, *capped)
            match = ["u32", "match", "ip", "dst", f"{peer_ip}/32", "flowid", SLOW_CLASS]
            self._tc("filter", "add", *root, "protocol", "ip", "prio", "1", *match)
            # The kernel's own account of the class proves the shaping is in place.
            shown = self._tc("class", "show", "dev", DEVICE, "classid", SLOW_CLASS)
            if "rate" not in shown:
                raise Refused(f"tc in {self.node.name} shows no slow class: {shown!r}")
        except LogforkError:
            self._remove()
            raise
        self.cluster.timeline.record("fault", "slow", link=self.describe())
        return self

    def _present(self) -> bool:
        """Whether the shaping is still in the sender's namespace: a stopped or restarted
        sender took it with its old namespace, until `restore` shapes again)."""
        running = self.node.status() == "running"
        return self.installed and running and self.node.started_at() == self._incarnation

    def shaped(self) -> Shaped:
        """The slow class's counters so far (nothing, if the node's namespace went)."""
        return self._counters() if self._present() else Shaped(0, 0)

    def _counters(self) -> Shaped:
        out = self._tc("-s", "class", "show", "dev", DEVICE, "classid", SLOW_CLASS)
        sent = re.search(r"Sent (\d+) bytes", out)
        over = re.search(r"overlimits (\d+)", out)
        return Shaped(int(sent.group(1)) if sent else 0, int(over.group(1)) if over else 0)

    def _remove(self) -> None:
        if self._present():
            self._tc("qdisc", "del", "dev", DEVICE, "root")
        self.installed = False

    def restore(self) -> None:
        """Shape again in a restarted sender's new namespace (the old one took the qdisc
        with it), so that the link stays slow until its heal; a restarted receiver keeps its
        address, which the filter matches."""
        if self.healed or self._present() or self.node.status() != "running":
            return
        self.installed = False
        self.inject()

    def in_flight(self) -> int:
        """Bytes still between the two on their connections: what the sender has not yet
        sent or had acknowledged (its Send-Q), and what the receiver's kernel holds that its
        broker has not read (its Recv-Q)."""
        return _queued(self.node, self.peer, self.cluster, 2) + _queued(
            self.peer, self.node, self.cluster, 1
        )

    def heal(self) -> None:
        """Lift the shaping, recording what it shaped meanwhile, and let what the link held
        back arrive: a fetch response still in flight reaches a running receiver, and its
        broker reads it, before anything else is healed (a heal of every cut lifts slow
        links first). Otherwise a follower cut off from the quorum would race the response
        against the news of a new leader as both cuts heal, which on 3.9.0 the news won."""
        if self.healed:
            return
        if self.node.status() == "paused":
            # docker runs nothing in a frozen container, and the qdisc would outlive the
            # heal unseen.
            raise NotReached(f"{self.describe()} lifted", f"{self.node.name} is paused")
        present = self._present()
        shaped = self._counters() if present else Shaped(0, 0)
        if present:
            self._tc("qdisc", "del", "dev", DEVICE, "root")
        self.installed, self.healed = False, True
        left = self._drain() if present and self.peer.status() == "running" else None
        self.cluster.timeline.record(
            "heal",
            "slow",
            link=self.describe(),
            bytes=shaped.bytes_sent,
            held=shaped.overlimits,
            in_flight_after=left,
        )

    def _drain(self) -> int:
        """Wait for what was in flight to arrive and be read; the bytes left, should the
        receiver stop reading (0 once drained)."""
        try:
            wait_until(
                self.in_flight,
                lambda left: left == 0,
                what=f"what {self.describe()} held back arriving",
                timeout=DRAIN_TIMEOUT,
                interval=0.1,
                max_interval=0.5,
            )
        except WaitTimeout as exc:
            return int(exc.last or 0)
        return 0


# A held-back response drains at the bridge's speed once the shaping is lifted: well under
# a second for the fillers schedules write.
DRAIN_TIMEOUT = 10.0


def _queued(node: Node, peer: Node, cluster: Cluster, column: int) -> int:
    """The sum of one queue column of `ss` (1: Recv-Q, 2: Send-Q) over `node`'s TCP
    connections to `peer`, in `node`'s namespace; 0 where the node does not run."""
    if node.status() != "running":
        return 0
    peer_ip = peer.ip(cluster.network_name)
    result = node.exec(["ss", "-tnH", "dst", peer_ip])
    if result.exit_code != 0:
        raise Refused(f"ss in {node.name} refused: {result.output}")
    return queued(result.output, column)


def queued(ss_output: str, column: int) -> int:
    """The sum of a queue column over the lines `ss -tnH` printed (state, Recv-Q, Send-Q,
    local address, peer address)."""
    total = 0
    for line in ss_output.splitlines():
        fields = line.split()
        if len(fields) > column and fields[column].isdigit():
            total += int(fields[column])
    return total


def slow(cluster: Cluster, node: Node, peer: Node, kbytes_per_second: int) -> SlowLink:
    """Shape what `node` sends to `peer` to `kbytes_per_second`."""
    return SlowLink(cluster, node, peer, kbytes_per_second).inject()
