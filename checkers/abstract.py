"""Lineages of abstract replicas: batches named by (base, last, epoch, tag), no bytes.

The protocol simulator (checkers/simulate/) judges its replicas with the same verdicts as
real logs, so it builds them here; tests of the model and the verdicts use the same spec.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from checkers.lineage import EpochStarts, Lineage
from checkers.records import V2_HEADER_SIZE, Batch


def spec_batch(base: int, last: int, epoch: int, crc: int, position: int) -> Batch:
    """An uncompressed v2 batch header as the reader reports it (no producer fields)."""
    return Batch(
        base_offset=base,
        last_offset=last,
        leader_epoch=epoch,
        crc=crc,
        crc_valid=True,
        size=V2_HEADER_SIZE,
        magic=2,
        record_count=last - base + 1,
        compression="none",
        is_control=False,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        max_timestamp=-1,
        segment="spec",
        position=position,
    )


def from_spec(
    broker_id: int,
    spec: Sequence[Sequence[Any]],
    *,
    topic: str = "t",
    partition: int = 0,
    high_watermark: int | None = None,
    log_start_offset: int | None = None,
    log_end_offset: int | None = None,
    epochs: EpochStarts | None = None,
    recovery_point: int | None = None,
) -> Lineage:
    """A lineage from ``[(base, last, epoch), ...]`` or ``(base, last, epoch, tag)``.

    Batches with equal (base, last, epoch, tag) get equal CRCs, so two replicas built from
    the same spec hold the same batches; an int tag is taken as the CRC itself. `epochs`
    stands for the replica's epoch cache (its checkpoint file), e.g. a leader that has
    started an epoch but not yet written to it.
    """
    batches = []
    for i, item in enumerate(spec):
        base, last, epoch = item[0], item[1], item[2]
        tag = item[3] if len(item) > 3 else ""
        crc = tag if isinstance(tag, int) else zlib.crc32(f"{base}:{last}:{epoch}:{tag}".encode())
        batches.append(spec_batch(base, last, epoch, crc, i * V2_HEADER_SIZE))
    return Lineage(
        topic,
        partition,
        broker_id,
        batches,
        checkpointed_epoch_starts=None if epochs is None else list(epochs),
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        log_end_offset=log_end_offset,
        recovery_point=recovery_point,
    )
