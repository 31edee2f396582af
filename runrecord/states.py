"""states.jsonl (and state-history.json): a partition's observed states over a run."""

from __future__ import annotations

from dataclasses import dataclass, field

from basics.protocol import RecoveryState


@dataclass
class StateRecord:
    """One observed state: from the ZooKeeper state znode (version: its znode version) or
    the KRaft metadata log (version: the record's offset)."""

    topic: str
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int | None
    isr: list[int]
    recovery_state: RecoveryState
    version: int | None
    source: str  # "zk", "kraft", "metadata-log"
    wall: float | None = None
    elr: list[int] = field(default_factory=list)  # KIP-966, KRaft with ELR enabled
    last_known_elr: list[int] = field(default_factory=list)


@dataclass
class StateHistory:
    """state-history.json: a partition's whole history, as a scenario read it at the end."""

    states: list[StateRecord] = field(default_factory=list)
