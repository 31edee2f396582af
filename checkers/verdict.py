"""Judge one partition: do its replicas hold the same batches wherever they overlap?

consistent: every offset two replicas both hold is the same batch (same boundaries, leader
epoch and CRC), whatever their segment rolls or log start offsets; a replica that is a
strict prefix of another (it lags) is consistent. diverged: otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import combinations
from typing import Any

from basics.protocol import Protocol
from checkers.compaction import cleaner_evidence, compare_cleaned, first_record_difference
from checkers.lineage import Lineage, cleaned_end, first_divergence
from checkers.model import Fate, TruncationResult, truncate_follower
from checkers.records import Batch
from checkers.transactions import TransactionFindings

CONSISTENT = "consistent"
DIVERGED = "diverged"


@dataclass
class Version:
    """One version of the data at the divergent offset, and the replicas holding it."""

    batch: Batch
    replicas: list[int]

    def to_dict(self) -> dict[str, Any]:
        b = self.batch
        return {
            "base_offset": b.base_offset,
            "last_offset": b.last_offset,
            "leader_epoch": b.leader_epoch,
            "crc": b.crc,
            "crc_valid": b.crc_valid,
            "record_count": b.record_count,
            "replicas": self.replicas,
            "segment": b.segment,
            "position": b.position,
        }


@dataclass(frozen=True)
class PendingTruncation:
    """Replicas that differ from the leader only by a tail at or above their own checkpointed
    high watermark, which the protocol truncates at their next fetch."""

    replicas: list[int]
    start: int  # the lowest offset where such a tail starts
    end: int  # the highest log end of those replicas
    checkpoint_trusted: bool  # every one's log dir proves a clean shutdown

    def line(self) -> str:
        who = ", ".join(map(str, self.replicas))
        return f"broker(s) {who} hold a tail [{self.start}, {self.end}) awaiting truncation"


@dataclass
class PartitionVerdict:
    topic: str
    partition: int
    replicas: list[int]
    status: str
    diverged_at: int | None = None
    below_high_watermark: bool = False
    high_watermark: int | None = None
    versions: list[Version] = field(default_factory=list)
    lacking: list[int] = field(default_factory=list)  # replicas not holding `diverged_at`
    pairs: list[tuple[int, int, int]] = field(default_factory=list)  # (a, b, first offset)
    leader: int | None = None
    leader_source: str = ""
    protocol: Protocol = Protocol.KIP_279
    predictions: dict[int, TruncationResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    log_end_offsets: dict[int, int] = field(default_factory=dict)
    log_start_offsets: dict[int, int] = field(default_factory=dict)
    lenient: list[dict[str, Any]] = field(default_factory=list)  # ranges not byte for byte
    unchecked: list[dict[str, Any]] = field(default_factory=list)  # ranges not held locally
    pending_truncation: PendingTruncation | None = None
    lagging: dict[int, int] = field(default_factory=dict)  # broker -> log end, behind the rest
    # Hanging and torn transactions and duplicate sequences (`checkers.transactions`).
    transactions: TransactionFindings = field(default_factory=TransactionFindings)

    def compact(self) -> PartitionVerdict:
        """The verdict without the predicted follower logs (see `TruncationResult.compact`)."""
        return dataclasses.replace(
            self, predictions={f: r.compact() for f, r in self.predictions.items()}
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": self.replicas,
            "status": self.status,
            "diverged_at": self.diverged_at,
            "below_high_watermark": self.below_high_watermark,
            "high_watermark": self.high_watermark,
            "versions": [v.to_dict() for v in self.versions],
            "lacking": self.lacking,
            "divergent_pairs": [{"replicas": [a, b], "diverged_at": o} for a, b, o in self.pairs],
            "leader": self.leader,
            "leader_source": self.leader_source,
            "protocol": self.protocol.value,
            "predictions": [{"follower": f, **r.to_dict()} for f, r in self.predictions.items()],
            "log_start_offsets": {str(k): v for k, v in self.log_start_offsets.items()},
            "log_end_offsets": {str(k): v for k, v in self.log_end_offsets.items()},
            "lenient": self.lenient,
            "unchecked": self.unchecked,
            "pending_truncation": None
            if self.pending_truncation is None
            else dataclasses.asdict(self.pending_truncation),
            "lagging": {str(k): v for k, v in self.lagging.items()},
            "notes": self.notes,
            **self.transactions.to_dict(),
        }


def pick_leader(lineages: Sequence[Lineage]) -> Lineage:
    """The replica with the highest leader epoch at its tail; then the longest; then the
    lowest broker id. A new leader always holds the highest epoch (the controller bumps it
    on every election), so this is the leader, or the one that was last."""
    return max(lineages, key=lambda lin: (lin.tail_epoch, lin.leo, -lin.broker_id))


def judge_partition(
    lineages: Sequence[Lineage],
    *,
    leader: int | None = None,
    protocol: Protocol = Protocol.KIP_279,
    compacted: str | None = None,
) -> PartitionVerdict:
    """Compare every pair of replicas batch by batch; say where they first differ, whether
    committed data differs, who holds what, and what `protocol` does about it next.

    `leader` is the current leader's broker id when known (KRaft metadata); otherwise
    `pick_leader` chooses. `compacted` says why the partition is known to be compacted;
    its replicas' cleaned ranges are then compared as compaction allows
    (`checkers.compaction`), and so are they when their own cleaner-offset-checkpoints say
    they were cleaned.
    """
    if not lineages:
        raise ValueError("judge_partition needs at least one replica")
    ordered = sorted(lineages, key=lambda lin: lin.broker_id)
    first = ordered[0]
    verdict = PartitionVerdict(
        topic=first.topic,
        partition=first.partition,
        replicas=[lin.broker_id for lin in ordered],
        status=CONSISTENT,
        protocol=protocol,
        log_end_offsets={lin.broker_id: lin.leo for lin in ordered},
        log_start_offsets={lin.broker_id: lin.log_start_offset or 0 for lin in ordered},
    )
    top = max(lin.leo for lin in ordered)
    verdict.lagging = {lin.broker_id: lin.leo for lin in ordered if lin.leo < top}
    hws = [lin.high_watermark for lin in ordered if lin.high_watermark is not None]
    # The highest high watermark any replica recorded: everything below it was committed
    # at some point (the leader's is the highest; a deposed leader may remember a higher one).
    verdict.high_watermark = max(hws) if hws else None
    compacted = compacted or cleaner_evidence(ordered)
    unknown = [lin.broker_id for lin in ordered if lin.cleaner_unknown]
    if unknown:
        verdict.notes.append(
            f"the cleaner-offset-checkpoint of broker(s) {', '.join(map(str, unknown))} could "
            "not be read: judged byte for byte, so if the partition is compacted a batch a "
            "cleaner rewrote shows as a divergence"
        )
        compacted = None
    for a, b in combinations(ordered, 2):
        pair = _pair_divergence(a, b, compacted)
        if pair.lenient is not None:
            verdict.lenient.append(pair.lenient)
        if pair.note is not None:
            verdict.notes.append(pair.note)
        if pair.offset is not None:
            verdict.pairs.append((a.broker_id, b.broker_id, pair.offset))
    _unchecked(ordered, verdict)
    _notes(ordered, verdict, compacted is not None)
    if not verdict.pairs:
        return verdict

    verdict.status = DIVERGED
    at = min(offset for _, _, offset in verdict.pairs)
    verdict.diverged_at = at
    hw = verdict.high_watermark
    verdict.below_high_watermark = hw is not None and at < hw
    groups: dict[tuple[tuple[int, int, int, int], bool], Version] = {}
    for lin in ordered:
        batch = lin.batch_containing(at)
        if batch is None:
            verdict.lacking.append(lin.broker_id)
            continue
        identity = (batch.key, batch.crc_valid)
        if identity in groups:
            groups[identity].replicas.append(lin.broker_id)
        else:
            groups[identity] = Version(batch, [lin.broker_id])
    verdict.versions = list(groups.values())
    keys = [key for key, _ in groups]
    if len(set(keys)) > 1 and len({k[:3] for k in keys}) == 1 and not compacted:
        verdict.notes.append(
            f"at offset {at} the versions share boundaries and leader epoch and "
            "differ only in CRC: different contents, or one replica's log "
            "cleaner rewrote the batch (a compacted topic the audit was not told of: "
            "--compacted)"
        )

    by_id = {lin.broker_id: lin for lin in ordered}
    if leader is not None and leader in by_id:
        chosen, verdict.leader_source = by_id[leader], "current leader from the metadata log"
    else:
        chosen, verdict.leader_source = pick_leader(ordered), "replica with the highest tail epoch"
    verdict.leader = chosen.broker_id
    for lin in ordered:
        if lin is not chosen:
            # A compacted follower is judged by the rule the pairs were: what it keeps of its
            # own log against the leader, record by record where a cleaner ran.
            differs = None if compacted is None else partial(_differs_below, chosen, lin, compacted)
            verdict.predictions[lin.broker_id] = truncate_follower(
                chosen, lin, protocol, differs=differs
            )
    _pending_truncation(verdict, by_id, chosen)
    return verdict


def _pending_truncation(
    verdict: PartitionVerdict, by_id: dict[int, Lineage], chosen: Lineage
) -> None:
    """A divergence that is only a tail awaiting truncation: each replica that differs from
    the leader does so from an offset at or above its own checkpointed high watermark (it
    never counted that data committed), and the protocol truncates it at its next fetch. A
    leader deposed with writes its followers had not fetched (a controlled shutdown, say)
    stops like that.

    The rule trusts that checkpoint, which holds only where the replica's log dir proves a
    clean shutdown (its clean-shutdown marker: the checkpoint was written as the broker
    stopped). After a SIGKILL or a power cut it may lag the real high watermark by up to
    replica.high.watermark.checkpoint.interval.ms, and the tail may then hold acknowledged
    data: the partition stays diverged, with the note of what the protocol will do."""
    lead = chosen.broker_id

    def is_tail(broker: int, at: int) -> bool:
        hw = by_id[broker].high_watermark
        fate = verdict.predictions[broker].outcome if broker != lead else None
        return hw is not None and hw <= at and fate is Fate.CONSISTENT

    # Every divergent pair must have such a tail on one side: two others that differ are a
    # divergence. The other side need not be the leader: where the leader's cleaner removed
    # the offset (compaction), the tail shows against another follower only.
    apart: dict[int, int] = {}
    against: dict[int, set[int]] = {}
    for a, b, at in verdict.pairs:
        tail = next((x for x in (a, b) if is_tail(x, at)), None)
        if tail is None:
            return
        apart[tail] = min(apart.get(tail, at), at)
        against.setdefault(tail, set()).add(b if tail == a else a)
    trusted = all(by_id[b].clean_shutdown for b in apart)
    verdict.pending_truncation = PendingTruncation(
        replicas=sorted(apart),
        start=min(apart.values()),
        end=max(by_id[b].leo for b in apart),
        checkpoint_trusted=trusted,
    )
    for broker, at in sorted(apart.items()):
        tail = [b.span for b in by_id[broker].batches if b.last_offset >= at]
        trust = (
            "its log dir proves a clean shutdown, so that checkpoint is final"
            if by_id[broker].clean_shutdown
            else "but its log dir holds no clean-shutdown marker: after a crash that "
            "checkpoint may lag the real one, so the tail may hold acknowledged data"
        )
        others = sorted(against[broker] - {lead})
        whom = (
            f"the leader (broker {lead})"
            if lead in against[broker]
            else f"broker(s) {', '.join(map(str, others))}"
        )
        verdict.notes.append(
            f"broker {broker} differs from {whom} from offset {at}, at "
            f"or above its own checkpointed high watermark {by_id[broker].high_watermark}: "
            f"a tail ({', '.join(tail)}) that its next fetch truncates "
            f"({verdict.protocol.value} rules; see its prediction); {trust}"
        )
    if not trusted:
        return
    verdict.status = CONSISTENT
    verdict.diverged_at, verdict.below_high_watermark = None, False
    verdict.pairs, verdict.versions, verdict.lacking = [], [], []


@dataclass(frozen=True)
class _PairCompare:
    """Where two replicas first differ, and how the comparison was made."""

    offset: int | None
    lenient: dict[str, Any] | None = None  # the range compared as compaction allows
    note: str | None = None  # what compaction could not explain


def _pair_divergence(
    a: Lineage, b: Lineage, compacted: str | None, end: int | None = None
) -> _PairCompare:
    """Where two replicas first differ: record by record where either replica's cleaner
    may have rewritten the log, byte for byte above (and everywhere, uncompacted); only
    over the offsets both hold, below `end` when given. What lies past a replica's own log
    end is lag, not divergence, however far its peer's cleaner ran (a replica stopped for
    maintenance while its peers' cleaners go on)."""
    start = max(a.log_start_offset or 0, b.log_start_offset or 0)
    common_end = min(_held_to(a), _held_to(b), *(() if end is None else (end,)))
    lenient_end = start
    if compacted:
        lenient_end = max(start, min(max(cleaned_end(a), cleaned_end(b)), common_end))
    found, lenient, note = [], None, None
    if lenient_end > start:
        lenient = {
            "start": start,
            "end": lenient_end,
            "replicas": [a.broker_id, b.broker_id],
            "rule": "compaction",
            "why": compacted,
            "how": "each broker's log cleaner rewrites its own replica on its own "
            "schedule, so below the end of the cleaned segments batches are compared by "
            "the fields the cleaner keeps and records one by one; a record one replica "
            "lacks must be superseded by a later record with its key, a tombstone, a "
            "transaction marker, keyless or aborted",
        }
        discrepancy = compare_cleaned(a, b, start, lenient_end)
        if discrepancy is not None:
            note = f"at offset {discrepancy.offset}: {discrepancy.what}"
            found.append(discrepancy.offset)
    offset = first_divergence(a.batches, b.batches, start=lenient_end)
    if offset is not None and (end is None or offset < end):
        x, y = a.batch_containing(offset), b.batch_containing(offset)
        if (
            x is not None
            and y is not None
            and x.key[:3] == y.key[:3]
            and x.crc_valid
            and y.crc_valid
        ):
            offset = first_record_difference(a, b, offset)
        found.append(offset)
    return _PairCompare(min(found) if found else None, lenient, note)


