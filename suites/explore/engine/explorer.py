"""`logfork explore`: draw schedules from a seed, rank them by the divergence the protocol
model predicts, run the promising ones first on real brokers (one cluster reused while it
stays healthy), record the model's prediction beside every real outcome, and shrink every
violation found to a minimal schedule that fails again on every re-run.

Files, under the explore run's directory:

    explore.json               every schedule, finding and cluster boot (runrecord.explore)
    schedules/NNN.json         every schedule run, in running order
    runs/NNN-.../              each schedule's run directory (a scenario's layout)
    findings/K-<kind>.json     each finding's minimal schedule
    shrink/K/NNN-.../          the real runs of each shrinking
    report/explore.html        the index: every schedule, each finding's report linked
    clusters/<run id>/         the clusters' own dirs (logs, data)
    shard-logs/N.log           with --spark-master: what shard N printed on its worker
"""

from __future__ import annotations

import itertools
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from basics.releases import Release
from basics.threads import run_threads
from checkers.simulate import simulate
from runrecord.explore import (
    EXPLORE_JSON,
    ClusterBoot,
    ExploreFinding,
    ExploreRecord,
    ScheduleEntry,
)
from runrecord.outcome import finding_key
from runrecord.power import CUT
from runrecord.replay import DIVERGED
from runrecord.schedule import Schedule, write_schedule
from runrecord.schedule_cluster import ELR_FEATURE
from runrecord.typed import write_json
from suites.explore.drawing.generate import DrawOptions, draw, explore_shape
from suites.explore.drawing.guide import Candidate, evaluate, plan
from suites.explore.drawing.shrink import ShrinkResult, shrink, simulated_runner
from suites.explore.engine.bench import Bench
from suites.explore.engine.lines import progress_line
from suites.explore.engine.schedule_run import ScheduleRun, run_schedule

Say = Callable[[str], None]
Failing = tuple[ScheduleEntry, Schedule]


def shrink_order(failing: list[Failing]) -> list[Failing]:
    """Findings (in number order) in the order they are shrunk: the first of each kind (a
    kind with two causes is two kinds), a divergence's first, then the rarest kind's; then
    the second of each, and so on."""
    by_kind: dict[str, list[Failing]] = {}
    for item in failing:
        by_kind.setdefault(finding_key(item[0].failure, item[0].cause) or "", []).append(item)
    groups = sorted(by_kind.values(), key=lambda g: (g[0][0].failure != DIVERGED, len(g)))
    return [g[i] for i in range(len(failing)) for g in groups if i < len(g)]


@dataclass
class ExploreOptions:
    kafka: str
    seed: int
    mode: str | None = None
    budget: int | None = None
    minutes: float | None = None
    unclean: bool = False
    jbod: bool = False  # two log dirs per broker, and moves between them
    reassign: bool = False  # reassignments (KRaft), on four brokers
    coordinator: bool = False  # kills, pauses and cuts of the transaction coordinator (KRaft)
    late_ends: bool = False  # commits and aborts whose first EndTxn is held (KRaft)
    slow_links: bool = False  # slow links, and writes with a filler first
    spanning: bool = False  # transactional writes that span background partitions (KRaft)
    voters: bool = False  # a dynamic quorum's membership changes (KRaft 3.9+, KIP-853)
    power_models: tuple[str, ...] = (CUT,)  # drawn per power-loss step (runrecord.power)
    guided: bool = True
    pool: int = 400  # candidates the model ranks (at least the budget)
    shrink_runs: int = 24  # real runs for each shrinking, confirmations included
    confirm_runs: int = 5  # fresh runs in a row a minimal must fail (`shrink`'s gate)
    shrink_findings: int = 3  # findings shrunk (first of each kind and cause, divergence first)
    reuse: bool = True
    report: bool = True
    base_image: str | None = None
    out: Path = Path("runs")
    command: str = ""
    parallel: int | None = None  # clusters at once (None: the machine's default)
    spark_master: str | None = None  # shards run as Spark tasks (suites/explore/on_spark.py)
    store: str | None = None  # where the shards leave their results (a path or URI)
    shards: int | None = None  # None: one per executor


