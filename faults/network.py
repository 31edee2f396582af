"""Network cuts: iptables DROP rules inside a node's own network namespace.

DROP, not REJECT: packets vanish as they do when a switch or link fails, so TCP connections
hang until their timeouts fire instead of failing fast. Rules match the peer's address on
the cluster network, so traffic from the host's clients (which arrives from the network's
gateway) is untouched unless a cut names it.

Each cut is verified with a TCP probe between the nodes (a timeout means cut; a connection,
or a refusal, means reachable), and `heal` deletes exactly the rules the cut added.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from basics.errors import LogforkError, NotReached, Refused
from fixtures import config
from fixtures.cluster import Cluster
from fixtures.nodes import Node

PROBE_SECONDS = 1  # a connection across the bridge takes milliseconds; a dropped SYN never
# Proving a cut waits out the whole probe (the SYN is dropped), on every cut a scenario or
# schedule makes; half a second is still a hundred times what a handshake takes here.
CUT_PROBE_SECONDS = 0.5
# A heal's handshake through a slow link left in place (seen on 3.9.2: 10 KB/s, behind a
# filler's fetch response).
SHAPED_PROBE_SECONDS = 60.0
RULE_COMMENT = "logfork"


def listen_port(node: Node) -> int:
    if node.role.name == "zookeeper":
        return config.ZK_PORT
    if node.role.name == "controller":
        return config.CONTROLLER_PORT
    return config.INTERNAL_PORT


def reachable(cluster: Cluster, src: Node, dst: Node, seconds: float = PROBE_SECONDS) -> bool:
    """Can a TCP handshake from src to dst complete (or be refused) within `seconds`?"""
    return _connects(src, dst.ip(cluster.network_name), listen_port(dst), seconds)


def _connects(src: Node, address: str, port: int, seconds: float) -> bool:
    """Does a TCP handshake from src to address:port complete (or get refused) in time?"""
    script = f"exec 3<>/dev/tcp/{address}/{port}"
    result = src.exec(["timeout", str(seconds), "bash", "-c", script])
    # Refused (RST) still proves the path works: the peer's kernel answered. A timeout, or
    # "no route to host", does not.
    return result.exit_code == 0 or "Connection refused" in result.output


def insert_rules(node: Node, specs: list[list[str]]) -> list[list[str]]:
    """Insert iptables rules in the node's namespace; all of them or, on a refusal, none."""
    done: list[list[str]] = []
    for spec in specs:
        result = node.exec(["iptables", "-I", *spec])
        if result.exit_code != 0:
            delete_rules(node, done)
            raise Refused(
                f"iptables in {node.name} refused {' '.join(spec)}: {result.output.strip()}"
            )
        done.append(spec)
    return done


def delete_rules(node: Node, rules: list[list[str]]) -> list[str]:
    """Delete the rules (removing each from `rules`); returns the deletions that failed."""
    failed: list[str] = []
    status = node.status()
    if status == "paused":
        # Its namespace, and the rules, are intact; docker runs nothing in a frozen node.
        return [f"{' '.join(spec)}: {node.name} is paused" for spec in rules]
    if status != "running":
        # A node that was killed meanwhile took its namespace, and the rules, with it;
        # a restarted one starts with a fresh namespace.
        rules.clear()
        return failed
    for spec in list(rules):
        result = node.exec(["iptables", "-D", *spec])
        if result.exit_code == 0:
            rules.remove(spec)
        else:
            failed.append(f"{' '.join(spec)}: {result.output.strip()}")
    return failed


