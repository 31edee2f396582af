"""Every family's live actions, registered (suites.explore.live.registry)."""

from suites.explore.live import (  # noqa: F401 - each registers its kinds' actions
    disks,
    elections,
    links,
    processes,
    quorum,
    reassign,
    txn,
    voters,
    waits,
    writes,
)
