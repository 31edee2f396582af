"""What a lineage diagram draws: each replica's batches along the offset axis, marked
against the reference replica (the leader), and the offsets where replicas differ.

Long logs are drawn in runs: consecutive batches of the same leader epoch and the same mark
merge into one segment, except near the divergence, where every batch stays visible. The
data stays small whatever the log's size, so it travels from executors to the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkers.lineage import Lineage
from checkers.model import truncate_follower
from checkers.records import Batch
from checkers.verdict import PartitionVerdict

SAME, DIFFERS, UNMATCHED, BAD_CRC = "same", "differs", "unmatched", "bad-crc"
DETAIL = 48  # a replica with at most this many batches is drawn batch by batch
WINDOW = 8  # batches kept whole on each side of the divergence in a long log


def mark(batch: Batch, lineage: Lineage, reference: Lineage) -> str:
    """How `batch` of `lineage` compares with what the reference replica holds there."""
    if not batch.crc_valid:
        return BAD_CRC
    if lineage is reference:
        return SAME
    other = reference.batch_containing(batch.base_offset)
    if other is None:
        return UNMATCHED  # past the reference's end or before its start
    return SAME if other.key == batch.key and other.crc_valid else DIFFERS


def segments(batches: Sequence[Batch], marks: Sequence[str], focus: int | None) -> list[list[Any]]:
    """[base, last, epoch, mark, batch count] runs of `batches`."""
    if len(batches) <= DETAIL:
        return [
            [b.base_offset, b.last_offset, b.leader_epoch, m, 1]
            for b, m in zip(batches, marks, strict=True)
        ]
    keep_from, keep_to = len(batches), -1
    if focus is not None:
        at = next((i for i, b in enumerate(batches) if b.last_offset >= focus), len(batches) - 1)
        keep_from, keep_to = at - WINDOW, at + WINDOW
    out: list[list[Any]] = []
    for i, (b, m) in enumerate(zip(batches, marks, strict=True)):
        last = out[-1] if out else None
        whole = keep_from <= i <= keep_to
        if (
            last is not None
            and not whole
            and not last[5]
            and last[2] == b.leader_epoch
            and last[3] == m
            and last[1] + 1 == b.base_offset
        ):
            last[1] = b.last_offset
            last[4] += 1
        else:
            out.append([b.base_offset, b.last_offset, b.leader_epoch, m, 1, whole])
    return [s[:5] for s in out]


def build(
    lineages: Sequence[Lineage], verdict: PartitionVerdict, reference: Lineage
) -> dict[str, Any]:
    ordered = sorted(lineages, key=lambda lin: lin.broker_id)
    focus = verdict.diverged_at
    rows = []
    differing: list[Batch] = []
    for lin in ordered:
        marks = [mark(b, lin, reference) for b in lin.batches]
        differing.extend(b for b, m in zip(lin.batches, marks, strict=True) if m == DIFFERS)
        rows.append(
            {
                "broker": lin.broker_id,
                "reference": lin is reference,
                "log_start": lin.log_start_offset or 0,
                "leo": lin.leo,
                "high_watermark": lin.high_watermark,
                "batches": len(lin.batches),
                "segments": segments(lin.batches, marks, focus),
            }
        )
    low = min((r["log_start"] for r in rows), default=0)
    high = max((r["leo"] for r in rows), default=0)
    diverged = None
    if focus is not None:
        end = max((b.last_offset for b in differing if b.last_offset >= focus), default=None)
        if end is None:
            end = max(high - 1, focus)
        diverged = [focus, end]
    return {
        "rows": rows,
        "low": low,
        "high": high,
        "high_watermark": verdict.high_watermark,
        "diverged": diverged,
        "reference": reference.broker_id,
    }


def replay_rejoin(
    lineages: Sequence[Lineage], verdict: PartitionVerdict, reference: Lineage
) -> list[dict[str, Any]]:
    """For each follower holding another version at the divergence: the model run on its log
    as it was when it rejoined, reconstructed as its batches up to its last batch that
    differs from the leader's (what it fetched afterwards is the leader's own data)."""
    if verdict.diverged_at is None:
        return []
    out = []
    for lin in sorted(lineages, key=lambda x: x.broker_id):
        if lin is reference:
            continue
        marks = [mark(b, lin, reference) for b in lin.batches]
        last = max((i for i, m in enumerate(marks) if m == DIFFERS), default=None)
        if last is None or last == len(lin.batches) - 1:
            continue  # nothing fetched after its own version: the final state says it all
        if any(m != SAME for m in marks[last + 1 :]):
            continue  # what follows is not the leader's data: no telling when it rejoined
        kept = lin.batches[: last + 1]
        hw = lin.high_watermark
        before = Lineage(
            lin.topic,
            lin.partition,
            lin.broker_id,
            list(kept),
            log_start_offset=lin.log_start_offset,
            high_watermark=None if hw is None else min(hw, kept[-1].last_offset + 1),
        )
        result = truncate_follower(reference, before, verdict.protocol)
        out.append(
            {
                "follower": lin.broker_id,
                "leader": reference.broker_id,
                "log_end_offset": before.leo,
                "tail": kept[-1].span,
                "tail_epoch": kept[-1].leader_epoch,
                "outcome": result.outcome.value,
                "diverged_at": result.diverged_at,
                "truncation_offset": result.truncation_offset,
                "lines": result.describe(),
            }
        )
    return out