@dataclass
class LinkCut:
    """Rules on `node` that drop its traffic with `peers` in the given directions."""

    cluster: Cluster
    node: Node
    peers: list[Node]
    inbound: bool  # packets from peers do not arrive at node
    outbound: bool  # packets from node do not arrive at peers
    port: int | None = None  # with no peers: drop whatever arrives on this port
    # Also drop the same traffic in each peer's namespace, so that the cut outlives a
    # restart of either end (a container's rules go with its namespace; addresses are
    # fixed, so rules against a node hold across its restarts).
    mirror: bool = False
    rules: list[list[str]] = field(default_factory=list)  # in node's namespace
    mirrored: list[tuple[Node, list[str]]] = field(default_factory=list)  # in peers'
    healed: bool = False
    _incarnations: dict[str, str | None] = field(default_factory=dict)  # node -> StartedAt

    def describe(self) -> str:
        if self.port is not None:
            return f"{self.node.name}:{self.port} <-x- everyone"
        arrow = {(True, True): "<-x->", (True, False): "<-x--", (False, True): "--x->"}
        names = ",".join(p.name for p in self.peers)
        return f"{self.node.name} {arrow[(self.inbound, self.outbound)]} {names}"

    def _rule_specs(self) -> list[tuple[Node, list[str]]]:
        tag = ["-m", "comment", "--comment", RULE_COMMENT]
        if self.port is not None:
            return [
                (self.node, ["INPUT", "-p", "tcp", "--dport", str(self.port), *tag, "-j", "DROP"])
            ]
        specs = []
        here = self.node.ip(self.cluster.network_name)
        for peer in self.peers:
            ip = peer.ip(self.cluster.network_name)
            if self.inbound:
                specs.append((self.node, ["INPUT", "-s", ip, *tag, "-j", "DROP"]))
            if self.outbound:
                specs.append((self.node, ["OUTPUT", "-d", ip, *tag, "-j", "DROP"]))
            if self.mirror and peer.status() == "running":
                if self.inbound:
                    specs.append((peer, ["OUTPUT", "-d", here, *tag, "-j", "DROP"]))
                if self.outbound:
                    specs.append((peer, ["INPUT", "-s", here, *tag, "-j", "DROP"]))
        return specs

    def _install(self, node: Node, spec: list[str]) -> None:
        try:
            insert_rules(node, [spec])
        except LogforkError:
            self._remove_rules()  # what this cut installed in other namespaces already
            raise
        self._incarnations.setdefault(node.name, node.started_at())
        if node is self.node:
            self.rules.append(spec)
        else:
            self.mirrored.append((node, spec))

    def inject(self) -> LinkCut:
        # When the first rule went in: under load, installing every rule and proving the cut
        # take seconds, and the cut acts from its first rule (explore's clock, actions.py).
        effective: float | None = None
        for node, spec in self._rule_specs():
            self._install(node, spec)
            effective = effective if effective is not None else time.monotonic()
        self._verify_cut()
        self.cluster.timeline.record(
            "fault",
            "cut",
            cut=self.describe(),
            rules=len(self.rules) + len(self.mirrored),
            effective_mono=effective,
        )
        return self

    def _verify_cut(self) -> None:
        if self.port is not None:
            self._verify_port_cut()
        # TCP needs packets both ways, so any cut direction shows as a failed handshake.
        for peer in self.peers:
            both_up = peer.status() == "running" and self.node.status() == "running"
            if both_up and reachable(self.cluster, self.node, peer, CUT_PROBE_SECONDS):
                self._remove_rules()
                raise NotReached(
                    f"{self.describe()} cut", f"{self.node.name} still reaches {peer.name}"
                )

    def restore(self) -> None:
        """Put back the rules a restarted end lost with its old namespace (a mirrored cut
        stays in force meanwhile, from the other end), and check the cut again."""
        if self.healed:
            return
        self._forget_lost_rules()
        have = {(n.name, tuple(spec)) for n, spec in self._held()}
        missing = [
            (n, spec)
            for n, spec in self._rule_specs()
            if (n.name, tuple(spec)) not in have and n.status() == "running"
        ]
        for node, spec in missing:
            self._incarnations.pop(node.name, None)
            self._install(node, spec)
        if missing:
            self._verify_cut()
            self.cluster.timeline.record("fault", "cut-restored", cut=self.describe())

    def _verify_port_cut(self) -> None:
        probe = next(
            (
                n
                for n in self.cluster.nodes.values()
                if n is not self.node and n.status() == "running"
            ),
            None,
        )
        if probe is None:
            return
        if _connects(probe, self.node.address, self.port, CUT_PROBE_SECONDS):
            self._remove_rules()
            raise NotReached(f"{self.describe()} cut", f"{probe.name} still connects")

    def _held(self) -> list[tuple[Node, list[str]]]:
        return [(self.node, spec) for spec in self.rules] + list(self.mirrored)

    def _lost(self, node: Node) -> bool:
        """Whether the node's rules went with it: it is stopped, or it runs in a new
        namespace (it was restarted since they were installed). A paused node keeps its
        namespace and its rules (`_defer_frozen`)."""
        if node.status() not in ("running", "paused"):
            return True
        return node.started_at() != self._incarnations.get(node.name)

    def _forget_lost_rules(self) -> None:
        lost = {n.name for n, _ in self._held() if self._lost(n)}
        if self.node.name in lost:
            self.rules.clear()
        self.mirrored = [(n, spec) for n, spec in self.mirrored if n.name not in lost]
        for name in lost:
            self._incarnations.pop(name, None)

    def _defer_frozen(self) -> None:
        """Hand the rules of a frozen end to `remove_deferred` (`defer_removal`)."""
        for name, node in {n.name: n for n, _ in self._held()}.items():
            if node.status() != "paused":
                continue
            defer_removal(node, [spec for n, spec in self._held() if n.name == name])
            if node is self.node:
                self.rules.clear()
            self.mirrored = [(n, spec) for n, spec in self.mirrored if n.name != name]

    def _remove_rules(self) -> list[str]:
        """Delete the rules still held (`delete_rules`, per namespace); returns the
        deletions that failed, each naming its node."""
        self._forget_lost_rules()
        failed = [f"{self.node.name}: {f}" for f in delete_rules(self.node, self.rules)]
        kept: list[tuple[Node, list[str]]] = []
        for peer in {n.name: n for n, _ in self.mirrored}.values():
            specs = [spec for n, spec in self.mirrored if n.name == peer.name]
            failed += [f"{peer.name}: {f}" for f in delete_rules(peer, specs)]
            kept += [(peer, spec) for spec in specs]
        self.mirrored = kept
        return failed

    def heal(self, *, shaped: bool = False) -> None:
        """Lift the rules, proven by a handshake from each end; `shaped`: a slow link
        shapes the pair, and the handshake's packets queue behind what it holds back."""
        if self.healed:
            return
        patience = SHAPED_PROBE_SECONDS if shaped else PROBE_SECONDS
        self._defer_frozen()
        failed = self._remove_rules()
        if failed:
            raise Refused(f"could not remove iptables rules: {'; '.join(failed)}")
        self.healed = True
        for peer in self.peers:
            both_up = peer.status() == "running" and self.node.status() == "running"
            if both_up and not reachable(self.cluster, self.node, peer, patience):
                raise NotReached(
                    f"{self.describe()} healed", f"{self.node.name} still cannot reach {peer.name}"
                )
        self.cluster.timeline.record("heal", "cut", cut=self.describe())

    def __enter__(self) -> LinkCut:
        return self.inject() if not self.rules else self

    def __exit__(self, *exc: object) -> None:
        self.heal()