@dataclass
class Explorer:
    options: ExploreOptions
    out: Path
    record: ExploreRecord
    bench: Bench
    say: Say
    # Schedules that found something, in number order: what `shrink_findings` starts from.
    failing: list[tuple[ScheduleEntry, Schedule]] = field(default_factory=list)
    deadline: float | None = None
    # Candidate index -> schedule number, where numbers are given (a shard of a distributed
    # explore numbers its schedules as the whole run ranked them); else in taking order.
    numbers: dict[int, int] = field(default_factory=dict)
    # --parallel: a bench (a cluster) per worker, `bench` first; each worker takes the next
    # candidate of the one ranked queue. `stop` ends every worker after its schedule.
    benches: list[Bench] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _queue: Iterator[Candidate] | None = None
    _taken: int = 0
    _errors: list[BaseException] = field(default_factory=list)

    # -- the search ------------------------------------------------------------------------

    def candidates(self, draw_options: DrawOptions) -> Iterator[Candidate]:
        """The ranked pool, then (a time budget outlasting it) more candidates as drawn."""
        o = self.options
        protocol = draw_options.protocol
        pool = max(o.pool, o.budget or 0)
        started = time.monotonic()
        ranked = plan(o.seed, pool, protocol, draw_options, guided=o.guided)
        how = "ranked by the model's search" if o.guided else "in drawing order (no guidance)"
        self.say(f"{len(ranked)} candidates {how} in {time.monotonic() - started:.1f}s")
        self.record.pool = len(ranked)
        yield from ranked
        index = 10 * pool
        while True:
            yield from evaluate([draw(o.seed, index, draw_options)], protocol, first_index=index)
            index += 1

    def search(self, draw_options: DrawOptions) -> None:
        """Run the ranked candidates until the budget or the time is spent, on the backend
        the options name: this machine's benches, or shards on a Spark cluster's workers
        (`--spark-master`: suites.explore.engine.spark)."""
        if self.options.spark_master:
            from suites.explore.engine.spark import search_on_spark

            search_on_spark(self, draw_options)
        else:
            self.run_all(draw_options)

    def run_all(self, draw_options: DrawOptions) -> None:
        """Run candidates in ranked order on this machine's benches until the budget or the
        time is spent."""
        self.run_candidates(self.candidates(draw_options))

    def run_candidates(self, queue: Iterator[Candidate]) -> None:
        """Run the queue's candidates in order until it ends, or the budget or the time is
        spent: on one cluster in this thread, or with several benches on a worker thread
        each."""
        self._queue = queue
        benches = self.all_benches
        if len(benches) == 1:
            self.work(benches[0], "")
            return
        workers = [
            # Daemons: after Ctrl-C a worker may still wait on a cluster torn down under it;
            # the process must not wait for it to give up (its clusters are closed already).
            threading.Thread(
                target=self._work, args=(b, f"c{i}"), name=f"explore-c{i}", daemon=True
            )
            for i, b in enumerate(benches, start=1)
        ]
        try:
            run_threads(workers)
        except BaseException:
            self.stop.set()
            raise
        if self._errors:
            raise self._errors[0]

    def take(self) -> tuple[int, Candidate] | None:
        """The next schedule's number and candidate, or None when the run is over."""
        with self._lock:
            if self.stop.is_set():
                return None
            n = self._taken + 1
            if self.options.budget is not None and n > self.options.budget:
                return None
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.say("time is up")
                self.stop.set()
                return None
            assert self._queue is not None
            candidate = next(self._queue, None)
            if candidate is None:
                return None
            self._taken = n
            return (self.numbers[candidate.index] if self.numbers else n), candidate

    def work(self, bench: Bench, name: str) -> None:
        while (item := self.take()) is not None:
            self.run_one(*item, bench=bench, cluster=name)

    def _work(self, bench: Bench, name: str) -> None:
        try:
            self.work(bench, name)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            if not self.stop.is_set():  # after a stop, the benches close under it
                self._errors.append(exc)
            self.stop.set()

    def run_one(
        self, n: int, candidate: Candidate, bench: Bench | None = None, cluster: str = ""
    ) -> None:
        bench = bench or self.bench
        schedule = candidate.schedule
        file = self.out / "schedules" / f"{n:03d}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        write_schedule(file, schedule)
        run_dir = self.out / "runs" / f"{n:03d}-{self.record.release}-{self.record.mode}"
        run = run_schedule(
            bench, schedule, run_dir, label=f"explore-{n:03d}", prediction=candidate.prediction
        )
        with self._lock:
            if bench.closed:
                return  # interrupted under it: its run is no result
            entry = entry_of(n, candidate, run, file)
            entry.cluster = cluster
            if run.failure is not None:
                entry.report = self.report(run)
            self.add(entry, schedule)
            self.sync_boots()
            self.say(progress_line(entry, self.options.budget))
            self.save()

    def add(self, entry: ScheduleEntry, schedule: Schedule) -> None:
        """Record a schedule run (here, or by a shard elsewhere) in number order."""
        with self._lock:
            self.record.schedules.append(entry)
            self.record.schedules.sort(key=lambda e: e.number)
            if entry.failure is not None:
                self.failing.append((entry, schedule))
                self.failing.sort(key=lambda item: item[0].number)

    # -- shrinking -------------------------------------------------------------------------

    def shrink_findings(self) -> None:
        """Shrink the first finding of each kind (a divergence first: what explore is for;
        then the rarest kind, which the next search is least likely to meet again), then
        the next ones, up to `shrink_findings` of them; the others are listed with their
        own schedules."""
        for k, (entry, schedule) in enumerate(shrink_order(self.failing), start=1):
            if k > self.options.shrink_findings:
                self.record.findings.append(self.unshrunk(entry, "not shrunk (--shrink-findings)"))
                continue
            self.say(
                f"shrinking finding {k}: schedule {entry.number} "
                f"({finding_key(entry.failure, entry.cause)}, "
                f"{entry.steps} steps)"
            )
            self.record.findings.append(self.shrink_one(k, entry, schedule))
            self.save()

    def shrink_one(self, k: int, entry: ScheduleEntry, schedule: Schedule) -> ExploreFinding:
        # Kept with its cause: a candidate that hangs a transaction by another bug's way is
        # another finding, not a smaller form of this one.
        failure = finding_key(entry.failure, entry.cause) or ""
        protocol = self.bench.release.version
        runs_dir = self.out / "shrink" / f"{k}"
        last_failing: dict[str, ScheduleRun] = {}
        # Each candidate's real runs: whether each failed as the finding did.
        tally: dict[str, list[bool]] = {}
        numbers = itertools.count(1)

        def real_on(bench: Bench) -> Callable[[Schedule], str | None]:
            def real(candidate: Schedule) -> str | None:
                with self._lock:
                    number = next(numbers)
                run_dir = runs_dir / f"{number:03d}-{len(candidate.steps)}-steps"
                got = run_schedule(bench, candidate, run_dir, label=f"shrink-{k}")
                with self._lock:
                    self.record.shrink_runs += 1
                    self.say(
                        f"  shrink {k}.{number}: {len(candidate.steps)} steps: "
                        f"{got.finding or got.outcome.value} ({got.seconds:.0f}s)"
                    )
                    if got.failure is not None:
                        last_failing[_key(candidate)] = got
                    tally.setdefault(_key(candidate), []).append(got.finding == failure)
                    self.sync_boots()
                return got.finding

            return real

        # The first cluster runs the original's confirmations; with --parallel the others
        # run candidates beside it (`shrink.shrink`'s more_runners).
        real, *more = [real_on(b) for b in self.all_benches if not b.closed]
        start, seen = schedule, failure
        # Only the model's own run can guide the shrinking: an agreement on a condition
        # hangs on timing or a race that a cut-down schedule need not repeat.
        # (An agreement implies the model compared: `entry_of`.)
        foreseen = bool(entry.agree) and not entry.agreed_if
        if foreseen:
            # The model saw it coming: shrink on the model first (no cluster), and start
            # from its minimal schedule once the brokers confirm it.
            model = shrink(schedule, simulated_runner(protocol), budget=2000, confirm=1)
            if model.reproducible and len(model.minimal.steps) < len(schedule.steps):
                self.say(f"  the model shrinks it to {len(model.minimal.steps)} steps")
                start, seen = model.minimal, None

        def screen(candidate: Schedule) -> str | None:
            predicted = simulate(candidate, protocol).finding()
            if predicted == failure:
                return None
            return f"the model predicts {predicted or 'no finding'}"

        prescreen = screen if foreseen else None
        budget = self.options.shrink_runs
        tried: dict[str, str] = {}  # every verdict, across the shrinks below

        def on_brokers(origin: Schedule, runs: int, shown: str | None) -> ShrinkResult:
            return shrink(
                origin,
                real,
                budget=runs,
                confirm=2,
                prescreen=prescreen,
                seen=shown,
                more_runners=more,
                tried=tried,
                gate=self.options.confirm_runs,
            )

        result = on_brokers(start, budget, seen)
        spent, left = result.runs, budget - result.runs
        if not result.reproducible and start is not schedule and left >= 2:
            # The model predicts its minimal fails and the brokers failed the original: one
            # real run that came out otherwise (passed, or failed then passed) is weak
            # evidence against both, so the minimal gets a second chance; the shrinker
            # gives one only to a candidate that failed, then passed.
            self.say("  the brokers did not confirm the model's minimal: running it again")
            result = on_brokers(start, left, None)
            result.runs += spent
        if not result.reproducible and start is not schedule:
            self.say("  the brokers did not confirm the model's minimal: shrinking the original")
            result = on_brokers(schedule, budget, failure)
        if result.gated:
            self.say(
                f"  confirmed: {len(result.minimal.steps)} steps failed {result.gate} runs in a row"
            )
        found = self.finding(k, entry, result, last_failing.get(_key(result.minimal)))
        runs = tally.get(_key(result.minimal), [])
        found.minimal_runs, found.minimal_failed = len(runs), sum(runs)
        if runs and not all(runs):
            self.say(f"  the minimal schedule failed {found.tally()}")
        return found

    def finding(
        self, k: int, entry: ScheduleEntry, result: ShrinkResult, run: ScheduleRun | None
    ) -> ExploreFinding:
        failure = entry.failure or "finding"
        if not result.reproducible:
            return self.unshrunk(entry, "did not fail again when re-run (flaky)", result.runs)
        if result.gate and not result.gated:
            why = f"no schedule of it failed {result.gate} runs in a row (a race)"
            return self.unshrunk(entry, why, result.runs)
        named = f"{failure}-{entry.cause}" if entry.cause else failure
        file = self.out / "findings" / f"{k}-{named.replace('@', '-')}.json"
        file.parent.mkdir(parents=True, exist_ok=True)
        # Shrunk from the explored schedule, whether or not the model shrank it first.
        origin = {**result.minimal.origin, "shrunk_from_steps": entry.steps}
        write_schedule(file, replace(result.minimal, origin=origin))
        report = self.report(run) if run is not None else entry.report
        return ExploreFinding(
            failure,
            entry.number,
            entry.schedule_file,
            str(file),
            len(result.minimal.steps),
            True,
            result.runs,
            self.replay_command(file),
            report,
            run.verdict.summary if run is not None else entry.summary,
            entry.cause,
        )

    def unshrunk(self, entry: ScheduleEntry, why: str, runs: int = 0) -> ExploreFinding:
        return ExploreFinding(
            entry.failure or "finding",
            entry.number,
            entry.schedule_file,
            entry.schedule_file,
            entry.steps,
            False,
            runs,
            self.replay_command(Path(entry.schedule_file)),
            entry.report,
            f"{why}: {entry.summary}",
            entry.cause,
        )

    # -- records ---------------------------------------------------------------------------

    def replay_command(self, file: Path) -> str:
        args = ["logfork", "replay", str(file), "--kafka-version", self.options.kafka]
        args += ["--kafka-mode", self.record.mode]
        return shlex.join(args)

    def report(self, run: ScheduleRun) -> str | None:
        if not self.options.report or not run.verdict.outcome.has_verdict:
            return None
        from reports.cli import report_run

        return str(report_run(run.run_dir, self.out / "report", judged=run.judged))

    @property
    def all_benches(self) -> list[Bench]:
        return self.benches or [self.bench]

    def sync_boots(self) -> None:
        self.record.boots = [
            ClusterBoot(b.reason, b.schedule, round(b.seconds, 1), b.run_dir)
            for bench in self.all_benches
            for b in bench.boots
        ]

    def save(self) -> None:
        self.record.count()  # explore.json's counts by category, as of this schedule
        write_json(self.out / EXPLORE_JSON, self.record)
        from reports.explore_page import write_explore_page

        write_explore_page(self.record, self.out)


