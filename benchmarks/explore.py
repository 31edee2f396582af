"""Benchmark: real schedules per minute, and each schedule's wall time against its own
protocol waits, with the cluster reused across schedules (as `logfork explore` runs them)
and, for comparison, what a fresh cluster per schedule adds.

    python -m benchmarks.explore [--kafka-version 1.1.1] [--seed 1] [--schedules 6]
    python -m benchmarks.explore --parallel 1,2,3 [--kafka-version V] [--schedules 6]

With `--parallel`, the same schedules run once at each level of `logfork explore
--parallel` (fresh clusters each level, boots included), and a line per level reads
`parallel N: X schedules/hour`, with the schedules' overhead ratio (wall time over their
protocol waits), the schedules not reached, the model's agreement, and the machine's peak
memory in use above what it used before the level.

The schedules are the first of the model-guided ranking for the seed (unclean elections
allowed, as the acceptance run uses them). A schedule's wall time runs from its topic's
creation to its topic's deletion and the health check after it (the audit of its copied
logs included; cluster boots and reports excluded). Its protocol waits are what Kafka's
own configuration makes it wait (suites.explore.engine.schedule_run): the time from an
expiry's cut or a crash to the controller acting on the lost session (at most the session
timeout plus one ZooKeeper tick), `wait` steps, acks=all writes the ISR does not complete
(the produce request's timeout), the backoffs between the controlled-shutdown attempts a
SIGTERMed broker logged, one fetch round once healed, and the high watermark checkpoint a
convergence needed (at most one interval: before 2.0 a truncation inside a batch leaves
a follower's file short, and only its checkpoint shows it caught up). Figures only:
nothing here fails on time.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path

from basics.releases import Release
from fixtures.releases import resolve
from runrecord.explore import ExploreRecord
from runrecord.outcome import Outcome
from runrecord.replay import AGREED
from suites.explore.drawing.generate import DrawOptions, explore_shape
from suites.explore.drawing.guide import Candidate, plan
from suites.explore.engine.bench import Bench
from suites.explore.engine.explorer import ExploreOptions, Explorer
from suites.explore.engine.schedule_run import ScheduleRun, run_schedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.explore",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kafka-version", default="1.1.1")
    parser.add_argument("--kafka-mode", choices=("zk", "kraft"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schedules", type=int, default=6)
    parser.add_argument("--out", default="runs/bench-explore", metavar="DIR")
    parser.add_argument("--parallel", metavar="N,...", help="levels of explore --parallel")
    args = parser.parse_args(argv)
    release = resolve(args.kafka_version).release
    mode = args.kafka_mode or ("zk" if "zk" in release.modes else "kraft")
    options = explore_shape(DrawOptions(unclean=True, mode=mode, protocol=release.protocol))
    candidates = plan(args.seed, max(200, args.schedules), release.protocol, options)
    out = Path(args.out).resolve() / f"{release}-{mode}-{int(time.time())}"
    if args.parallel:
        levels = [int(x) for x in args.parallel.split(",") if x.strip()]
        verdicts: dict[int, dict[int, str]] = {}
        for level in levels:
            chosen = candidates[: args.schedules]
            line, verdicts[level] = parallel_level(
                args.kafka_version, release, mode, chosen, level, out
            )
            print(line, flush=True)
        for line in compare_verdicts(verdicts):
            print(line, flush=True)
        return 0
    rows: list[tuple[float, float]] = []
    runs: list[ScheduleRun] = []
    started = time.monotonic()
    with Bench(args.kafka_version, out) as bench:
        for n, candidate in enumerate(candidates[: args.schedules], start=1):
            run = run_schedule(
                bench, candidate.schedule, out / f"{n:03d}", prediction=candidate.prediction
            )
            rows.append((run.seconds, run.waits))
            runs.append(run)
            print(
                f"schedule {n}: {len(candidate.schedule.steps)} steps, "
                f"{run.failure or run.outcome.value}; {run.seconds:.1f}s, protocol waits "
                f"{run.waits:.1f}s, ratio {run.seconds / run.waits:.2f}"
                + (f" (fresh cluster: {run.fresh_cluster})" if run.fresh_cluster else ""),
                flush=True,
            )
        boots = [b.seconds for b in bench.boots]
        teardown_started = time.monotonic()
    teardown = time.monotonic() - teardown_started
    elapsed = time.monotonic() - started
    wall = sum(r[0] for r in rows)
    waits = sum(r[1] for r in rows)
    boot = statistics.median(boots) if boots else 0.0
    n = len(rows)
    print(
        f"{n} schedules in {elapsed / 60:.1f} min, {len(boots)} cluster boot(s) (median "
        f"{boot:.1f}s): {n / (elapsed / 60):.2f} schedules/min ({n / (wall / 60):.2f} without "
        "boots)"
    )
    print(
        f"overhead ratio, cluster reused: {wall:.0f}s of schedules over {waits:.0f}s of their "
        f"protocol waits = {wall / waits:.2f} (per schedule: median "
        f"{statistics.median(r[0] / r[1] for r in rows):.2f})"
    )
    fresh = wall + n * (boot + teardown)
    print(
        f"with a fresh cluster per schedule (boot {boot:.1f}s + teardown {teardown:.1f}s "
        f"each): {fresh:.0f}s = {fresh / waits:.2f}"
    )
    print_breakdown(runs)
    return 0


def parallel_level(
    kafka: str, release: Release, mode: str, candidates: list[Candidate], level: int, out: Path
) -> tuple[str, dict[int, str]]:
    """Run the candidates as `logfork explore --parallel level` does; the level's line, and
    each schedule's verdict by number."""
    directory = out / f"parallel-{level}"
    record = ExploreRecord(str(release), mode, 0, True, True, None, None, time.time(), "bench")
    options = ExploreOptions(kafka=kafka, seed=0, report=False)
    memory = MemorySampler().start()
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        benches = [stack.enter_context(Bench(kafka, directory)) for _ in range(level)]
        explorer = Explorer(options, directory, record, benches[0], _quiet, benches=benches)
        explorer.run_candidates(iter(candidates))
    elapsed = time.monotonic() - started
    peak = memory.stop()
    entries = record.schedules
    ratios = [e.seconds / e.waits for e in entries if e.waits > 0]
    judged = record.judged
    agreed = sum(1 for e in judged if e.category == AGREED)
    not_reached = sum(1 for e in entries if e.outcome == Outcome.NOT_REACHED)
    verdicts = {e.number: e.failure or e.outcome.value for e in entries}
    return (
        f"parallel {level}: {3600 * len(entries) / elapsed:.1f} schedules/hour "
        f"({len(entries)} in {elapsed / 60:.1f} min, boots included); overhead ratio median "
        f"{statistics.median(ratios) if ratios else float('nan'):.2f}; not reached "
        f"{not_reached}; model agreed {agreed}/{len(judged)}; peak memory "
        f"+{peak / 1024:.1f} GiB"
    ), verdicts


