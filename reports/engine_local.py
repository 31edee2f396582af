"""The local engine: each source's read tasks run in this process, one partition at a time
(`checkers.audit.local.execute`), and its producer history is read here too.

No JVM starts: this is the engine for one run's report, and for audits that fit one
machine (see `logfork audit --engine`). A run judges its own logs through `judge` too, and
keeps what it made (`Judged`): its report renders that, rather than reading the segments
and judging them again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basics.protocol import Protocol
from checkers.audit import decide
from checkers.audit.local import OnPartition, execute
from checkers.audit.plan import AuditPlan, TopicPartition
from checkers.audit.result import AuditResult
from reports.judge import JudgeConfig, PartitionRow, partition_row
from reports.results import Assemble, EngineOutput, RunResult, count_sends, judge_config
from reports.sources import RunSource, own_source, release_protocol
from runrecord.history import Send
from runrecord.rundir import RunDir
from runrecord.typed import to_json


@dataclass
class Judged:
    """One source read and judged once: its plan (in `source`) and what the engine made of
    it. All a report needs of it beyond the run record's small files."""

    source: RunSource
    output: EngineOutput

    @property
    def audit(self) -> AuditResult:
        if self.output.audit is None:  # `judge` assembles it: a Judged without is a bug
            raise ValueError(f"{self.source.key}: judged without its audit result")
        return self.output.audit


def _sends(source: RunSource) -> list[Send]:
    """What the source's producers sent (producer.jsonl), its skipped lines told."""
    if source.artifacts.producer is None or source.path is None:
        return []
    sends, problems = RunDir(source.path).sends()
    source.artifacts.problems.extend(problems)
    return sends


def acknowledged_by_partition(
    sends: Sequence[Send], topic: str | None = None
) -> dict[TopicPartition, list[dict[str, Any]]]:
    """The acknowledged sends of each partition (of `topic` alone, when named)."""
    out: dict[TopicPartition, list[dict[str, Any]]] = defaultdict(list)
    for s in sends:
        if s.ok and s.partition is not None and topic in (None, s.topic):
            out[(s.topic, s.partition)].append(to_json(s))
    return out


def judge(
    source: RunSource, config: JudgeConfig | None = None, also: OnPartition | None = None
) -> Judged:
    """Read and judge every partition of the source's plan, each given its report row;
    `also` sees each partition while its replicas are in memory (a run's own checks)."""
    sends = _sends(source)
    # The brief/detailed choice needs no leaders: they are the executor's own business here.
    config = config or judge_config([source], {source.key: decide.Known()})
    acked = acknowledged_by_partition(sends, source.plan.topic)

    def row(tp, summaries, judged, verdict) -> PartitionRow:
        if also is not None:
            also(tp, summaries, judged, verdict)
        return partition_row(config, source.key, tp, summaries, judged, verdict, acked.get(tp, []))

    done = execute(source.plan, source.protocol, on_partition=row)
    rows = list(done.extras.values())
    rows += [
        partition_row(config, source.key, tp, [], [], None, acked[tp])
        for tp in sorted(acked.keys() - done.extras.keys())
    ]
    return Judged(
        source, EngineOutput(rows=rows, send_counts=count_sends(sends), audit=done.result)
    )


def nothing_judged(run_dir: Path) -> Judged:
    """A run that judged none of its logs (it ended before): its report shows its record
    and what its producers sent, and no partition's verdict, which the run never earned."""
    source = own_source(run_dir, AuditPlan(inputs=[str(run_dir)]), Protocol.KIP_279)
    source.protocol = release_protocol(source.release)
    sends = _sends(source)
    audit = execute(source.plan, source.protocol).result
    return Judged(source, EngineOutput(send_counts=count_sends(sends), audit=audit))


def run(sources: Sequence[RunSource], assemble: Assemble) -> list[RunResult]:
    config = judge_config(sources, {s.key: decide.Known() for s in sources})
    return [assemble(source, judge(source, config).output) for source in sources]
