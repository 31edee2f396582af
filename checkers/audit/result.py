"""What an audit found, and its JSON (`logfork audit --json`, a run's audit.json).

Exit codes: 0 every partition consistent, 1 some partition diverged, 2 some input could not
be read at all (this wins over 1, as with grep: the audit is incomplete).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from checkers.errors import LogReadError, TornTail
from checkers.lineage import Lineage, LogDir
from checkers.metadata_log import MetadataLog
from checkers.verdict import DIVERGED, PartitionVerdict
from runrecord import exits

EXIT_CONSISTENT, EXIT_DIVERGED, EXIT_UNREADABLE = exits.OK, exits.FINDING, exits.USAGE


@dataclass
class AuditError:
    """A bad input, with the broker whose log dir it came from (when known)."""

    error: LogReadError
    broker_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.error.to_dict(), "broker": self.broker_id}


@dataclass
class ReplicaSummary:
    """One replica as read, without its batches: what the result keeps of it."""

    log_dir: int
    child: int
    broker: int
    topic: str
    partition: int
    judged: bool
    metadata: bool
    path: str | None
    batches: int
    log_start_offset: int | None
    high_watermark: int | None
    log_end_offset: int | None
    recovery_point: int | None
    torn_tail: TornTail | None
    errors: list[LogReadError]
    topic_id: str | None

    @classmethod
    def of(
        cls, lineage: Lineage, *, log_dir: int, child: int, judged: bool, metadata: bool
    ) -> ReplicaSummary:
        return cls(
            log_dir=log_dir,
            child=child,
            broker=lineage.broker_id,
            topic=lineage.topic,
            partition=lineage.partition,
            judged=judged,
            metadata=metadata,
            path=lineage.path,
            batches=len(lineage.batches),
            log_start_offset=lineage.log_start_offset,
            high_watermark=lineage.high_watermark,
            log_end_offset=lineage.log_end_offset,
            recovery_point=lineage.recovery_point,
            torn_tail=lineage.torn_tail,
            errors=list(lineage.errors),
            topic_id=lineage.topic_id,
        )


@dataclass(frozen=True)
class MissingReplica:
    """A replica the metadata log assigns that no input held: on an offline log dir of its
    broker, or not among the inputs."""

    broker: int
    offline_log_dirs: tuple[str, ...]  # the broker's offline dirs; empty: none known

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "offline_log_dirs": list(self.offline_log_dirs)}

    def __str__(self) -> str:
        where = "an offline log dir" if self.offline_log_dirs else "no input"
        return f"broker {self.broker} ({where})"


@dataclass
class AuditResult:
    partitions: list[PartitionVerdict] = field(default_factory=list)
    errors: list[AuditError] = field(default_factory=list)
    log_dirs: list[LogDir] = field(default_factory=list)  # as listed: no lineages
    replicas: list[ReplicaSummary] = field(default_factory=list)  # in log dir order
    unreadable: list[str] = field(default_factory=list)  # inputs that could not be read at all
    metadata: MetadataLog | None = None
    kraft_state: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    @property
    def offline(self) -> list[LogDir]:
        """Log dirs whose disk failed: named, left out, and no reason for exit 2 (the
        partitions they held are judged on the replicas that remain, as Kafka serves them)."""
        return [d for d in self.log_dirs if d.offline is not None]

    def offline_by_broker(self) -> dict[int, tuple[str, ...]]:
        """Each broker's offline log dirs, for `missing_replicas` (once for all partitions)."""
        out: dict[int, tuple[str, ...]] = {}
        for d in self.offline:
            if d.broker_id is not None:
                out[d.broker_id] = (*out.get(d.broker_id, ()), d.path)
        return out

    def missing_replicas(
        self, v: PartitionVerdict, offline: dict[int, tuple[str, ...]]
    ) -> list[MissingReplica]:
        """The partition's assigned replicas (KRaft metadata log) that no input held, with
        their brokers' `offline` dirs (`offline_by_broker`). A ZooKeeper-mode audit knows no
        assignment, so it lists none."""
        state = self.kraft_state.get((v.topic, v.partition))
        if state is None:
            return []
        held = set(v.replicas)
        return [MissingReplica(b, offline.get(b, ())) for b in state["replicas"] if b not in held]

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return EXIT_UNREADABLE
        if any(v.status == DIVERGED or v.transactions.found for v in self.partitions):
            return EXIT_DIVERGED
        return EXIT_CONSISTENT

    def to_dict(self) -> dict[str, Any]:
        partitions = []
        offline = self.offline_by_broker()
        for v in self.partitions:
            entry = v.to_dict()
            state = self.kraft_state.get((v.topic, v.partition))
            if state is not None:
                entry["kraft"] = state
                entry["missing_replicas"] = [m.to_dict() for m in self.missing_replicas(v, offline)]
            partitions.append(entry)
        diverged = sum(v.status == DIVERGED for v in self.partitions)
        held = [sum(1 for r in self.replicas if r.log_dir == i) for i in range(len(self.log_dirs))]
        return {
            "partitions": partitions,
            "errors": [e.to_dict() for e in self.errors],
            "torn_tails": [
                {**r.torn_tail.to_dict(), "broker": r.broker}
                for r in self.replicas
                if r.torn_tail is not None
            ],
            "inputs": [
                {
                    "path": d.path,
                    "broker_id": d.broker_id,
                    "kraft": d.kraft,
                    "readable": d.readable,
                    "partitions": held[i],
                    "sidelined": d.sidelined,
                    "offline": d.offline,
                }
                for i, d in enumerate(self.log_dirs)
            ],
            "unreadable": self.unreadable,
            "metadata_log": None
            if self.metadata is None
            else {
                "path": self.metadata.path,
                "end_offset": self.metadata.end_offset,
                "snapshot": self.metadata.snapshot,
                "partitions": len(self.metadata.partitions()),
                "leader_changes": len(self.metadata.leader_changes),
            },
            "summary": {
                "partitions": len(self.partitions),
                "consistent": len(self.partitions) - diverged,
                "diverged": diverged,
                "errors": len(self.errors),
            },
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)
