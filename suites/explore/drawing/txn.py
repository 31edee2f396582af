"""The transactional producer's writes, commits and aborts (KRaft), as explore draws and
shrinks them."""

from __future__ import annotations

import random
from dataclasses import replace

from runrecord.schedule import Cluster
from runrecord.steps.txn import TxnAbort, TxnCommit, TxnWrite
from suites.explore.drawing.choices import COUNTS, sometimes
from suites.explore.drawing.options import DrawOptions
from suites.explore.drawing.registry import Change, Drawing, register

# Of the transactional writes drawn with DrawOptions.spanning, those that span partitions.
SPANNING = 0.4
# Of the commits and aborts drawn with DrawOptions.late_ends, those whose first EndTxn is held.
HELD_END = 0.4


def _kraft(options: DrawOptions) -> bool:
    return options.kraft


def _draw_write(rng: random.Random, c: Cluster, options: DrawOptions) -> TxnWrite:
    step = TxnWrite(rng.choice(COUNTS))
    if options.spanning_txns and sometimes(rng, SPANNING):
        step = replace(step, partitions=rng.randint(2, 1 + c.background_partitions))
    return step


def _draw_end(kind: type[TxnCommit] | type[TxnAbort]):
    def draw(rng: random.Random, c: Cluster, options: DrawOptions) -> TxnCommit | TxnAbort:
        step = kind()
        return replace(step, held=True) if options.held_ends and sometimes(rng, HELD_END) else step

    return draw


def _one_partition(step: TxnWrite) -> list[Change]:
    return (
        [(replace(step, partitions=None), "write to partition 0 only")] if step.partitions else []
    )


def _not_held(step: TxnCommit | TxnAbort) -> list[Change]:
    return [(replace(step, held=None), "EndTxn no longer held")] if step.held else []


register(
    Drawing(TxnWrite, _draw_write, allowed=_kraft, reduce=_one_partition),  # type: ignore[arg-type]
    Drawing(TxnCommit, _draw_end(TxnCommit), allowed=_kraft, reduce=_not_held),  # type: ignore[arg-type]
    Drawing(TxnAbort, _draw_end(TxnAbort), allowed=_kraft, reduce=_not_held),  # type: ignore[arg-type]
)
