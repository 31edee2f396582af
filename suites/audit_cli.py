"""`logfork audit DIR...`: judge the logs in broker log dirs, no cluster needed.

Read every replica's segments straight from disk and judge whether replicas diverged, and
whether transactions hang, are torn or wrote a sequence twice. The audit runs on one of two
engines (`reports.pipeline`): local (this process, no JVM) or Spark; both print the same
summary or JSON. Exit 0: all consistent; 1: a partition diverged or holds such a
transaction finding; 2: an input could not be read at all (one paragraph, never a
traceback). docs/audit.md tells how to audit production logs and logs on many machines.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from basics.errors import LogforkError
from basics.protocol import Protocol
from checkers.audit import EXIT_UNREADABLE
from checkers.audit.local import audit
from checkers.audit.plan import plan_audit
from checkers.audit.render import render
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from reports.cli import engine_arguments, error_reason, paragraph, spark_wanted
from reports.sources import txn_reference, txn_timeout

HELP = "judge the logs in broker log dirs (no cluster needed)"
# Above this many bytes of segments, `logfork audit` picks the Spark engine by itself: the
# local engine reads on one core, Spark on all of them once its JVM has started. Measured
# with benchmarks.crossover on a 2-core machine (one-record batches, start-up included):
# both engines stream at about 70 MiB/s there, Spark after 10-16 s of start-up, and the
# fitted lines cross at 9.4 and 21.9 GiB in two runs; the lower one, rounded, is the bar.
AUTO_SPARK_BYTES = 10 * 1024**3


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    engine_arguments(parser, f"local, or spark above {AUTO_SPARK_BYTES // 1024**3} GiB of logs")
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


def main(args: argparse.Namespace) -> int:
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
