"""What a power loss under a filesystem model did to a schedule's run, as the protocol
model needs to know it: where each partition's log ended, and which rolled-back files it
does not follow (runrecord.power)."""

from __future__ import annotations

from dataclasses import dataclass, field

from faults import power
from fixtures.cluster import Cluster
from fixtures.crashfs import CrashReport
from fixtures.nodes import Node
from runrecord.power import CUT
from runrecord.steps.processes import PowerLoss


@dataclass
class PowerCut:
    """What one power loss dropped: per partition, (log end before, log end after); under
    a filesystem model, the files it rolled back that the protocol model does not follow."""

    step: int
    broker: int
    ends: dict[int, tuple[int, int]] = field(default_factory=dict)
    model: str = CUT
    unmodelled: list[str] = field(default_factory=list)


# What a filesystem power loss may roll back without the model noticing: segment data and
# indexes (the model's own logs), producer snapshots, files of other topics, a temporary
# file that never became the file it was for, the broker's copy of the metadata log (it
# fetches it again from the controllers).
_MODELLED_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".tmp")


def unmodelled(reports: list[CrashReport], topic: str) -> list[str]:
    """The files and names a power loss rolled back whose loss the model cannot follow: the
    schedule topic's leader-epoch-checkpoint or partition.metadata, the high watermark
    checkpoint, the clean-shutdown marker, meta.properties."""
    found = []
    for report in reports:
        changed = [f.path for f in report.files if f.dropped or not f.survives]
        changed += [p for n in report.namespace if n.undone for p in (n.path, n.to) if p]
        for path in changed:
            head = path.split("/", 1)[0]
            partition_dir = "/" in path
            if path.endswith(_MODELLED_SUFFIXES) or head.startswith("__cluster_metadata"):
                continue
            if partition_dir and head.rpartition("-")[0] != topic:
                continue
            found.append(path)
    return sorted(set(found))


def cut_power(cluster: Cluster, node: Node, step: PowerLoss, topic: str, cut: PowerCut) -> None:
    """Run a `power-loss` step on the broker (faults.power, on the schedule's topic only),
    filling in `cut` with what it dropped."""
    losses = power.power_loss(
        cluster, node, topics={topic}, lose=step.lose, model=step.power_model, seed=step.seed or 0
    )
    cut.ends = {p: (x.end_before, x.end_after) for (_, p), x in losses.items()}
    cut.model = step.power_model
    if cut.model != CUT and cluster.disks is not None:
        reports = [d.crashes[-1] for d in cluster.disks.of(node) if d.crashes]
        cut.unmodelled = unmodelled(reports, topic)