# Rules a heal left in a paused node's namespace, by container: (the namespace's start,
# the rules). They go as the node resumes (faults.process.resume).
_DEFERRED: dict[str, tuple[str | None, list[list[str]]]] = {}


def defer_removal(node: Node, specs: list[list[str]]) -> None:
    """Remove a frozen node's rules as it resumes (`remove_deferred`): docker runs nothing
    in a paused node, and a frozen node sends and takes no packet, so they go before it
    does anything."""
    held = _DEFERRED.setdefault(node.container_name, (node.started_at(), []))[1]
    held.extend(specs)


def remove_deferred(node: Node) -> None:
    """Remove the rules a heal left while the node was frozen (it runs again now); those of
    a namespace that has gone since (the node was killed) went with it."""
    since, held = _DEFERRED.pop(node.container_name, (None, []))
    if not held or node.started_at() != since:
        return
    failed = delete_rules(node, held)
    if failed:
        raise Refused(f"could not remove iptables rules from {node.name}: {'; '.join(failed)}")


def partition(
    cluster: Cluster,
    a: Node,
    b: Node | list[Node],
    *,
    one_way: bool = False,
    mirror: bool = False,
) -> LinkCut:
    """Cut a from b. Both directions by default; `one_way` drops only what b sends to a.
    `mirror`: the rules also go into b's namespace, so the cut survives a restart of a."""
    peers = b if isinstance(b, list) else [b]
    return LinkCut(cluster, a, peers, inbound=True, outbound=not one_way, mirror=mirror).inject()


def isolate(
    cluster: Cluster,
    node: Node,
    from_: list[Node] | None = None,
    *,
    mirror: bool = False,
) -> LinkCut:
    """Cut a node from the given nodes (default: every other node of the cluster)."""
    peers = from_ if from_ is not None else [n for n in cluster.nodes.values() if n is not node]
    return LinkCut(cluster, node, peers, inbound=True, outbound=True, mirror=mirror).inject()


def cut_clients(cluster: Cluster, node: Node) -> LinkCut:
    """Cut a broker off from every client: its client listener drops all traffic, while
    inter-broker and controller traffic flow as before. A client can then only reach the
    leaders the scenario means it to reach."""
    return LinkCut(
        cluster,
        node,
        [],
        inbound=True,
        outbound=False,
        port=config.EXTERNAL_PORT,
    ).inject()


def rules_in(node: Node) -> list[str]:
    """Every logfork rule still present in a node's namespace (for leak checks)."""
    if node.status() != "running":
        return []
    out = node.exec(["iptables", "-S"]).output
    return [line for line in out.splitlines() if RULE_COMMENT in line]
