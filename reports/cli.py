"""``logfork audit DIR...`` and ``logfork report RUN_DIR... --out DIR``.

The audit runs on one of two engines (`reports.pipeline`): local (this process, no JVM) or
Spark. Both print the same summary or JSON and exit 0 when every partition is consistent,
1 when one diverged, 2 when an input could not be read at all. Errors print one paragraph,
never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from basics.errors import LogforkError
from basics.protocol import Protocol
from checkers.audit import EXIT_UNREADABLE
from checkers.audit.local import audit
from checkers.audit.plan import plan_audit
from checkers.audit.render import render
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from reports.sources import txn_reference, txn_timeout
from reports.spark import MASTER_ENV
from runrecord import exits

EXIT_OK, EXIT_BAD_INPUT = exits.OK, exits.USAGE
# Above this many bytes of segments, `logfork audit` picks the Spark engine by itself: the
# local engine reads on one core, Spark on all of them once its JVM has started. Measured
# with benchmarks.crossover on a 2-core machine (one-record batches, start-up included):
# both engines stream at about 70 MiB/s there, Spark after 10-16 s of start-up, and the
# fitted lines cross at 9.4 and 21.9 GiB in two runs; the lower one, rounded, is the bar.
AUTO_SPARK_BYTES = 10 * 1024**3


def paragraph(text: str) -> None:
    print(
        textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False),
        file=sys.stderr,
    )


def error_reason(exc: BaseException) -> str:
    """`Type: first line` of an error: Spark's carry whole JVM and worker stack traces."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:400] if lines else 'no message'}"


def _engine_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--engine",
        choices=("local", "spark"),
        help=f"where the read tasks run: in this process, or on Spark (default: {default})",
    )
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        help=f"Spark master (default: ${MASTER_ENV}, else local[*]); implies --engine spark. "
        "For a cluster, logfork must be installed on its workers",
    )


def spark_wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "spark_master", None) or os.environ.get(MASTER_ENV))


# --------------------------------------------------------------------------------------
# logfork audit


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="a broker log dir (a path, file://, or a filesystem URI such as s3://bucket/dir "
        "or hdfs://host/dir), or a logfork run directory (holding run.json)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="also write the verdicts as JSON to FILE ('-' for stdout only)",
    )
    parser.add_argument("--topic", metavar="T", help="audit only the partitions of topic T")
    parser.add_argument(
        "--compacted",
        action="append",
        default=[],
        metavar="TOPIC",
        help="judge TOPIC as compacted (repeatable); internal topics, those whose "
        "cleanup.policy the metadata log says is compact, and those a log cleaner has "
        "cleaned (cleaner-offset-checkpoint) are known without it",
    )
    parser.add_argument(
        "--txn-timeout",
        type=int,
        metavar="MS",
        help="an open transaction whose first batch is this much older than its partition's "
        "newest batch hangs: its coordinator would have aborted it by then (default: the "
        "longest transaction timeout the run directories among DIR recorded, else "
        f"{DEFAULT_TXN_TIMEOUT_MS}, Kafka's transaction.max.timeout.ms)",
    )
    parser.add_argument(
        "--protocol",
        choices=[p.value for p in Protocol],
        default=Protocol.KIP_279.value,
        help="protocol the prediction of what happens next follows (default: %(default)s)",
    )
    _engine_arguments(parser, f"local, or spark above {AUTO_SPARK_BYTES // 1024**3} GiB of logs")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also render the audit as a self-contained HTML report",
    )
    parser.add_argument(
        "--tables",
        metavar="DIR",
        help="also write the Parquet tables into DIR, a path or filesystem URI (Spark engine)",
    )


def choose_engine(args: argparse.Namespace) -> str:
    """--engine when given; Spark when a master is named or tables are asked for; else by
    the size of the input."""
    if args.engine:
        return args.engine
    if spark_wanted(args) or args.tables:
        return "spark"
    size = sum(t.size for t in plan_audit(args.dirs, args.topic, args.compacted).tasks)
    return "spark" if size > AUTO_SPARK_BYTES else "local"


