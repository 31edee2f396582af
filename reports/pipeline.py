"""The report pipeline: sources in, one `RunResult` per source out, on either engine.

    sources (the audit's plan plus the run record's small files)
      -> engine: the plan's read tasks run, every partition judged (`checkers.audit.decide`)
         and given its report row (`reports.judge.partition_row`); sends counted
      -> assembly, the same for both engines (`reports.results.assemble`)

The local engine (`reports.engine_local`) runs the read tasks in this process, a partition
at a time: no JVM to start, which is what one run's report wants. The Spark engine
(`reports.engine_spark`) runs them in Spark tasks and writes the Parquet tables: what many
runs, or logs larger than one machine, want. Both hand over the same rows, so the answer
is the same.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from basics.errors import LogforkError
from reports import engine_local, engine_spark
from reports.engine_local import Judged
from reports.outputs import Location
from reports.results import PipelineResult, assemble
from reports.sources import RunArtifacts, RunSource
from runrecord.rundir import RunDir

ENGINES = ("local", "spark")
LOCAL = "this process"  # where the local engine judges every partition
JUDGED = "the run itself"  # where a run's own judgement was made (`judged_result`)


def judged_result(judged: Judged) -> PipelineResult:
    """The result of what a run judged itself, assembled with its record as the run left
    it: nothing is read from its segments or judged again."""
    started = time.monotonic()
    source = judged.source
    if source.path is not None:
        source.artifacts = RunArtifacts.read(RunDir(source.path))
    run = assemble(source, judged.output)
    placement = {(run.key, p.topic, p.partition): JUDGED for p in run.partitions}
    return PipelineResult([run], "local", {"total": time.monotonic() - started}, placement)


def run_pipeline(
    sources: Sequence[RunSource],
    *,
    engine: str = "spark",
    master: str | None = None,
    write_tables: bool = True,
    tables_dir: Location | None = None,
) -> PipelineResult:
    """Read, judge and assemble every source. With the Spark engine, tables go to
    `<run>/tables/` for reported run directories, or under `tables_dir` (one folder per
    source key when there are several) for audits; `write_tables=False` writes none. The
    local engine writes no tables."""
    started = time.monotonic()
    if engine == "local":
        runs = engine_local.run(sources, assemble)
        placement = {(r.key, p.topic, p.partition): LOCAL for r in runs for p in r.partitions}
        result = PipelineResult(runs, "local", {}, placement)
    elif engine == "spark":
        done = engine_spark.run(
            sources, assemble, master=master, write_tables=write_tables, tables_dir=tables_dir
        )
        result = PipelineResult(done.runs, done.master, done.timings, done.placement)
    else:
        raise LogforkError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    result.timings["total"] = time.monotonic() - started
    return result
