"""`logfork explore --kafka-version V [--kafka-mode M] --seed S (--budget N | --minutes M)
[--unclean] [--out DIR]`: find divergences nobody scripted, and shrink each to a minimal
schedule anyone can replay.

Prints a line per schedule (number, steps, verdict, the model's agreement, seconds), a
`replay: FILE` line with the full `logfork replay` command per finding, and a summary
(schedules per minute, findings, how many schedules reached a verdict, the model beside the
brokers: agreed, agreed given an untold variant, cannot predict, disagreed, not reached).
Exits 1 when an invariant was violated, 2 when it could not run (with --spark-master: also
when a shard failed or was lost, its schedules listed as not run), 3 when no schedule
reached a verdict (every one not reached or failed setup: nothing was judged), 0 when
nothing was found on at least one schedule judged. Ctrl-C stops it, removes its clusters
and prints the best finding so far. See suites/explore/explore.py for where files go.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path

from basics.errors import SetupError
from basics.releases import Release
from fixtures.cleanup import Terminated, install_handlers
from fixtures.cluster import DYNAMIC_QUORUM_SINCE
from fixtures.crashfs import unavailable
from fixtures.disks import check_model
from fixtures.releases import resolve
from runrecord import exits
from runrecord.explore import SHARD_DONE, ExploreRecord
from runrecord.outcome import finding_key
from runrecord.power import CUT
from suites.explore.engine.clusters import cluster_count, open_benches
from suites.explore.engine.explorer import (
    ExploreOptions,
    Explorer,
    default_mode,
    draw_options,
)
from suites.explore.engine.lines import summary_lines
from suites.scenario import ScenarioError

HELP = "draw, rank, run and shrink fault schedules on real brokers"
MAX_PARALLEL = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka-mode", choices=("zk", "kraft"), help="default: zk where it exists")
    parser.add_argument("--seed", type=int, required=True, metavar="S")
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--budget", type=int, metavar="N", help="run N schedules for real")
    budget.add_argument(
        "--minutes",
        type=float,
        metavar="M",
        help="run schedules for M minutes (findings are shrunk after that)",
    )
    parser.add_argument(
        "--unclean",
        action="store_true",
        help="let schedules enable unclean leader election and draw unclean elections",
    )
    parser.add_argument(
        "--jbod",
        action="store_true",
        help="give every broker two log dirs, on crash-simulating filesystems, and draw moves "
        "of replicas between them and failures of a log dir (KIP-113, KIP-112; KRaft from "
        "3.7, KIP-858)",
    )
    parser.add_argument(
        "--slow-links",
        action="store_true",
        help="draw slow links (a leader's responses to a follower shaped to a few KB/s) and "
        "writes with a large filler first, which keeps a fetch response in flight for "
        "seconds (docs/schedules.md, `slow`)",
    )
    parser.add_argument(
        "--reassign",
        action="store_true",
        help="draw reassignments of the schedule's partition (replicas added, removed or "
        "reordered, some throttled; KIP-455) on four brokers (KRaft only)",
    )
    parser.add_argument(
        "--voters",
        action="store_true",
        help="run a dynamic quorum (three voters and a spare controller) and draw its "
        "membership changes: voters added, removed, and wiped (KIP-853; KRaft 3.9+)",
    )
    parser.add_argument(
        "--coordinator",
        action="store_true",
        help="let kill, pause and cut steps name the transaction coordinator (the leader of "
        "its log when the step runs) besides the partition's brokers (KRaft only)",
    )
    parser.add_argument(
        "--late-endtxn",
        action="store_true",
        help="let commits and aborts have their first EndTxn held on the wire until a heal "
        "of every cut, which delivers it late, into whatever transaction is open by then "
        "(KAFKA-17754; KRaft only)",
    )
    parser.add_argument(
        "--spanning-txns",
        action="store_true",
        help="let transactional writes span the background partitions as well as the "
        "schedule's (their leaders differ), so that one commit needs markers on several "
        "brokers (KRaft only)",
    )
    parser.add_argument(
        "--power-models",
        default=CUT,
        metavar="M,...",
        help="how power losses lose data, drawn per power-loss step among these: cut (at the "
        "recovery point; the default), unsynced, torn, reorder (on crash-simulating "
        "filesystems: what no fsync made durable is lost, in every file), ordered (as ext4 "
        "in data=ordered mode loses it)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="the explore run's directory (default: runs/explore-...)"
    )
    parser.add_argument(
        "--no-guidance",
        action="store_true",
        help="run candidates in drawing order, without the model's ranking",
    )
    parser.add_argument(
        "--pool", type=int, default=400, metavar="N", help="candidates the model ranks (400)"
    )
    parser.add_argument(
        "--shrink-runs",
        type=int,
        default=24,
        metavar="N",
        help="real runs for shrinking one finding, confirmations included (24)",
    )
    parser.add_argument(
        "--confirm-runs",
        type=int,
        default=5,
        metavar="N",
        help="fresh runs in a row a shrunk finding must fail before it is written; where its "
        "minimal does not, the schedules taken before it are tried, back to the original (5)",
    )
    parser.add_argument(
        "--shrink-findings",
        type=int,
        default=3,
        metavar="N",
        help="findings to shrink, the first of each kind (and cause) first, a divergence "
        "first, then the rarest kind (3)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="a fresh cluster for every schedule (no reuse)",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="clusters run at once, each taking the next schedule of the one ranked queue "
        "(default: what the machine's cores and available memory allow; printed)",
    )
    parser.add_argument("--no-report", action="store_true", help="no HTML reports")
    spark = parser.add_argument_group(
        "across machines",
        "run the schedules as Spark tasks on a standalone cluster whose workers each have a "
        "Docker engine and logfork; findings are shrunk on this machine's engine",
    )
    spark.add_argument(
        "--spark-master",
        metavar="URL",
        help="spark://HOST:PORT: one shard of the ranked schedules per task",
    )
    spark.add_argument(
        "--store",
        metavar="URI",
        help="where the shards leave their results: a directory every machine mounts (a path "
        "or file://), or s3://bucket/dir (default: the explore directory, for workers on "
        "this machine)",
    )
    spark.add_argument(
        "--shards",
        type=int,
        metavar="N",
        help="tasks (default: one per executor, that is per worker; each runs --parallel "
        "clusters, by default what its own machine allows)",
    )


def options_of(args: argparse.Namespace) -> ExploreOptions:
    if args.budget is not None and args.budget < 1:
        raise SetupError("--budget must be at least 1")
    if args.minutes is not None and args.minutes <= 0:
        raise SetupError("--minutes must be above 0")
    if args.parallel is not None and not 1 <= args.parallel <= MAX_PARALLEL:
        raise SetupError(f"--parallel must be from 1 to {MAX_PARALLEL}")
    if args.shards is not None and args.shards < 1:
        raise SetupError("--shards must be at least 1")
    if (args.store or args.shards) and not args.spark_master:
        raise SetupError("--store and --shards go with --spark-master")
    models = tuple(dict.fromkeys(m.strip() for m in args.power_models.split(",") if m.strip()))
    if not models:
        raise SetupError("--power-models names no model")
    for model in models:
        check_model(model)
    return ExploreOptions(
        kafka=args.kafka_version,
        seed=args.seed,
        mode=args.kafka_mode,
        budget=args.budget,
        minutes=args.minutes,
        unclean=args.unclean,
        jbod=args.jbod,
        reassign=args.reassign,
        coordinator=args.coordinator,
        late_ends=args.late_endtxn,
        slow_links=args.slow_links,
        spanning=args.spanning_txns,
        voters=args.voters,
        power_models=models,
        guided=not args.no_guidance,
        pool=args.pool,
        shrink_runs=args.shrink_runs,
        confirm_runs=args.confirm_runs,
        shrink_findings=args.shrink_findings,
        reuse=not args.fresh,
        report=not args.no_report,
        base_image=args.base_image,
        command=shlex.join(["logfork", *sys.argv[1:]]),
        parallel=args.parallel,
        spark_master=args.spark_master,
        store=args.store,
        shards=args.shards,
    )


def main(args: argparse.Namespace) -> int:
    options = options_of(args)
    release = resolve(options.kafka).release
    mode = default_mode(release.modes, options.mode)
    if mode not in release.modes:
        has = " and ".join(release.modes)
        raise SetupError(f"Kafka {release} has no {mode} mode (it has {has})")
    if options.jbod:
        check_jbod(release, mode)
    if options.reassign and mode != "kraft":
        raise SetupError(
            "--reassign: reassignment steps need KRaft (the ZooKeeper-mode controller's epoch "
            "bumps are not modelled)"
        )
    if options.voters and (mode != "kraft" or not release.at_least(*DYNAMIC_QUORUM_SINCE)):
        raise SetupError(
            f"--voters: a dynamic quorum needs KRaft from 3.9 (KIP-853), not {release} {mode}"
        )
    if options.coordinator and mode != "kraft":
        raise SetupError(
            "--coordinator: transactional steps, and so the coordinator, are drawn in KRaft only"
        )
    if options.late_ends and mode != "kraft":
        raise SetupError("--late-endtxn: transactional steps are drawn in KRaft only")
    if options.spanning and mode != "kraft":
        raise SetupError("--spanning-txns: transactional steps are drawn in KRaft only")
    stamp = f"{datetime.now():%Y%m%d-%H%M%S}"
    out = Path(args.out or f"runs/explore-{release}-{mode}-seed{options.seed}-{stamp}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    record = ExploreRecord(
        str(release),
        mode,
        options.seed,
        options.unclean,
        options.guided,
        options.budget,
        options.minutes,
        started,
        options.command,
    )

    def say(line: str) -> None:
        print(line, flush=True)

    say(
        f"explore Kafka {release} ({mode}), seed {options.seed}, "
        f"{'unclean elections allowed' if options.unclean else 'clean elections only'} "
        f"({release.protocol.rules}) -> {out}"
    )
    drawing = draw_options(options, mode, release.version, release)
    install_handlers()  # clusters may start in worker threads; signals reach this one
    clock = time.monotonic()
    with contextlib.ExitStack() as stack:
        # With --spark-master the benches here serve the shrinking alone (a bench starts
        # no cluster until asked).
        if options.spark_master:
            clusters = cluster_count(options, drawing, None, lambda x: say(f"shrinking: {x}"))
        else:
            clusters = record.parallel = cluster_count(options, drawing, options.budget, say)
        benches = open_benches(stack, options, out, clusters)
        explorer = Explorer(options, out, record, benches[0], say, benches=benches)
        if options.minutes is not None:
            explorer.deadline = clock + 60 * options.minutes
        try:
            explorer.search(drawing)
            record.searching = round(time.monotonic() - clock, 1)
            explorer.shrink_findings()  # on every bench: candidates run side by side
        except (KeyboardInterrupt, Terminated, ScenarioError):
            # Stopped, or a schedule met a logfork bug (its traceback saved, named in the
            # message raised): what ran so far is kept and said.
            explorer.stop.set()
            for bench in benches:  # no worker starts another cluster
                bench.close()
            record.interrupted = True
            record.finished = time.time()
            explorer.save()
            say(best_so_far(record))
            raise
        record.finished = time.time()
        explorer.save()
    for line in summary_lines(record, record.searching):
        say(line)
    for f in record.findings:
        shrunk = (
            f"shrunk to {f.steps} steps in {f.runs} runs, failing {f.tally()}"
            if f.reproducible
            else f.summary.split(":")[0]
        )
        say(f"finding: {finding_key(f.failure, f.cause)} (schedule {f.number}, {shrunk})")
        say(f"replay: {f.replay}")
    say(f"index: {out / 'report' / 'explore.html'}")
    return exit_code(record)


def exit_code(record: ExploreRecord) -> int:
    """1 for a finding; 2 for a shard that failed or was lost (its schedules have no
    verdict: not a clean pass); 3 when no schedule reached a verdict, since nothing was
    judged; else 0."""
    if record.findings:
        return exits.FINDING
    if any(s.status != SHARD_DONE for s in record.shards):
        return exits.USAGE
    return exits.OK if record.verdicts else exits.NO_VERDICT


def best_so_far(record: ExploreRecord) -> str:
    """What an interrupted run found, best first: a shrunk finding, else a failing
    schedule as it ran."""
    shrunk = [f for f in record.findings if f.reproducible]
    if shrunk:
        best = min(shrunk, key=lambda f: f.steps)
        return (
            f"interrupted; best finding so far: {best.failure} in {best.steps} steps: "
            f"replay: {best.replay}"
        )
    failing = [e for e in record.schedules if e.failure is not None]
    if failing:
        e = min(failing, key=lambda x: x.steps)
        return (
            f"interrupted; best finding so far (not shrunk): {e.failure} in schedule {e.number} "
            f"({e.steps} steps): replay: logfork replay {e.schedule_file} --kafka-version "
            f"{record.release} --kafka-mode {record.mode}"
        )
    return f"interrupted after {len(record.schedules)} schedule(s); nothing found so far"


def check_jbod(release: Release, mode: str) -> None:
    """Moves between log dirs came with KIP-113 (1.1); KRaft serves JBOD from 3.7 (KIP-858,
    early access there; production-ready in 3.8)."""
    if not release.at_least(1, 1):
        raise SetupError(f"--jbod: Kafka {release} cannot move replicas between log dirs (1.1+)")
    if mode == "kraft" and not release.at_least(3, 7):
        raise SetupError(f"--jbod: KRaft serves JBOD from 3.7 (KIP-858), not {release}")
    # Checked here, once: each schedule would otherwise end setup-failed on the same cause.
    if missing := unavailable():
        raise SetupError(f"--jbod puts every log dir on a crash-simulating filesystem: {missing}")