def run_audit(args: argparse.Namespace) -> int:
    try:
        protocol = Protocol(args.protocol)
        engine = choose_engine(args)
        if engine == "local" and args.tables:
            raise LogforkError("--tables needs the Spark engine (--engine spark)")
        if args.engine == "local" and args.spark_master:
            raise LogforkError("--spark-master needs the Spark engine, not --engine local")
        run = None
        if engine == "local" and not args.html:
            result = audit(
                args.dirs,
                topic=args.topic,
                protocol=protocol,
                compacted=args.compacted,
                txn_timeout_ms=txn_timeout(args.dirs, args.txn_timeout),
                txn_reference_ms=txn_reference(args.dirs),
            )
        else:
            from reports.outputs import as_location
            from reports.pipeline import run_pipeline
            from reports.sources import audit_source

            source = audit_source(
                args.dirs,
                protocol=protocol,
                topic=args.topic,
                compacted=args.compacted,
                txn_timeout_ms=args.txn_timeout,
            )
            pipeline = run_pipeline(
                [source],
                engine=engine,
                master=args.spark_master,
                write_tables=args.tables is not None,
                tables_dir=as_location(args.tables) if args.tables else None,
            )
            run = pipeline.runs[0]
            result = run.audit
    except LogforkError as exc:
        paragraph(f"logfork audit: {exc}")
        return EXIT_UNREADABLE
    except Exception as exc:  # noqa: BLE001 - end in a paragraph, never a traceback
        paragraph(f"logfork audit could not complete: {error_reason(exc)}")
        return EXIT_UNREADABLE
    if args.json == "-":
        print(result.to_json())
    else:
        print(render(result))
        if args.json:
            try:
                Path(args.json).write_text(result.to_json() + "\n")
            except OSError as exc:
                paragraph(f"could not write {args.json}: {exc}")
                return EXIT_UNREADABLE
    if run is not None and args.html:
        from reports.render import write_report

        try:
            write_report(run, Path(args.html), engine=pipeline.engine, timings=pipeline.timings)
        except OSError as exc:
            paragraph(f"could not write {args.html}: {exc}")
            return EXIT_UNREADABLE
        print(f"report: {args.html}", file=sys.stderr)
    return result.exit_code


# --------------------------------------------------------------------------------------
# logfork report


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="a run directory (holding run.json), or a folder of them such as runs/",
    )
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="where the reports go: one <run>.html per run, and index.html over them",
    )
    _engine_arguments(parser, "spark")
    parser.add_argument(
        "--protocol",
        choices=[p.value for p in Protocol],
        help="protocol the model follows (default: each run's release's own)",
    )
    parser.add_argument(
        "--no-tables",
        action="store_true",
        help="do not write the Parquet tables (<run>/tables/) beside each run",
    )


def run_report(args: argparse.Namespace) -> int:
    """Reports for run directories. Exit 0 when every report was written, 2 when some input
    was not a run directory (the others still get reports)."""
    from reports.pipeline import run_pipeline
    from reports.render import write_reports
    from reports.sources import find_run_dirs, run_sources

    engine = args.engine or "spark"
    try:
        if engine == "local" and args.spark_master:
            raise LogforkError("--spark-master needs the Spark engine, not --engine local")
        run_dirs, problems = find_run_dirs(args.run_dirs)
        protocol = Protocol(args.protocol) if args.protocol else None
        sources, unreadable = run_sources(run_dirs, protocol=protocol)
        problems += unreadable
        for problem in problems:
            paragraph(f"logfork report: skipped {problem}")
        if not sources:
            paragraph("logfork report: no run directory to report on.")
            return EXIT_BAD_INPUT
        result = run_pipeline(
            sources,
            engine=engine,
            master=args.spark_master,
            write_tables=engine == "spark" and not args.no_tables,
        )
        paths = write_reports(result, Path(args.out))
    except LogforkError as exc:
        paragraph(f"logfork report: {exc}")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - end in a paragraph, never a traceback
        paragraph(f"logfork report could not complete: {error_reason(exc)}")
        return EXIT_BAD_INPUT
    for run, path in zip(result.runs, paths, strict=False):
        diverged = [p for p in run.partitions if p.status == "diverged"]
        where = "; ".join(
            f"{p.topic}-{p.partition} diverged at {p.verdict.diverged_at}"
            for p in diverged
            if p.verdict is not None
        )
        print(f"{run.key}: {where or 'no divergence'} -> {path}")
    print(f"index: {paths[-1]}")
    return EXIT_BAD_INPUT if problems else EXIT_OK


def report_run(
    run_dir: Path,
    out: Path,
    *,
    engine: str = "local",
    master: str | None = None,
    index: bool = True,
) -> Path:
    """The report of one run, written into `out` (whose index.html gains the run, unless
    `index` is false: `logfork atlas` writes its own index)."""
    from reports.pipeline import run_pipeline
    from reports.render import write_reports
    from reports.sources import run_sources

    sources, problems = run_sources([run_dir])
    if problems:
        raise LogforkError(problems[0])
    result = run_pipeline(sources, engine=engine, master=master, write_tables=engine == "spark")
    return write_reports(result, out, index=index)[0]


def report_path(run_dir: Path, out: Path) -> Path:
    """Where `report_run` writes the report of `run_dir` in `out`."""
    from reports.render import report_name
    from reports.sources import unique_key

    return out / report_name(unique_key(run_dir.name, set()))