def _key(schedule: Schedule) -> str:
    from runrecord.schedule import dumps

    return dumps(schedule)


def entry_of(n: int, candidate: Candidate, run: ScheduleRun, file: Path) -> ScheduleEntry:
    comparison = run.comparison
    return ScheduleEntry(
        number=n,
        candidate=candidate.index,
        steps=len(candidate.schedule.steps),
        skipped=sum(1 for s in run.steps if s.status == "skipped"),
        outcome=run.outcome,
        failure=run.failure,
        summary=run.verdict.summary,
        predicted=comparison.predicted if comparison is not None else run.prediction.failure(),
        prediction=comparison.prediction if comparison is not None else run.prediction.summary(),
        # A schedule the model cannot predict counts neither way, nor one the brokers'
        # side could not judge (not reached).
        agree=None
        if comparison is None or comparison.unpredictable or not run.outcome.has_verdict
        else comparison.agree,
        agreed_if=comparison.agreed_if if comparison is not None else "",
        unpredictable=comparison.unpredictable if comparison is not None else "",
        seconds=round(run.seconds, 1),
        waits=round(run.waits, 1),
        run_dir=str(run.run_dir),
        schedule_file=str(file),
        score=candidate.score,
        fresh_cluster=run.fresh_cluster,
        cause=run.judgement.cause if run.judgement is not None else "",
    )


def default_mode(modes: tuple[str, ...], wanted: str | None) -> str:
    return wanted or ("zk" if "zk" in modes else "kraft")


def draw_options(
    options: ExploreOptions, mode: str, protocol: object, release: Release | None = None
) -> DrawOptions:
    """How candidates are drawn for this run. KRaft from 4.0 is formatted with eligible
    leader replicas (KIP-966): the default for new clusters from 4.1, and on 4.0 the
    setting it takes to have them at all."""
    elr = mode == "kraft" and release is not None and release.at_least(4, 0)
    drawing = DrawOptions(
        unclean=options.unclean,
        mode=mode,
        protocol=protocol,  # type: ignore[arg-type]
        power_models=options.power_models,
        features={ELR_FEATURE: 1} if elr else {},
        # Three voters, so that the quorum's own faults are drawn (one survives a loss).
        controllers=3 if mode == "kraft" else 1,
        jbod=options.jbod,
        reassign=options.reassign,
        coordinator=options.coordinator,
        late_ends=options.late_ends,
        slow_links=options.slow_links,
        spanning=options.spanning,
        voters=options.voters,
        # A broker beside three replicas, for a reassignment to add.
        brokers=4 if options.reassign else 3,
    )
    return explore_shape(drawing)
