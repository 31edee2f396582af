"""``logfork report RUN_DIR... --out DIR``, and what it shares with ``logfork audit``
(suites.audit_cli): the choice of engine (`reports.pipeline`: local, in this process with
no JVM, or Spark) and errors as one paragraph, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from basics.errors import LogforkError
from basics.protocol import Protocol
from reports.spark import MASTER_ENV
from runrecord import exits

if TYPE_CHECKING:
    from reports.engine_local import Judged

EXIT_OK, EXIT_BAD_INPUT = exits.OK, exits.USAGE


def paragraph(text: str) -> None:
    print(
        textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False),
        file=sys.stderr,
    )


def error_reason(exc: BaseException) -> str:
    """`Type: first line` of an error: Spark's carry whole JVM and worker stack traces."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:400] if lines else 'no message'}"


def engine_arguments(parser: argparse.ArgumentParser, default: str) -> None:
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
    engine_arguments(parser, "spark")
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
    judged: Judged | None = None,
) -> Path:
    """The report of one run, written into `out` (whose index.html gains the run, unless
    `index` is false: `logfork atlas` writes its own index). `judged`: what the run judged
    itself, which the report renders as it is; without it the report reads and judges the
    run's logs with `engine`."""
    from reports.pipeline import judged_result, run_pipeline
    from reports.render import write_reports
    from reports.sources import run_sources

    if judged is not None:
        return write_reports(judged_result(judged), out, index=index)[0]
    sources, problems = run_sources([run_dir])
    if problems:
        raise LogforkError(problems[0])
    result = run_pipeline(sources, engine=engine, master=master, write_tables=engine == "spark")
    return write_reports(result, out, index=index)[0]


def report_path(run_dir: Path, out: Path) -> Path:
    """Where `report_run` writes the report of `run_dir` in `out`."""
    from reports.render import report_name
    from reports.sources import run_key

    return out / report_name(run_key(run_dir))
