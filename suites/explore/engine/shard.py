"""One shard of `logfork explore --spark-master`, a process of its own on a Spark worker:

    python -m suites.explore.engine.shard WORK

WORK/plan.json (`runrecord.explore.ShardPlan`) holds the run's settings and this shard's
candidates, each with the number the whole run gave it. They run as `logfork explore` runs
its own, on this machine's Docker engine, into WORK/out (explore.json, schedules/, runs/,
report/, and the clusters' dirs); nothing is shrunk here (the driver shrinks what the shards
found).

Standard input is the shard's lifeline: the Spark task that started it holds the other end.
When it closes (the task killed, the job cancelled, the executor gone) the shard stops as on
SIGTERM, removes its clusters, and removes WORK, which no one will collect: a Python worker
that Spark kills gets SIGKILL, which no handler sees, so the owner of the clusters and of
WORK must be a process that outlives it.

Exit status: 0 when every candidate ran (or the time ran out), 2 when it could not run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from basics.errors import LogforkError
from checkers.simulate import simulate
from fixtures.cleanup import install_handlers
from fixtures.releases import resolve
from runrecord.explore import SHARD_OUT, SHARD_PLAN, ExploreRecord, ShardPlan
from runrecord.schedule import parse_schedule
from runrecord.typed import read_json
from suites.explore.drawing.guide import Candidate
from suites.explore.engine.clusters import cluster_count, open_benches
from suites.explore.engine.explorer import ExploreOptions, Explorer, draw_options


def options_of(plan: ShardPlan, out: Path) -> ExploreOptions:
    return ExploreOptions(
        kafka=plan.kafka,
        seed=plan.seed,
        mode=plan.mode,
        budget=len(plan.candidates),
        minutes=plan.minutes,
        unclean=plan.unclean,
        power_models=tuple(plan.power_models),
        guided=plan.guided,
        shrink_findings=0,
        reuse=plan.reuse,
        report=plan.report,
        base_image=plan.base_image,
        out=out,
        command=plan.command,
        parallel=plan.parallel,
    )


def candidates_of(plan: ShardPlan, protocol: object) -> list[Candidate]:
    """The plan's candidates, each with the model's prediction made again here (the model is
    a pure function of the schedule: the driver ranked on the same one)."""
    out = []
    for c in plan.candidates:
        schedule = parse_schedule(c.schedule, f"shard {plan.index}, schedule {c.number}")
        out.append(Candidate(c.index, schedule, simulate(schedule, protocol), c.score))  # type: ignore[arg-type]
    return out


def run(plan: ShardPlan, out: Path) -> ExploreRecord:
    options = options_of(plan, out)
    release = resolve(plan.kafka).release
    record = ExploreRecord(
        str(release),
        plan.mode,
        plan.seed,
        plan.unclean,
        plan.guided,
        options.budget,
        plan.minutes,
        time.time(),
        plan.command,
    )

    def say(line: str) -> None:
        print(f"shard {plan.index}: {line}", flush=True)

    drawing = draw_options(options, plan.mode, release.version, release)
    candidates = candidates_of(plan, release.version)
    clusters = cluster_count(options, drawing, len(candidates), say)
    record.parallel = clusters
    clock = time.monotonic()
    with contextlib.ExitStack() as stack:
        benches = open_benches(stack, options, out, clusters)
        numbers = {c.index: c.number for c in plan.candidates}
        explorer = Explorer(options, out, record, benches[0], say, benches=benches, numbers=numbers)
        if plan.minutes is not None:
            explorer.deadline = clock + 60 * plan.minutes
        explorer.run_candidates(iter(candidates))
        record.searching = round(time.monotonic() - clock, 1)
        record.finished = time.time()
        explorer.save()
    return record


def _lifeline(orphaned: threading.Event) -> None:
    """SIGTERM this process when standard input closes (see the module's docstring)."""

    def watch() -> None:
        # The raw descriptor: a daemon thread blocked in sys.stdin's buffered reader holds
        # its lock, and the interpreter aborts at exit when it cannot take it.
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="shard-lifeline", daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m suites.explore.engine.shard WORK", file=sys.stderr)
        return 2
    work = Path(argv[0])
    orphaned = threading.Event()
    install_handlers()
    _lifeline(orphaned)
    try:
        run(read_json(ShardPlan, work / SHARD_PLAN), work / SHARD_OUT)
    except LogforkError as exc:
        print(f"shard: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        if orphaned.is_set():  # the clusters are gone (their contexts closed): WORK too
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
