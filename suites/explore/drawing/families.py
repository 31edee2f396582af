"""Every family's drawing, registered in the order STEP_WEIGHTS draws their kinds."""

# isort: off
from suites.explore.drawing import (  # noqa: F401 - each registers its kinds and moves
    writes,
    links,
    elections,
    processes,
    quorum,
    waits,
    txn,
    disks,
    reassign,
    voters,
)

# isort: on
