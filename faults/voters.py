"""The KRaft quorum's membership on real controllers (KIP-853): a controller added to the
voters or removed from them through Kafka's own `kafka-metadata-quorum`, and a voter's
metadata disk lost. Each proves its effect twice: in DescribeQuorum's answer, and in the
VotersRecord the quorum leader's metadata log holds.

The tool lives in the kafka-tools jar (fixtures.tools.metadata_quorum), put into a node's
container the first time it runs there. `add-controller` runs on the controller that joins:
it takes the node's id, advertised controller listener and directory id from its own config
and storage, as an operator runs it.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from basics.errors import LogforkError, NotReached, NotYet
from faults import network, process
from faults.controller import await_successor
from fixtures import config
from fixtures.cluster import Cluster
from fixtures.node_configs import write_node_config
from fixtures.nodes import Node
from fixtures.tools import ToolClasspath, metadata_quorum
from fixtures.waiting import WaitTimeout, wait_until
from observe import kraft
from observe.controller import active_controller

TOOLS_DIR = "/tmp/logfork-tools"  # in the container: where the kafka-tools jar goes
HEAP = "-Xmx96m"
TOOL_SECONDS = 60  # one run of the tool, at most
CHANGE_TIMEOUT = 90.0  # a change retried until the quorum takes it, then not reached


@dataclass(frozen=True)
class QuorumView:
    """DescribeQuorum's answer (`describe --status`): voters and observers by id, each with
    its directory id."""

    leader_id: int
    leader_epoch: int
    voters: dict[int, str] = field(default_factory=dict)
    observers: dict[int, str] = field(default_factory=dict)


def parse_status(text: str) -> QuorumView:
    """`kafka-metadata-quorum describe --status` output, as 3.9 and 4.x print it."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("LeaderId", "LeaderEpoch", "CurrentVoters", "CurrentObservers"):
            values[key.strip()] = value.strip()
    if "LeaderId" not in values or "CurrentVoters" not in values:
        raise NotYet(f"DescribeQuorum gave no status: {text.strip()[-300:]}")

    def members(key: str) -> dict[int, str]:
        return {int(m["id"]): m.get("directoryId", "") for m in json.loads(values.get(key, "[]"))}

    return QuorumView(
        int(values["LeaderId"]),
        int(values.get("LeaderEpoch", "-1")),
        members("CurrentVoters"),
        members("CurrentObservers"),
    )


class QuorumTool:
    """kafka-metadata-quorum of the cluster's release, run in its nodes' containers."""

    def __init__(self, cluster: Cluster) -> None:
        assert cluster.dist is not None, "cluster not started"
        self.cluster = cluster
        self.tool: ToolClasspath = metadata_quorum(cluster.dist)
        self._has_jars: set[str] = set()

    def run(self, node: Node, *args: str, bootstrap: list[Node]) -> str:
        """The tool's output; raises NotYet with it when the tool failed (a change the quorum
        cannot take yet, a leader being elected)."""
        if node.name not in self._has_jars and self.tool.extra_jars:
            parent, name = TOOLS_DIR.rsplit("/", 1)
            if not node.docker.put_archive(parent, self.tool.extra_jars_tar(name)):
                raise LogforkError(f"could not copy kafka-tools into {node.name}")
            self._has_jars.add(node.name)
        servers = ",".join(f"{n.name}:{config.CONTROLLER_PORT}" for n in bootstrap)
        cmd = [
            "timeout", str(TOOL_SECONDS), "java", HEAP,
            "-cp", self.tool.container_classpath(config.LIBS_DIR, TOOLS_DIR), self.tool.main,
            "--bootstrap-controller", servers, *args,
        ]  # fmt: skip
        result = node.exec(cmd)
        if result.exit_code != 0:
            raise NotYet(f"{shlex.join(args)} on {node.name}: {result.output.strip()[-400:]}")
        return result.output

    def describe(self, via: Node, bootstrap: list[Node]) -> QuorumView:
        return parse_status(self.run(via, "describe", "--status", bootstrap=bootstrap))


_TOOLS: dict[str, QuorumTool] = {}


def quorum_tool(cluster: Cluster) -> QuorumTool:
    tool = _TOOLS.get(cluster.run_id)
    if tool is None:
        tool = _TOOLS[cluster.run_id] = QuorumTool(cluster)
    return tool


def reachable_voters(cluster: Cluster, cuts: dict[str, network.LinkCut]) -> list[Node]:
    """The voters a tool can reach: running, not cut off, not an incarnation that is gone."""
    return [
        n
        for n in cluster.voter_nodes
        if n.status() == "running" and n.name not in cuts and not cluster.voter_gone(n)
    ]


def _asker(cluster: Cluster, cuts: dict[str, network.LinkCut]) -> Node:
    for node in reachable_voters(cluster, cuts) + cluster.controllers:
        if node.status() == "running" and node.name not in cuts:
            return node
    raise NotReached("a running controller to ask the quorum", "none runs")


