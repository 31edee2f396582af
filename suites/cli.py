"""The `logfork` command.

    logfork run kip-279-s1-equal --kafka-version 1.1.1      reproduce a KIP scenario
    logfork list                                             the scenarios
    logfork bisect kip-279-s1-equal --bad 1.1.1 --good 2.0.1 the release that fixed it
    logfork atlas --scenarios kip-101-s1,kip-279-s3           scenarios x releases, a grid
    logfork audit DIR [DIR ...]                              judge broker log dirs
    logfork prepare --kafka-version 3.9.2                    build images, fetch jars
    logfork clean                                            remove leftovers of dead runs

Errors about the machine or the input print one paragraph and exit 2; no tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from basics.errors import LogforkError
from basics.releases import NEWEST_3_9, NEWEST_4
from fixtures.cleanup import Terminated
from runrecord.outcome import Outcome
from runrecord.power import POWER_MODELS


def _add_target(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    parser.add_argument(
        "--kafka-version",
        action="append" if many else "store",
        required=True,
        metavar="V",
        help=f"a Kafka release (e.g. 1.1.1, 2.8.2, {NEWEST_3_9}, {NEWEST_4}) or the path of a "
        "local distribution (KAFKA_HOME directory or .tgz)" + ("; repeatable" if many else ""),
    )
    parser.add_argument(
        "--base-image",
        metavar="IMAGE",
        help="run nodes on this local image (needs java, iptables, iproute2) instead of "
        "the Debian-built one",
    )


def cmd_run(args: argparse.Namespace) -> int:
    from fixtures.releases import resolve
    from suites import registry
    from suites.scenario import run_judged

    scenario = registry.get(args.scenario)
    release = resolve(args.kafka_version).release
    mode = args.kafka_mode or next(
        (m for m in scenario.modes if m in release.modes), release.modes[0]
    )
    if args.power_model:
        from fixtures.disks import check_model

        check_model(args.power_model)
    done = run_judged(
        scenario,
        args.kafka_version,
        mode,
        out=Path(args.out),
        base_image=args.base_image,
        power_model=args.power_model,
    )
    verdict = done.verdict
    if verdict.outcome == Outcome.SETUP_FAILED:
        # Recorded in the run directory; said here as any error about the machine is.
        where = f" (recorded in {verdict.run_dir})" if verdict.run_dir else ""
        print(f"logfork: {verdict.summary}{where}", file=sys.stderr)
        return verdict.exit_code
    print(verdict.headline())
    if verdict.run_dir:
        print(f"run directory: {verdict.run_dir}")
        phases = dict(verdict.phases)
        if not args.no_report:
            from reports.cli import report_run
            from reports.engine_local import nothing_judged

            started = time.monotonic()
            # The report renders what the run judged (none of its partitions, if it judged
            # none); only a Spark engine asked for reads and judges the logs again.
            engine = "spark" if args.spark_master else args.report_engine
            path = report_run(
                Path(verdict.run_dir),
                Path(args.out) / "report",
                engine=engine,
                master=args.spark_master,
                judged=None
                if engine == "spark"
                else done.judged or nothing_judged(Path(verdict.run_dir)),
            )
            phases["report"] = time.monotonic() - started
            print(f"report: {path}")
        split = ", ".join(f"{k} {v:.1f}s" for k, v in phases.items())
        print(f"wall time {sum(phases.values()):.1f}s: {split}")
    return verdict.exit_code


def cmd_list(args: argparse.Namespace) -> int:
    from suites.registry import SCENARIOS

    for s in SCENARIOS.values():
        refs = " ".join(x for x in (s.kip, s.jira) if x)
        print(f"{s.id:34} {s.fixed_text():32} {refs:22} {s.title}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from fixtures.images import ensure_base_image, image_size
    from fixtures.releases import resolve

    for spec in args.kafka_version:
        dist = resolve(spec)
        image = ensure_base_image(dist.release.java, args.base_image)
        print(
            f"Kafka {dist.release}: {len(dist.jars)} jars ({dist.size_bytes / 1e6:.1f} MB) in "
            f"{dist.libs}; image {image} ({image_size(image) / 1e6:.0f} MB)"
        )
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from fixtures import cleanup, crashfs, engine

    containers, networks = cleanup.remove_leftovers(engine.client(), include_live=args.all)
    # After the containers: a mount a container still held would only be detached lazily.
    mounts = crashfs.unmount_stale(Path("/"), include_live=args.all)
    print(
        f"removed {containers} container(s), {networks} network(s) and {len(mounts)} "
        "crash-simulating mount(s) left by logfork"
    )
    for mount in mounts:
        print(f"  unmounted {mount}")
    return 0


def _add_command(sub: Any, name: str, module: Any) -> argparse.ArgumentParser:
    """A command whose module has HELP, a docstring, add_arguments and main."""
    p = sub.add_parser(
        name,
        help=module.HELP,
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(p)
    p.set_defaults(func=module.main)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logfork",
        description="Fault-injection suite that proves Kafka replicas never diverge, on real "
        "clusters.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="run one KIP scenario against a fresh cluster",
        description="Run a scenario; exit 0 when the release behaves as its KIP "
        "says (fixed and clean, or not fixed and the bug reproduced with exactly its "
        "symptom), 1 when it does not, 2 when logfork could not run, 3 when the scenario "
        "could not reach its states, 4 when it does not apply to the release or mode.",
    )
    p.add_argument("scenario", help="scenario id (see `logfork list`)")
    _add_target(p)
    p.add_argument(
        "--kafka-mode",
        choices=("zk", "kraft"),
        help="default: ZooKeeper where the release has it, else KRaft",
    )
    p.add_argument(
        "--power-model",
        choices=POWER_MODELS,
        help="how its power losses lose data: cut (at the recovery point), or on a "
        "crash-simulating filesystem unsynced (every unsynced write, create, rename and "
        "unlink lost), torn (a prefix of each file's unsynced pages kept), reorder (any "
        "subset kept) or ordered (as ext4 in data=ordered mode keeps them); default: the "
        "scenario's own (`logfork list` shows which it takes)",
    )
    p.add_argument(
        "--out",
        default="runs",
        metavar="DIR",
        help="where run directories go (default: runs/); the HTML report goes to DIR/report/, "
        "with an index of every run reported there",
    )
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument(
        "--report-engine",
        choices=("local", "spark"),
        default="local",
        help="local (the default): the report renders what the run judged; spark: the "
        "report's pipeline reads and judges the run's logs again on Spark",
    )
    p.add_argument(
        "--spark-master",
        metavar="URL",
        help="run the report's pipeline on this Spark master (implies --report-engine spark)",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("list", help="list the scenarios")
    p.set_defaults(func=cmd_list)

    from reports import cli as reports_cli
    from suites import audit_cli

    _add_command(sub, "audit", audit_cli)
    p = sub.add_parser(
        "report",
        help="HTML reports of run directories, and their index",
        description="Build one self-contained HTML report per run directory "
        "and an index page over them, through the PySpark pipeline.",
    )
    reports_cli.add_report_arguments(p)
    p.set_defaults(func=reports_cli.run_report)

    p = sub.add_parser("prepare", help="build the base images and fetch the jars of releases")
    _add_target(p, many=True)
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser(
        "flakes",
        help="run scenarios N times on one release; count verdicts",
        description="Run each deterministic scenario N times on one release and "
        "print the verdict counts. Exit 0 when every run of every scenario gave "
        "the expected verdict (zero flips).",
    )
    from suites import flakes

    flakes.add_arguments(p)
    p.set_defaults(func=flakes.main)

    from suites import atlas_cli, bisect_cli
    from suites.explore import explore_cli, replay_cli

    _add_command(sub, "bisect", bisect_cli)
    _add_command(sub, "atlas", atlas_cli)
    _add_target(_add_command(sub, "replay", replay_cli))
    _add_target(_add_command(sub, "explore", explore_cli))

    p = sub.add_parser("clean", help="remove containers and networks of runs that are gone")
    p.add_argument("--all", action="store_true", help="also remove those of runs still in progress")
    p.set_defaults(func=cmd_clean)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except LogforkError as exc:
        return exc.tell()
    except KeyboardInterrupt:
        print("logfork: interrupted; the cluster was torn down", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`| head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Terminated:
        # What CI timeouts, `timeout` and orchestrators send: torn down as for Ctrl-C,
        # and the conventional 128 + 15.
        print("logfork: terminated (SIGTERM); the cluster was torn down", file=sys.stderr)
        return 143


if __name__ == "__main__":
    sys.exit(main())
