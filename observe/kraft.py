"""A KRaft cluster's own state, read from its controllers' disks.

The metadata log is the source of truth in KRaft (KIP-631) and its segments are bind-mounted
on the host, so logfork reads it with the checker's decoder rather than asking brokers,
whose view lags and, for a broker cut off from the controllers, stops. The quorum leader is
the one the highest epoch any voter recorded names (`checkers.checkpoints.quorum_leader`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from basics.errors import NotYet
from checkers.checkpoints import QUORUM_STATE, QuorumState, quorum_leader, read_quorum_state
from checkers.errors import LogReadError
from checkers.metadata_log import METADATA_TOPICS, MetadataLog, VoterSet, decode_metadata_log

if TYPE_CHECKING:
    from fixtures.nodes import Node

METADATA_DIR = f"{METADATA_TOPICS[0]}-0"


def metadata_dir(node: Node) -> Path:
    return node.data_dir / METADATA_DIR


def quorum_state(node: Node) -> QuorumState | None:
    """The node's quorum-state file; None while it is not written yet, or caught
    mid-rewrite."""
    path = metadata_dir(node) / QUORUM_STATE
    if not path.is_file():
        return None
    try:
        return read_quorum_state(path)
    except LogReadError:
        return None


def directory_id(node: Node) -> str | None:
    """The directory id its storage was formatted with (meta.properties, KIP-858), which a
    dynamic quorum knows a voter by (KIP-853); None before its first format."""
    path = node.data_dir / "meta.properties"
    if not path.is_file():
        return None
    for line in path.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "directory.id":
            return value.strip()
    return None


def voter_set(node: Node) -> VoterSet | None:
    """The voter set the node's metadata log records last (KIP-853's VotersRecord); None in
    a static quorum, whose voters are its config's."""
    sets = decode_metadata_log(metadata_dir(node)).voter_sets
    return sets[-1] if sets else None


def quorum_leader_node(controllers: list[Node]) -> Node:
    """The controller that leads the quorum."""
    states = [s for s in (quorum_state(n) for n in controllers) if s is not None]
    leader = quorum_leader(states)
    by_id = {n.node_id: n for n in controllers}
    if leader is None or leader not in by_id:
        raise NotYet("no KRaft controller has recorded a quorum leader yet")
    return by_id[leader]


def metadata_log(controllers: list[Node], node: Node | None = None) -> MetadataLog:
    """The metadata log as one controller has it on disk (default: the quorum leader)."""
    return decode_metadata_log(metadata_dir(node or quorum_leader_node(controllers)))


METADATA_VERSION = "metadata.version"  # KIP-778: the level formatting chose
ELR_FEATURE = "eligible.leader.replicas.version"  # KIP-966: 1 = ELR on (4.0+)
# KIP-890: 2 = transactions v2 (new 4.0+ clusters), for the clients that ask for it
TRANSACTION_VERSION = "transaction.version"


def feature_level(controllers: list[Node], name: str) -> int:
    """A finalized feature's level as the quorum leader's metadata log records it; 0 when
    no FeatureLevelRecord names it (the feature is off)."""
    return metadata_log(controllers).features.get(name, 0)


def fence_offsets(controllers: list[Node], broker: int) -> list[int]:
    """Where the metadata log fenced the broker (its session ended, or it was fenced on
    request), in log order."""
    return [o for b, o in metadata_log(controllers).fencings if b == broker]
