"""Invariants of a schedule's run read from its evidence beyond the per-partition audit:
the KRaft metadata log's copies, and each replica's leader epochs (suites.explore.judge
says what a violation of each amounts to)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.audit.local import execute
from checkers.audit.plan import plan_audit
from checkers.metadata_log import METADATA_TOPICS
from checkers.protocol import Protocol


def epoch_regressions(lineages: Any) -> list[str]:
    """Where a replica's log holds a batch of a lower leader epoch after a higher one: a
    partition's epochs never go backwards on a broker's disk (a follower appends only what
    its leader of that epoch wrote, and truncates anything of a later epoch first)."""
    found = []
    for lin in lineages:
        top = -1
        for batch in lin.batches:
            if batch.leader_epoch < top:
                found.append(
                    f"broker {lin.broker_id}: {batch.span} in epoch {batch.leader_epoch} after "
                    f"epoch {top}"
                )
                break
            top = max(top, batch.leader_epoch)
    return found


def metadata_divergence(run_dir: Path) -> str | None:
    """KRaft: the metadata log as every controller and broker holds it (copied with the
    schedule's evidence) must agree wherever two copies overlap: each voter's log is the
    quorum's up to what it committed, and each broker applied a prefix of it (KIP-595).
    What the audit says where they do not, or None."""
    run = execute(plan_audit([run_dir], METADATA_TOPICS[0]), Protocol.DIVERGING_EPOCH)
    for v in run.result.partitions:
        if v.topic == METADATA_TOPICS[0] and v.status == "diverged":
            return f"replicas {v.replicas} of the metadata log diverged at offset {v.diverged_at}"
    return None
