"""The simulated cluster's rule for each step kind, a module per family of step kinds (as the
schedule language, the live actions and the drawing have theirs), registered by kind
(registry); importing this package imports every family."""

from checkers.simulate.rules import (  # noqa: F401 - each registers its kinds' rules
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
