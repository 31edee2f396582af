"""The schedule language's step kinds, by family: each family's module defines its kinds'
dataclasses (runrecord.steps.base.StepKind), which registers them. Importing this package
imports every family, in the order of STEP_KINDS (the order explore draws kinds in and the
loader lists them)."""

# isort: off
from runrecord.steps import (  # noqa: F401 - each family registers its kinds, in this order
    writes,
    links,
    elections,
    processes,
    disks,
    reassign,
    quorum,
    voters,
    waits,
    txn,
)

# isort: on
from runrecord.steps.base import QUORUM, STEP_KINDS, Endpoint, Role, Step, Target

__all__ = ["QUORUM", "STEP_KINDS", "Endpoint", "Role", "Step", "Target"]
