"""How a power loss loses data: the models' names, as run records, schedule files and the
command line spell them (faults.power applies them; fixtures.disks mounts what the
filesystem models need)."""

from __future__ import annotations

CUT = "cut"  # each partition cut at its recovery point; checkpoints survive
UNSYNCED, TORN, REORDER = "unsynced", "torn", "reorder"
FS_MODELS = (UNSYNCED, TORN, REORDER)  # on a crash-simulating filesystem
POWER_MODELS = (CUT, *FS_MODELS)
