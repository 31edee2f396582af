"""The local engine: each source's read tasks run in this process, one partition at a time
(`checkers.audit.local.execute`), and its producer history is read here too.

No JVM starts: this is the engine for one run's report, and for audits that fit one
machine (see `logfork audit --engine`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from checkers.audit import decide
from checkers.audit.local import execute
from checkers.audit.plan import TopicPartition
from reports.judge import PartitionRow, partition_row
from reports.results import Assemble, EngineOutput, RunResult, count_sends, judge_config
from reports.sources import RunSource
from runrecord.history import Send
from runrecord.rundir import RunDir
from runrecord.typed import to_json


def acknowledged_by_partition(sends: Sequence[Send]) -> dict[TopicPartition, list[dict[str, Any]]]:
    out: dict[TopicPartition, list[dict[str, Any]]] = defaultdict(list)
    for s in sends:
        if s.ok and s.partition is not None:
            out[(s.topic, s.partition)].append(to_json(s))
    return out


def run(sources: Sequence[RunSource], assemble: Assemble) -> list[RunResult]:
    # The brief/detailed choice needs no leaders: they are the executor's own business here.
    config = judge_config(sources, {s.key: decide.Known() for s in sources})
    runs: list[RunResult] = []
    for source in sources:
        sends: list[Send] = []
        if source.artifacts.producer is not None and source.path is not None:
            sends, problems = RunDir(source.path).sends()
            source.artifacts.problems.extend(problems)
        acked = acknowledged_by_partition(sends)

        def row(tp, summaries, judged, verdict, key=source.key, acked=acked) -> PartitionRow:
            return partition_row(config, key, tp, summaries, judged, verdict, acked.get(tp, []))

        done = execute(source.plan, source.protocol, on_partition=row)
        rows = list(done.extras.values())
        rows += [row(tp, [], [], None) for tp in sorted(acked.keys() - done.extras.keys())]
        out = EngineOutput(rows=rows, send_counts=count_sends(sends), audit=done.result)
        runs.append(assemble(source, out))
    return runs
