"""audit.json: the checker's judgement of a run's log dirs after convergence.

It holds exactly what `logfork audit --json` prints (`checkers.audit.result`), with the
schema version; `AuditFile` is the typed view of the facts other steps read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AuditedPartition:
    topic: str
    partition: int
    replicas: list[int]
    status: str  # consistent or diverged
    diverged_at: int | None = None
    below_high_watermark: bool = False
    high_watermark: int | None = None
    leader: int | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class AuditSummary:
    partitions: int
    consistent: int
    diverged: int
    errors: int


@dataclass
class AuditFile:
    summary: AuditSummary
    exit_code: int
    partitions: list[AuditedPartition] = field(default_factory=list)