def compare_verdicts(verdicts: dict[int, dict[int, str]]) -> list[str]:
    """Whether every level gave each schedule the same verdict; each difference listed."""
    levels = sorted(verdicts)
    numbers = sorted({n for v in verdicts.values() for n in v})
    differ = [n for n in numbers if len({verdicts[lv].get(n, "not run") for lv in levels}) > 1]
    if not differ:
        return [f"verdicts: the same for all {len(numbers)} schedules at every level"]
    lines = [f"verdicts: {len(differ)} of {len(numbers)} schedules differ between levels"]
    for n in differ:
        each = ", ".join(f"parallel {lv} {verdicts[lv].get(n, 'not run')}" for lv in levels)
        lines.append(f"  schedule {n}: {each}")
    return lines


def _quiet(line: str) -> None:
    print(f"  {line}", flush=True)


class MemorySampler:
    """The machine's memory in use (MemTotal - MemAvailable), sampled each second: its peak
    above what was in use at the start, in MiB."""

    def __init__(self) -> None:
        self.base = _in_use_mb()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, _in_use_mb())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak - self.base


def _in_use_mb() -> int:
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    return (fields["MemTotal"] - fields["MemAvailable"]) // 1024


def print_breakdown(runs: list[ScheduleRun]) -> None:
    """Where the time beyond the protocol's waits went: per step kind, the step's own work
    and its settle (the cluster coming to stand where the model does), then the phases
    after the steps (heal and convergence, the check, putting the topic away)."""
    kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for run in runs:
        for step in run.steps:
            row = kinds[step.kind]
            row[0] += 1
            row[1] += step.seconds - step.settling - step.waits
            row[2] += step.settling
            row[3] += step.waits
    print("beyond the protocol's waits, per step kind (steps, own work, settling, waits):")
    for kind, (count, own, settling, waits) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:16} {count:3d}  {own:6.1f}s  {settling:6.1f}s  ({waits:.1f}s waits)")
    phases: dict[str, float] = defaultdict(float)
    checkpoints = sum(run.checkpoint_wait for run in runs)
    for run in runs:
        for phase, seconds in run.verdict.phases.items():
            if phase != "faults":
                phases[phase] += seconds
    print(
        "after the steps: "
        + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items())
        + f" (of which {checkpoints:.1f}s waits for a high watermark checkpoint)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
