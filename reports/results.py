"""What the report pipeline produces, and the assembly both engines share: the audit's
result (`checkers.audit.decide.assemble`), the producer summary and the state history, from
the rows an engine hands over."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basics.protocol import RecoveryState
from checkers.audit import decide
from checkers.audit.plan import TopicPartition
from checkers.audit.result import AuditResult
from checkers.metadata_log import METADATA_TOPICS, MetadataLog
from reports.judge import DETAILED_UP_TO, UNREAD, JudgeConfig, PartitionRow
from reports.sources import RunSource
from runrecord.events import EventKind, deleted_below
from runrecord.states import StateRecord


@dataclass
class RunResult:
    source: RunSource
    audit: AuditResult
    partitions: list[PartitionRow] = field(default_factory=list)  # judged or absent
    producer: dict[str, Any] | None = None  # summary of producer.jsonl
    acks_per_second: list[dict[str, Any]] = field(default_factory=list)
    states: list[StateRecord] = field(default_factory=list)
    tables_dir: Path | None = None

    @property
    def key(self) -> str:
        return self.source.key

    @property
    def metadata(self) -> MetadataLog | None:
        return self.audit.metadata

    @property
    def kraft_state(self) -> dict[TopicPartition, dict[str, Any]]:
        return self.audit.kraft_state


@dataclass
class PipelineResult:
    runs: list[RunResult]
    engine: str  # "local", or the Spark master the pipeline ran on
    timings: dict[str, float] = field(default_factory=dict)
    # (run, topic, partition) -> where it was read and judged ("executor 1 on HOST")
    placement: dict[tuple[str, str, int], str] = field(default_factory=dict)

    def run(self, key: str) -> RunResult:
        return next(r for r in self.runs if r.key == key)


Assemble = Callable[[RunSource, "EngineOutput"], RunResult]


@dataclass
class EngineOutput:
    """What an engine hands the assembly for one source."""

    rows: list[PartitionRow] = field(default_factory=list)
    metadata_logs: dict[int, MetadataLog] = field(default_factory=dict)
    # (acks, second, acknowledged, error) -> sends, from producer.jsonl
    send_counts: dict[tuple[str, int | None, bool, str | None], int] = field(default_factory=dict)
    audit: AuditResult | None = None  # an engine that assembled it itself
    tables_dir: Path | None = None


def judge_config(sources: Sequence[RunSource], known: dict[str, decide.Known]) -> JudgeConfig:
    return JudgeConfig(
        protocols={s.key: s.protocol.value for s in sources},
        leaders={
            (s.key, *tp): leader for s in sources for tp, leader in known[s.key].leaders.items()
        },
        compacted={
            (s.key, topic): why for s in sources for topic, why in known[s.key].compacted.items()
        },
        txn_timeouts={s.key: known[s.key].txn_timeout_ms for s in sources},
        txn_references={s.key: known[s.key].txn_reference_ms for s in sources},
        brief_runs=frozenset(
            s.key for s in sources if len(s.plan.judged_partitions()) > DETAILED_UP_TO
        ),
        decisions={
            (s.key, *tp): by_pe for s in sources for tp, by_pe in known[s.key].decisions.items()
        },
        deleted={
            (s.key, *tp): offset
            for s in sources
            for tp, offset in deleted_below(s.artifacts.timeline).items()
        },
    )


def assemble(source: RunSource, out: EngineOutput) -> RunResult:
    rows = sorted(out.rows, key=lambda r: (r.topic, r.partition))
    audit = out.audit
    if audit is None:
        known = decide.know(source.plan, out.metadata_logs)
        audit = decide.assemble(
            source.plan,
            (r for row in rows for r in row.replicas),
            (row.verdict for row in rows if row.verdict is not None),
            out.metadata_logs,
            known,
        )
    result = RunResult(source, audit, [r for r in rows if r.status != UNREAD])
    result.producer, result.acks_per_second = summarise_sends(out.send_counts)
    result.states = state_history(source, audit.metadata)
    result.tables_dir = out.tables_dir
    return result


def summarise_sends(
    counts: dict[tuple[str, int | None, bool, str | None], int],
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Counts per acks setting, the most frequent errors, and acks per second."""
    if not counts:
        return None, []
    by_acks: dict[str, dict[str, int]] = defaultdict(lambda: {"sent": 0, "acked": 0})
    errors: dict[str, int] = defaultdict(int)
    seconds: dict[int, dict[str, int]] = defaultdict(lambda: {"acked": 0, "failed": 0})
    for (acks, second, ok, error), n in counts.items():
        by_acks[acks]["sent"] += n
        if ok:
            by_acks[acks]["acked"] += n
        elif error is not None:
            errors[error] += n
        if second is not None:
            seconds[second]["acked" if ok else "failed"] += n
    sent = sum(v["sent"] for v in by_acks.values())
    acked = sum(v["acked"] for v in by_acks.values())
    summary = {
        "sent": sent,
        "acked": acked,
        "failed": sent - acked,
        "by_acks": {k: dict(v) for k, v in sorted(by_acks.items())},
        "errors": sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:10],
    }
    return summary, [{"second": s, **v} for s, v in sorted(seconds.items())]


def count_sends(sends: Iterable[Any]) -> dict[tuple[str, int | None, bool, str | None], int]:
    """The counts `summarise_sends` takes, from `Send` records (the local engine's way;
    the Spark engine aggregates the same key)."""
    counts: dict[tuple[str, int | None, bool, str | None], int] = defaultdict(int)
    for s in sends:
        moment = s.acked if s.acked is not None else s.sent
        second = None if moment is None else int(moment // 1)
        counts[(str(s.acks), second, s.ok, s.error)] += 1
    return dict(counts)


def state_history(source: RunSource, metadata: MetadataLog | None) -> list[StateRecord]:
    """The partition-state history: states.jsonl, else what the timeline's state events
    say; and the KRaft metadata log's record of every change."""
    art = source.artifacts
    out = list(art.states)
    if not out:
        out = [
            StateRecord(
                e.topic or "",
                e.partition or 0,
                e.leader if e.leader is not None else -1,
                e.epoch,
                [int(x) for x in e.data.get("isr") or []],
                _recovery(e.data.get("recovery_state")),
                None,
                "timeline",
                e.wall,
            )
            for e in art.timeline
            if e.kind == EventKind.STATE and e.leader is not None and e.topic
        ]
    if metadata is not None:
        out += [
            StateRecord(
                event.topic,
                event.partition,
                event.leader,
                event.leader_epoch,
                list(event.isr),
                event.leader_recovery_state,
                event.offset,
                "metadata-log",
            )
            for event in metadata.events
            if event.topic is not None and event.topic not in METADATA_TOPICS
        ]
    return out


def _recovery(value: Any) -> RecoveryState:
    try:
        return RecoveryState.parse(value) if value is not None else RecoveryState.RECOVERED
    except (KeyError, ValueError):
        return RecoveryState.RECOVERED