def _held_to(lineage: Lineage) -> int:
    """How far a replica's log reached: its log end, or its cleaner's checkpoint where that
    is further (the checkpoint names an offset the log held when it was cleaned)."""
    return max(lineage.leo, lineage.cleaned_to or 0)


def _differs_below(leader: Lineage, follower: Lineage, compacted: str, end: int) -> int | None:
    return _pair_divergence(leader, follower, compacted, end).offset


def _unchecked(lineages: Sequence[Lineage], verdict: PartitionVerdict) -> None:
    for lin in lineages:
        if lin.remote_from is not None:
            verdict.unchecked.append(
                {
                    "start": lin.remote_from,
                    "end": lin.log_start_offset or 0,
                    "broker": lin.broker_id,
                    "why": "below the first local segment: held in remote storage only "
                    "(tiered storage, KIP-405), so not compared",
                }
            )


def transient_note(names: Sequence[str]) -> str:
    """What the files of unfinished file operations are, counted by kind."""
    deleted = [n for n in names if n.endswith(".deleted")]
    others = [n for n in names if not n.endswith(".deleted")]
    parts = []
    if deleted:
        segments = sum(n.endswith(".log.deleted") for n in deleted)
        # Kafka renames a segment it drops (retention, cleaning, truncation) and deletes it
        # file.delete.delay.ms later (LocalLog.asyncDeleteSegment): normal, not damage.
        parts.append(
            f"{len(deleted)} file(s) of {segments} dropped segment(s) await Kafka's "
            "delayed deletion"
        )
    if others:
        parts.append(f"an unfinished cleaning or swap left {', '.join(others)}")
    return "; ".join(parts) + " (not read as live data)"


def swap_note(lin: Lineage) -> str:
    replaced = ", ".join(lin.swapped_out) or "no segment"
    return (
        f"an interrupted swap, which Kafka completes when it loads the log (LogLoader): "
        f"read {', '.join(lin.swapped_in)} as live data in place of {replaced}"
    )


def _notes(lineages: Sequence[Lineage], verdict: PartitionVerdict, compacted: bool) -> None:
    for lin in lineages:
        if lin.torn_tail is not None:
            verdict.notes.append(f"replica {lin.broker_id}: {lin.torn_tail}")
        bad = [b for b in lin.batches if not b.crc_valid]
        if bad:
            verdict.notes.append(
                f"replica {lin.broker_id}: {len(bad)} batch(es) fail their CRC, "
                f"first {bad[0].span} in {bad[0].segment}"
            )
        for finding in lin.epoch_findings(cleaned_end(lin) if compacted else 0):
            verdict.notes.append(f"replica {lin.broker_id}: leader-epoch-checkpoint: {finding}")
        if lin.swapped_in:
            verdict.notes.append(f"replica {lin.broker_id}: {swap_note(lin)}")
        if lin.transient_files:
            verdict.notes.append(f"replica {lin.broker_id}: {transient_note(lin.transient_files)}")
