"""Disk faults: a broker's disks replaced by empty ones, or one of its log dirs lost while
it runs.

A broker that fails hard and comes back on new disks has lost every replica it held, and
its metadata: `meta.properties` too (a KRaft node's start script formats it again, with
the cluster's id; a ZooKeeper-mode broker writes a new one). KIP-903's scenario is such a
broker joining an ISR on the strength of a request its previous incarnation caused.

A JBOD broker whose one disk fails keeps running on the others (KIP-112 in ZooKeeper mode,
KIP-858 in KRaft from 3.7): its first failed write or read in that dir takes the dir
offline, and every replica in it with it. The disk fails as a real one does: every access
to it fails with EIO (the crash-simulating mount detached, `fixtures.crashfs`), never by
touching the host's own files.
"""

from __future__ import annotations

import shutil

from basics.errors import NotReached, SetupError
from faults.process import kill, restart
from fixtures.cluster import Cluster
from fixtures.config import log_dir_path
from fixtures.disks import NodeDisk
from fixtures.nodes import Node
from observe.log_dirs import OFFLINE, ONLINE, await_log_dir


def replace_disks(cluster: Cluster, node: Node) -> None:
    """Empty every log dir of a stopped node; checks that nothing is left."""
    if node.status() == "running":
        raise NotReached(f"{node.name} stopped before its disks are replaced", "running")
    for log_dir in node.log_dirs:
        for child in log_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    left = [str(c) for d in node.log_dirs for c in d.iterdir()]
    if left:
        raise NotReached(f"{node.name}'s log dirs empty", f"left: {left[:5]}")
    cluster.timeline.record("fault", "disks-replaced", node=node.name, dirs=len(node.log_dirs))


def fail_log_dir(cluster: Cluster, node: Node, index: int, *, timeout: float = 60.0) -> None:
    """The node's log dir `index` goes away under the running broker. Proven by the
    broker's own DescribeLogDirs naming the dir KAFKA_STORAGE_ERROR. Nothing needs to
    touch the dir for that: the high-watermark checkpoint writes to every log dir every
    `replica.high.watermark.checkpoint.interval.ms` (5 s)."""
    disk = _disk(cluster, node, index)
    disk.mount.detach()
    path = log_dir_path(index)
    cluster.timeline.record("fault", "log-dir-failed", node=node.name, log_dir=path)
    _await_state(node, path, OFFLINE, timeout)


def restore_log_dir(cluster: Cluster, node: Node, index: int, *, timeout: float = 120.0) -> None:
    """The failed disk is back. A broker never takes an offline dir back while it runs
    (KIP-112: the operator restarts it once the disk is replaced), so it is restarted;
    proven by the dir online in its own view again."""
    reattach_log_dir(cluster, node, index)
    restart(cluster, node, timeout=timeout)
    await_online(cluster, node, index, timeout=timeout)


def reattach_log_dir(cluster: Cluster, node: Node, index: int) -> None:
    """The disk back under the dir, and the broker, which still holds it offline, shut
    down (controlled) so that a restart takes the dir back."""
    _disk(cluster, node, index).mount.reattach()
    if node.status() == "running":
        kill(cluster, node, signal="SIGTERM")


def await_online(cluster: Cluster, node: Node, index: int, *, timeout: float = 120.0) -> None:
    """After the restart: the dir online in the broker's own view."""
    path = log_dir_path(index)
    _await_state(node, path, ONLINE, timeout)
    cluster.timeline.record("heal", "log-dir-failed", node=node.name, log_dir=path)


def _disk(cluster: Cluster, node: Node, index: int) -> NodeDisk:
    if cluster.disks is None:
        raise SetupError(
            "a log dir fails only on a crash-simulating mount: the cluster needs a power "
            "model other than cut (ClusterSpec.power_model)"
        )
    disks = cluster.disks.of(node)
    if not 0 <= index < len(disks):
        raise SetupError(f"{node.name} has {len(disks)} log dir(s): there is no log dir {index}")
    return disks[index]


def _await_state(node: Node, path: str, wanted: str, timeout: float) -> None:
    await_log_dir(node, path, lambda s: s.error == wanted, f"{wanted} in DescribeLogDirs", timeout)