def _until(what: str, attempt: Callable[[], bool]) -> None:
    """Run `attempt` (it raises NotYet while the quorum cannot take the change) until it
    returns True; not reached after CHANGE_TIMEOUT."""
    try:
        wait_until(attempt, lambda done: done is True, what=what, timeout=CHANGE_TIMEOUT)
    except WaitTimeout as exc:
        raise NotReached(what, str(exc.last)) from None


def _in_log(cluster: Cluster, voter_id: int, directory: str, present: bool) -> bool:
    """Whether the quorum leader's metadata log's last voter set holds (or lacks) the voter."""
    voters = kraft.voter_set(active_controller(cluster))
    if voters is None:
        raise NotYet("the leader's metadata log holds no voter set")
    held = any(v.voter_id == voter_id and v.directory_id == directory for v in voters.voters)
    return held == present


def add_voter(cluster: Cluster, node: Node, cuts: dict[str, network.LinkCut]) -> dict[str, object]:
    """`add-controller` on `node` (a controller that does not vote), proven by the voter
    set DescribeQuorum gives and the leader's log records."""
    tool = quorum_tool(cluster)
    directory = kraft.directory_id(node)
    if directory is None:
        raise NotReached(f"{node.name} formatted", "no meta.properties")
    server = f"{config.CONFIG_DIR}/server.properties"
    added: list[bool] = []

    def attempt() -> bool:
        bootstrap = reachable_voters(cluster, cuts)
        if not added:
            tool.run(node, "--command-config", server, "add-controller", bootstrap=bootstrap)
            added.append(True)
        view = tool.describe(_asker(cluster, cuts), bootstrap)
        if view.voters.get(node.node_id) != directory:  # type: ignore[arg-type]
            raise NotYet(f"voters {view.voters}")
        return _in_log(cluster, node.node_id, directory, present=True)  # type: ignore[arg-type]

    _until(f"{node.name} ({node.node_id}, {directory}) among the voters", attempt)
    cluster.voter_dirs[node.name] = node.directory_id = directory
    cluster.timeline.record("fault", "add-voter", node=node.name, directory_id=directory)
    return {"controller": node.name, "directory_id": directory}


def remove_voter(
    cluster: Cluster, node: Node, cuts: dict[str, network.LinkCut]
) -> dict[str, object]:
    """`remove-controller` of `node`'s voting incarnation (its id and the directory id the
    voter set holds), run from a voter the change does not remove; proven as `add_voter`'s
    is, and by another leader once a leader removed itself (it resigns, KIP-853)."""
    tool = quorum_tool(cluster)
    directory = cluster.voter_dirs[node.name]
    assert directory is not None, "a static quorum's voters are not removed"
    leader = active_controller(cluster)
    removed: list[bool] = []

    def attempt() -> bool:
        bootstrap = [n for n in reachable_voters(cluster, cuts) if n is not node] or [node]
        if not removed:
            tool.run(
                _asker(cluster, cuts), "remove-controller",
                "--controller-id", str(node.node_id), "--controller-directory-id", directory,
                bootstrap=bootstrap,
            )  # fmt: skip
            removed.append(True)
        view = tool.describe(_asker(cluster, cuts), bootstrap)
        if view.voters.get(node.node_id) == directory:  # type: ignore[arg-type]
            raise NotYet(f"voters {view.voters}")
        return _in_log(cluster, node.node_id, directory, present=False)  # type: ignore[arg-type]

    _until(f"{node.name} ({node.node_id}, {directory}) gone from the voters", attempt)
    del cluster.voter_dirs[node.name]
    now = await_successor(cluster, leader) if leader is node else leader
    cluster.timeline.record("fault", "remove-voter", node=node.name, directory_id=directory)
    return {"voter": node.name, "directory_id": directory, "quorum_leader": now.name}


def wipe_voter(cluster: Cluster, node: Node) -> dict[str, object]:
    """The voter's disk dies (SIGKILL, every file of its storage gone) and it starts on a
    new one, formatted again: in a dynamic quorum with --no-initial-controllers, so it comes
    back as an observer with a new directory id (KIP-853); in a static one as the same voter
    (KAFKA-14077). Proven by the new directory id its storage was formatted with."""
    old = kraft.directory_id(node)
    leader = active_controller(cluster)
    process.kill(cluster, node)
    for log_dir in node.log_dirs:
        for entry in log_dir.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    if cluster.dynamic:
        node.directory_id = None  # formatted as a controller that does not vote
        write_node_config(cluster, node)
    process.restart(cluster, node)
    new = wait_until(
        lambda: kraft.directory_id(node),
        lambda d: d is not None,
        what=f"{node.name}'s storage formatted again",
        timeout=60,
    )
    if new == old:
        raise NotReached(f"{node.name} on a new disk", f"directory id {old} kept")
    if cluster.dynamic:
        node.directory_id = new
    now = await_successor(cluster, leader) if leader is node else leader
    cluster.timeline.record("fault", "wipe-voter", node=node.name, old=old, new=new)
    return {"voter": node.name, "directory_id": new, "quorum_leader": now.name}
