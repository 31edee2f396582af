"""``logfork report RUN_DIR... --out DIR`` and ``logfork audit DIR... --html FILE``.

Both run the Spark pipeline (`reports.pipeline`) and render the same report. The audit keeps
`checkers.audit`'s contract: the same summary or JSON, and exit 0 when every partition is
consistent, 1 when one diverged, 2 when an input could not be read at all. Errors print one
paragraph, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from checkers import audit as checkers_audit
from checkers.model import Protocol
from fixtures.errors import LogforkError
from reports.spark import MASTER_ENV

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def _paragraph(text: str) -> None:
    print(
        textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False),
        file=sys.stderr,
    )


def error_reason(exc: BaseException) -> str:
    """`Type: first line` of an error: Spark's carry whole JVM and worker stack traces."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:400] if lines else 'no message'}"


def _master_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark-master",
        metavar="URL",
        help=f"Spark master to run the pipeline on (default: ${MASTER_ENV}, else local[*]); "
        "for a cluster, logfork must be installed on its workers",
    )


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
    _master_argument(parser)
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
    from reports.sources import find_run_dirs, run_source, unique_key

    try:
        run_dirs, problems = find_run_dirs(args.run_dirs)
        for problem in problems:
            _paragraph(f"logfork report: skipped {problem}.")
        if not run_dirs:
            _paragraph("logfork report: no run directory to report on.")
            return EXIT_BAD_INPUT
        protocol = Protocol(args.protocol) if getattr(args, "protocol", None) else None
        taken: set[str] = set()
        sources = [run_source(d, unique_key(d.name, taken), protocol=protocol) for d in run_dirs]
        result = run_pipeline(
            sources,
            master=getattr(args, "spark_master", None),
            write_tables=not getattr(args, "no_tables", False),
        )
        paths = write_reports(result, Path(args.out))
    except LogforkError as exc:
        _paragraph(f"logfork report: {exc}")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - end in a paragraph, never a traceback
        _paragraph(f"logfork report could not complete: {error_reason(exc)}")
        return EXIT_BAD_INPUT
    for run, path in zip(result.runs, paths, strict=False):
        diverged = [p for p in run.partitions if p.status == "diverged"]
        where = "; ".join(f"{p.topic}-{p.partition} diverged at {p.diverged_at}" for p in diverged)
        print(f"{run.key}: {where or 'no divergence'} -> {path}")
    print(f"index: {paths[-1]}")
    return EXIT_BAD_INPUT if problems else EXIT_OK


def report_run(run_dir: Path, out: Path, master: str | None = None) -> Path:
    """The report of one run, written into `out` (whose index.html gains the run)."""
    from reports.pipeline import run_pipeline
    from reports.render import write_reports
    from reports.sources import run_source, unique_key

    result = run_pipeline([run_source(run_dir, unique_key(run_dir.name, set()))], master=master)
    return write_reports(result, out)[0]


# --------------------------------------------------------------------------------------
# logfork audit --html


def add_audit_html_arguments(parser: argparse.ArgumentParser) -> None:
    """Options `logfork audit` gains beside `checkers.audit.add_arguments`."""
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also render the audit as a self-contained HTML report (runs the Spark pipeline)",
    )
    _master_argument(parser)
    parser.add_argument(
        "--tables",
        metavar="DIR",
        help="with --html: also write the pipeline's Parquet tables into DIR",
    )


def run_audit(args: argparse.Namespace) -> int:
    """`logfork audit`: without --html exactly `checkers.audit.run`; with it, the same
    verdicts, output and exit code, computed by the Spark pipeline, plus the report."""
    if not getattr(args, "html", None):
        return checkers_audit.run(args)
    from reports.pipeline import run_pipeline
    from reports.render import write_report
    from reports.sources import audit_source

    tables = getattr(args, "tables", None)
    try:
        protocol = Protocol(getattr(args, "protocol", None) or Protocol.KIP_279.value)
        source = audit_source(args.dirs, protocol=protocol, topic=getattr(args, "topic", None))
        result = run_pipeline(
            [source],
            master=getattr(args, "spark_master", None),
            write_tables=tables is not None,
            tables_dir=Path(tables) if tables else None,
            verdict_objects=True,
        )
        run = result.runs[0]
        audited = run.audit_result()
    except LogforkError as exc:
        _paragraph(f"logfork audit: {exc}")
        return checkers_audit.EXIT_UNREADABLE
    except Exception as exc:  # noqa: BLE001 - end in a paragraph, never a traceback
        _paragraph(f"logfork audit could not complete: {error_reason(exc)}")
        return checkers_audit.EXIT_UNREADABLE
    json_path = getattr(args, "json", None)
    if json_path == "-":
        print(audited.to_json())
    else:
        print(audited.summary())
        if json_path:
            try:
                Path(json_path).write_text(audited.to_json() + "\n")
            except OSError as exc:
                _paragraph(f"could not write {json_path}: {exc}")
                return checkers_audit.EXIT_UNREADABLE
    try:
        write_report(run, Path(args.html), master=result.master, timings=result.timings)
    except OSError as exc:
        _paragraph(f"could not write {args.html}: {exc}")
        return checkers_audit.EXIT_UNREADABLE
    print(f"report: {args.html}", file=sys.stderr)
    return audited.exit_code


def main(argv: list[str] | None = None) -> int:
    """``python -m reports.cli report ...`` / ``audit ...``: the two commands on their own."""
    parser = argparse.ArgumentParser(prog="logfork")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("report", help="HTML reports of run directories")
    add_report_arguments(p)
    p.set_defaults(func=run_report)
    p = sub.add_parser("audit", help="judge broker log dirs")
    checkers_audit.add_arguments(p)
    add_audit_html_arguments(p)
    p.set_defaults(func=run_audit)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
