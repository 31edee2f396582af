"""A log dir in a script: the replica moved to its broker's other log dir with the Admin
API's alterReplicaLogDirs (KIP-113) and awaited until the future log is swapped in
(lib.sh's move_replica); its leader epoch checkpoint is compared before and after, since a
swap must keep every epoch (KAFKA-20961)."""

from __future__ import annotations

from runrecord.steps.disks import FailDir, MoveDir
from suites.explore.export.registry import ExportError, Ran, cannot_export, exporter

cannot_export(FailDir, "a failed log dir needs logfork's crash-simulating filesystem (EIO)")


@exporter(MoveDir)
def move(step: MoveDir, ran: Ran) -> list[str]:
    if step.throttle:
        raise ExportError("a throttled 'move-dir' (left in flight) cannot be exported yet")
    return [f"move_replica {ran.broker}"]
