"""The Parquet tables the Spark engine writes: beside a reported run (`<run>/tables/`), or
where an audit asks (`--tables DIR`).

The scan tasks write the tables as large as the logs (batches, lineage, epochs) themselves;
the driver writes the small ones from the assembled results (runs, errors, states,
timeline, verdicts); Spark writes the producer history, which can hold millions of sends.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from basics.errors import LogforkError
from reports import tables as T
from reports.outputs import (
    Location,
    as_location,
    child,
    fresh,
    has_parquet,
    read_parquet,
    remove,
    write_parquet,
)
from reports.scan import BATCHES_TABLE, EPOCHS_TABLE, LINEAGE_TABLE
from reports.sources import RunSource
from runrecord.rundir import TABLES
from runrecord.typed import to_json

# The timeline table's columns an event fills itself (the rest: `fields_json`).
TIMELINE_COLUMNS = (
    "name",
    "wall",
    "mono",
    "node",
    "broker",
    "topic",
    "partition",
    "leader",
    "epoch",
)

if TYPE_CHECKING:
    from reports.results import RunResult


def destinations(sources: Sequence[RunSource], tables_dir: Location | None) -> dict[str, Location]:
    """Where each source's tables go: beside a reported run (`<run>/tables`), else under
    `tables_dir` (itself for one source, `tables_dir/<key>` for several); else nowhere."""
    out: dict[str, Location] = {}
    loose = [s for s in sources if not (s.tables_beside and s.path is not None)]
    for source in sources:
        if source.tables_beside and source.path is not None:
            out[source.key] = source.path / TABLES
        elif tables_dir is not None:
            out[source.key] = tables_dir if len(loose) == 1 else child(tables_dir, source.key)
    return out


@contextlib.contextmanager
def staged(dests: dict[str, Location]) -> Iterator[dict[str, Location]]:
    """Where to write each destination's tables so that a failed run leaves none behind:
    a local staging folder beside it, moved in place (replacing what was there) when the
    block completes; a remote destination itself (an object store renames no folder),
    emptied first. Either is removed when the block fails."""
    token = uuid.uuid4().hex[:12]
    staging = {
        key: dest if isinstance(dest, str) else dest.parent / f".{dest.name}.partial-{token}"
        for key, dest in dests.items()
    }
    try:
        for key, folder in staging.items():
            try:
                fresh(folder)
            except OSError as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise LogforkError(f"cannot write the tables to {dests[key]}: {reason}") from None
        yield staging
    except BaseException:
        for folder in staging.values():
            with contextlib.suppress(OSError):
                remove(folder)
        raise
    for key, dest in dests.items():
        if isinstance(dest, Path):
            if dest.exists():
                shutil.rmtree(dest)
            Path(staging[key]).replace(dest)


def write_arrow(path: Location, table: pa.Table) -> None:
    """One Parquet dataset folder, like those Spark writes: `<name>.parquet/part-0.parquet`."""
    fresh(path)
    write_parquet(path, "part-00000.parquet", table)


def read_table(run_tables: Location, name: str) -> pa.Table:
    """A table written by the pipeline, as one Arrow table."""
    return read_parquet(child(as_location(str(run_tables)), f"{name}.parquet"))


def write_tables(
    spark: Any, runs: Sequence[RunResult], sends: Any, dests: dict[str, Location]
) -> None:
    """The driver's small tables; the tables the scan tasks wrote (a run without a batch
    gets empty ones); the producer history through Spark."""
    by_key = {r.key: r for r in runs}
    for key, dest in dests.items():
        for name, table in driver_tables(by_key[key]).items():
            write_arrow(child(dest, f"{name}.parquet"), table)
        for name, schema in (
            (BATCHES_TABLE, T.BATCHES_SCHEMA),
            (LINEAGE_TABLE, T.LINEAGE_TABLE_SCHEMA),
            (EPOCHS_TABLE, T.EPOCHS_SCHEMA),
        ):
            if not has_parquet(child(dest, name)):
                write_arrow(child(dest, name), schema.empty_table())
    if sends is not None:
        _write_spark(spark, "producer", sends, {k: Path(d) for k, d in dests.items()})
    else:
        empty = pa.schema([("run", pa.string()), *T.PRODUCER_FIELDS]).empty_table()
        for dest in dests.values():
            write_arrow(child(dest, "producer.parquet"), empty)


def _write_spark(spark: Any, name: str, frame: Any, dests: dict[str, Path]) -> None:
    """Write `frame` once, split by run, then move each run's files to its destination."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    staging_root = next(iter(dests.values())).parent
    staging = staging_root / f".logfork-staging-{uuid.uuid4().hex[:12]}"
    try:
        (
            frame.filter(F.col("run").isin(list(dests)))
            .withColumn("run_partition", F.col("run"))
            .sortWithinPartitions(
                "run", *[c for c in ("topic", "partition", "offset") if c in frame.columns]
            )
            .write.mode("overwrite")
            .partitionBy("run_partition")
            .parquet(str(staging))
        )
        empty = to_arrow_schema(frame.schema).empty_table()
        for key, dest in dests.items():
            target = dest / f"{name}.parquet"
            if target.exists():
                shutil.rmtree(target)
            part = staging / f"run_partition={key}"
            if part.is_dir():
                shutil.move(str(part), str(target))
            else:
                write_arrow(target, empty)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def driver_tables(result: RunResult) -> dict[str, pa.Table]:
    source = result.source
    key = source.key
    art = source.artifacts
    info, verdict = art.run, art.verdict
    runs = pa.Table.from_pylist(
        [
            {
                "run": key,
                "path": None if source.path is None else str(source.path),
                "scenario": source.scenario,
                "title": info.title if info else None,
                "kip": info.kip if info else None,
                "jira": info.jira if info else None,
                "fixed_in": info.fixed_in if info else None,
                "release": source.release,
                "mode": info.mode if info else None,
                "outcome": verdict.outcome.value if verdict else None,
                "expected": verdict.expected.value if verdict else None,
                "as_expected": verdict.as_expected if verdict else None,
                "summary": verdict.summary if verdict else None,
                "started": info.started if info else None,
                "finished": info.finished if info else None,
                "protocol": source.protocol.value,
                "run_json": None if info is None else json.dumps(to_json(info)),
                "verdict_json": None if verdict is None else json.dumps(to_json(verdict)),
                "cluster_json": None if art.cluster is None else json.dumps(to_json(art.cluster)),
            }
        ],
        schema=T.RUNS_SCHEMA,
    )
    errors = pa.Table.from_pylist(
        [{"run": key, "broker": e.broker_id, **e.error.to_dict()} for e in result.audit.errors],
        schema=T.ERRORS_SCHEMA,
    )
    timeline = pa.Table.from_pylist(
        [
            {
                "run": key,
                "seq": i,
                **{f: getattr(e, f) for f in TIMELINE_COLUMNS},
                "kind": e.kind.value,
                "fields_json": json.dumps(to_json(e), default=str),
            }
            for i, e in enumerate(art.timeline)
        ],
        schema=T.TIMELINE_SCHEMA,
    )
    states = pa.Table.from_pylist(
        [{"run": key, "seq": i, **to_json(s)} for i, s in enumerate(result.states)],
        schema=T.STATES_SCHEMA,
    )
    verdicts = pa.Table.from_pylist(
        [
            {
                "run": key,
                "topic": p.topic,
                "partition": p.partition,
                "status": p.status,
                "diverged_at": v.diverged_at if v else None,
                "below_high_watermark": v.below_high_watermark if v else None,
                "high_watermark": v.high_watermark if v else None,
                "leader": v.leader if v else None,
                "replicas": v.replicas if v else [],
                "protocol": source.protocol.value,
                "acked": p.acked,
                "lost": p.lost,
                "verdict_json": None if v is None else json.dumps(v.to_dict()),
                "report_json": json.dumps(p.report),
            }
            for p in result.partitions
            for v in [p.verdict]
        ],
        schema=T.VERDICTS_TABLE_SCHEMA,
    )
    return {
        "runs": runs,
        "errors": errors,
        "states": states,
        "timeline": timeline,
        "verdicts": verdicts,
    }
