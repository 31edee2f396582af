"""How a power loss loses data: the models' names, as run records, schedule files and the
command line spell them (faults.power applies them; fixtures.disks mounts what the
filesystem models need)."""

from __future__ import annotations

from dataclasses import dataclass, field

CUT = "cut"  # each partition cut at its recovery point; checkpoints survive
UNSYNCED, TORN, REORDER = "unsynced", "torn", "reorder"  # what POSIX promises, no more
ORDERED = "ordered"  # what ext4 in data=ordered mode keeps (native/crashfs/src/ordered.rs)
FS_MODELS = (UNSYNCED, TORN, REORDER, ORDERED)  # on a crash-simulating filesystem
POWER_MODELS = (CUT, *FS_MODELS)


@dataclass
class PowerCut:
    """What one power loss of a schedule dropped, as the protocol model needs to know it:
    per partition, (log end before, log end after); under a filesystem model, the files it
    rolled back that the protocol model does not follow."""

    step: int
    broker: int
    ends: dict[int, tuple[int, int]] = field(default_factory=dict)
    model: str = CUT
    unmodelled: list[str] = field(default_factory=list)
