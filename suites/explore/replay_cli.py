"""`logfork replay FILE --kafka-version V [--kafka-mode M]`: one schedule against a fresh
cluster, judged as a scenario is, with the protocol model's prediction beside the brokers'
outcome.

Exit codes: 0 every invariant held (or, where the schedule's `expect` declares a bug for the
release, exactly that symptom showed); 1 an invariant was violated (a finding), or not the
declared symptom; 2 logfork could not run (a bad file, an unknown release, no engine); 3 not
reached (the cluster could not be brought to a state the schedule needs, or a partition
could not be judged).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from basics.errors import SetupError
from basics.releases import Release
from runrecord.outcome import Outcome
from runrecord.replay import AGREED, AGREED_GIVEN, CANNOT_PREDICT, DISAGREED
from runrecord.schedule import Schedule, ScheduleError, load_schedule, validate
from suites.explore.engine.bench import Bench
from suites.explore.engine.schedule_run import ScheduleRun, run_schedule

HELP = "run one fault schedule (a JSON file) against a fresh cluster and judge it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a schedule file (docs/schedules.md)")
    parser.add_argument(
        "--kafka-mode",
        choices=("zk", "kraft"),
        help="run the schedule in this mode instead of its own (a ZooKeeper controller "
        "placement is dropped for KRaft)",
    )
    parser.add_argument(
        "--out",
        default="runs",
        metavar="DIR",
        help="where the run directory goes (default: runs/); the report goes to DIR/report/",
    )
    parser.add_argument("--no-report", action="store_true", help="skip the HTML report")
    parser.add_argument(
        "--runs",
        type=_positive,
        default=1,
        metavar="N",
        help="run it N times, each on a fresh cluster, and say how many failed: a finding "
        "is confirmed when its bad release fails N of N and its good one holds N of N",
    )
    parser.add_argument(
        "--export-script",
        metavar="DIR",
        help="also write DIR/reproduce.sh: the same cluster and steps with a plain Kafka "
        "distribution, Kafka's own tools and kill(1), the symptom checked with Kafka's tools "
        "(KRaft; steps that need the crash filesystem cannot be exported)",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="append one tab-separated line per run (date, release, mode, exit code, "
        "outcome) to FILE, such as a finding's docs/findings/<ID>/replays.tsv",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"--runs must be at least 1, not {value}")
    return value


def combined_exit(codes: list[int]) -> int:
    """One exit code for repeated runs: theirs where they all agree; otherwise 1 if any run
    failed (held only some of the time is not held), else 3 (some not reached)."""
    if len(set(codes)) == 1:
        return codes[0]
    return 1 if 1 in codes else 3


def tally(codes: list[int]) -> str:
    """`failed 5 of 5`, `held 5 of 5`, or each count where the runs differ."""
    n = len(codes)
    names = {0: "held", 1: "failed", 3: "not reached"}
    if len(set(codes)) == 1 and codes[0] in names:
        return f"{names[codes[0]]} {n} of {n}"
    counts = [f"{names.get(c, f'exit {c}')} {codes.count(c)}" for c in sorted(set(codes))]
    return f"{', '.join(counts)} of {n}"


def in_mode(schedule: Schedule, mode: str | None, source: str) -> Schedule:
    """The schedule in another mode, checked as a file would be."""
    if mode is None or mode == schedule.cluster.mode:
        return schedule
    cluster = replace(
        schedule.cluster, mode=mode, controller=None, controllers=schedule.cluster.controllers
    )
    moved = replace(schedule, cluster=cluster)
    try:
        return validate(moved)
    except ScheduleError as exc:
        raise SetupError(f"{source} cannot run in {mode} mode: {exc}") from None


def step_lines(run: ScheduleRun) -> list[str]:
    """Each step as it ran, beside what the model says it would do."""
    model = {s.index: s for s in run.prediction.steps}
    lines = []
    for s in run.steps:
        m = model.get(s.index)
        theirs = m.status if m is not None else "-"
        note = f"  ({s.observed})" if s.observed else ""
        mark = "" if m is None or (m.status == "skipped") == (s.status == "skipped") else "  <>"
        lines.append(f"  {s.index:>2} {s.step:52} {s.status:8} model: {theirs}{mark}{note}")
    return lines


def print_outcome(run: ScheduleRun) -> None:
    verdict = run.verdict
    for line in step_lines(run):
        print(line)
    print(f"model   ({run.prediction.protocol.rules}): {run.prediction.summary()}")
    judgement, comparison = run.judgement, run.comparison
    if judgement is not None and comparison is not None:
        print(f"brokers: {judgement.failure or 'held'}: {judgement.summary}")
        if judgement.rule:
            print(f"rule:    {judgement.rule}")
        if comparison.told:
            print(f"told:    {comparison.told}; the model then: {comparison.prediction}")
        said = {
            AGREED: "yes",
            AGREED_GIVEN: f"only given an untold variant: {comparison.agreed_if}",
            CANNOT_PREDICT: "not judged, the model cannot predict this schedule: "
            + comparison.unpredictable,
            DISAGREED: "NO: the model or Kafka is wrong",
        }
        print(f"model and brokers: {comparison.category}: {said[comparison.category]}")
    head = {
        Outcome.CONSISTENT: "HELD",
        Outcome.DIVERGED: "FINDING",
        Outcome.NOT_REACHED: "NOT REACHED",
        Outcome.REPRODUCED: "REPRODUCED, as the schedule expects",
    }.get(verdict.outcome, verdict.outcome.label)
    print(f"{head}: {verdict.summary if judgement is None else judgement.summary}")


def main(args: argparse.Namespace) -> int:
    source = args.file
    schedule = in_mode(load_schedule(source), args.kafka_mode, source)
    out = Path(args.out)
    name = Path(source).stem
    codes: list[int] = []
    with Bench(args.kafka_version, out, base_image=args.base_image, reuse=False) as bench:
        release = bench.release
        if schedule.cluster.mode not in release.modes:
            raise SetupError(
                f"Kafka {release} has no {schedule.cluster.mode} mode (it has "
                f"{' and '.join(release.modes)}); --kafka-mode chooses another"
            )
        for n in range(1, args.runs + 1):
            of = f" (run {n} of {args.runs})" if args.runs > 1 else ""
            print(
                f"replay {source}: {len(schedule.steps)} steps on Kafka {release} "
                f"({schedule.cluster.mode}){of}"
            )
            code, summary, run = _replay_once(args, bench, schedule, out, name)
            if code == 2:
                return code  # logfork could not run: no count means anything
            codes.append(code)
            if args.export_script and n == 1 and code in (0, 1):
                _export(args, schedule, release, run)
            if args.record:
                _record(
                    Path(args.record), release, schedule.cluster.mode, code, summary, run.run_dir
                )
    if args.runs > 1:
        print(f"replay {source} on Kafka {release}: {tally(codes)}")
    return combined_exit(codes)


def _export(
    args: argparse.Namespace, schedule: Schedule, release: Release, run: ScheduleRun
) -> None:
    """The replay as a script that needs no logfork, from what its first run met."""
    from fixtures.tools import distribution_libs
    from suites.explore.export.script import export_script

    libs = distribution_libs(args.kafka_version)
    title = f"{Path(args.file).name}: {len(schedule.steps)} steps on Kafka {release}"
    script = export_script(
        schedule,
        run.steps,
        run.run_dir,
        release,
        Path(args.export_script),
        title,
    )
    print(f"script: {script}   (run it: KAFKA_LIBS={libs} {script})")


def _replay_once(
    args: argparse.Namespace, bench: Bench, schedule: Schedule, out: Path, name: str
) -> tuple[int, str, ScheduleRun]:
    """One run on a fresh cluster: its exit code, its one-line outcome, its run directory."""
    release = bench.release
    stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
    run_dir = out / f"replay-{name}-{release}-{schedule.cluster.mode}-{stamp}"
    started = time.monotonic()
    run = run_schedule(bench, schedule, run_dir, label=f"replay-{name}")
    verdict = run.verdict
    summary = verdict.summary if run.judgement is None else run.judgement.summary
    if verdict.outcome == Outcome.SETUP_FAILED:
        print(f"logfork: {verdict.summary} (recorded in {run.run_dir})", file=sys.stderr)
        return verdict.exit_code, summary, run
    print_outcome(run)
    print(f"run directory: {run.run_dir}")
    if not args.no_report and verdict.outcome.has_verdict:
        from reports.cli import report_run

        print(f"report: {report_run(run.run_dir, out / 'report', judged=run.judged)}")
    print(
        f"wall time {time.monotonic() - started:.1f}s (schedule {run.seconds:.1f}s, of which "
        f"protocol waits {run.waits:.1f}s)"
    )
    return verdict.exit_code, summary, run  # 0 held, 1 a finding, 3 not reached


def _record(path: Path, release: object, mode: str, code: int, summary: str, run_dir: Path) -> None:
    """One run's line in a replay record; the file is created with its header."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        if new:
            f.write("date\trelease\tmode\texit\toutcome\trun\n")
        fields = (f"{datetime.now():%Y-%m-%d %H:%M}", release, mode, code, summary, run_dir.name)
        f.write("\t".join(" ".join(str(x).split()) for x in fields) + "\n")
