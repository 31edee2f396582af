"""What the report pipeline reads: run directories and audits of log dirs, each as the
audit's plan (`checkers.audit.plan`) plus the run record's small files.

The driver lists directories and reads small files here; segments are read by whichever
engine runs the plan's read tasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from basics.errors import LogforkError
from basics.protocol import Protocol
from basics.releases import Release
from checkers.audit.plan import AuditPlan, plan_audit
from checkers.storage import is_remote, local_path
from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from runrecord.conformance import Conformance
from runrecord.events import Event
from runrecord.run import ClusterInfo, RunInfo, Verdict
from runrecord.rundir import RUN_JSON, RunDir, is_run_dir
from runrecord.states import StateRecord
from runrecord.typed import RunRecordError


@dataclass
class RunArtifacts:
    """The run record's small files; each optional."""

    run: RunInfo | None = None
    verdict: Verdict | None = None
    cluster: ClusterInfo | None = None
    timeline: list[Event] = field(default_factory=list)
    states: list[StateRecord] = field(default_factory=list)
    conformance: Conformance | None = None
    producer: Path | None = None  # read by the engine: it can hold millions of sends
    problems: list[str] = field(default_factory=list)  # lines of JSON-lines files skipped

    @classmethod
    def read(cls, run: RunDir) -> RunArtifacts:
        """Every file of the run record. A file of another schema raises RunRecordError."""
        art = cls(
            run=run.run_info(),
            verdict=run.verdict(),
            cluster=run.cluster(),
            conformance=run.conformance(),
        )
        art.timeline, problems = run.timeline()
        art.problems += problems
        art.states, problems = run.states()
        art.problems += problems
        if run.producer_path.is_file():
            art.producer = run.producer_path
        return art


@dataclass
class RunSource:
    key: str  # unique among the pipeline's inputs; names tables and report files
    path: Path | None  # the run directory; None for an audit of plain log dirs
    plan: AuditPlan
    protocol: Protocol = Protocol.KIP_279
    artifacts: RunArtifacts = field(default_factory=RunArtifacts)
    # Tables go beside the run (`logfork report`); an audit never writes into its inputs.
    tables_beside: bool = False

    @property
    def release(self) -> str | None:
        for doc in (self.artifacts.run, self.artifacts.verdict, self.artifacts.cluster):
            if doc is not None and doc.release:
                return doc.release
        return None

    @property
    def scenario(self) -> str | None:
        return self.artifacts.run.scenario if self.artifacts.run is not None else None


def release_protocol(release: str | None, default: Protocol = Protocol.KIP_279) -> Protocol:
    """The protocol of a recorded release; `default` for a local build or an unknown one."""
    try:
        return Release(release).protocol if release else default
    except LogforkError:
        return default


def find_run_dirs(paths: Iterable[Path | str]) -> tuple[list[Path], list[str]]:
    """Run directories named by `paths`: each a run directory, or a folder holding some
    (such as ``runs/``). Returns (run dirs, problems)."""
    found: list[Path] = []
    problems: list[str] = []
    for raw in paths:
        if is_remote(raw):
            problems.append(f"{raw}: run directories are read on this machine: a path or file://")
            continue
        path = Path(local_path(raw))
        if is_run_dir(path):
            found.append(path)
            continue
        if not path.is_dir():
            problems.append(f"{path}: {'not a directory' if path.exists() else 'does not exist'}")
            continue
        children = sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p))
        if not children:
            problems.append(f"{path}: neither a run directory (no {RUN_JSON}) nor a folder of them")
        found.extend(children)
    unique: list[Path] = []
    seen: set[Path] = set()
    for p in found:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    return unique, problems


def unique_key(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}-{n}", n + 1
    taken.add(key)
    return key


def _run_infos(dirs: Sequence[Path | str]) -> list[RunInfo]:
    """The run records of the run directories among `dirs`."""
    out = []
    for d in dirs:
        path = None if is_remote(d) else Path(local_path(d))
        if path is not None and is_run_dir(path):
            try:
                out.append(RunDir(path).run_info())
            except RunRecordError:
                continue  # the audit itself says what is wrong with it
    return out


def txn_timeout(dirs: Sequence[Path | str], given: int | None = None) -> int:
    """How old an open transaction must be to hang, for an audit of `dirs`: `given`, else
    the longest that the run directories among them recorded, else Kafka's maximum."""
    if given is not None:
        return given
    recorded = [i.txn_timeout_ms for i in _run_infos(dirs) if i.txn_timeout_ms is not None]
    return max(recorded, default=DEFAULT_TXN_TIMEOUT_MS)


def txn_reference(dirs: Sequence[Path | str]) -> int | None:
    """What open transactions are aged against: the latest time a run directory among `dirs`
    recorded judging its transactions, else None (each partition's newest write)."""
    recorded = [i.txns_judged_ms for i in _run_infos(dirs) if i.txns_judged_ms is not None]
    return max(recorded, default=None)


def _plan(
    dirs: Sequence[Path | str],
    topic: str | None = None,
    compacted: Sequence[str] = (),
    given: int | None = None,
) -> AuditPlan:
    return plan_audit(dirs, topic, compacted, txn_timeout(dirs, given), txn_reference(dirs))


def run_source(run_dir: Path, key: str, *, protocol: Protocol | None = None) -> RunSource:
    """A scenario run: its run record and its nodes' log dirs."""
    artifacts = RunArtifacts.read(RunDir(run_dir))
    plan = _plan([run_dir])
    source = RunSource(key, run_dir, plan, artifacts=artifacts, tables_beside=True)
    source.protocol = protocol or release_protocol(source.release)
    return source


def run_key(run_dir: Path) -> str:
    """The key a run directory's report goes by when it is reported alone."""
    return unique_key(run_dir.name, set())


def own_source(run_dir: Path, plan: AuditPlan, protocol: Protocol) -> RunSource:
    """A run judging its own logs while it runs: the plan of what it judges, and its record
    as far as it goes (the deletions it made, which the history check allows for)."""
    artifacts = RunArtifacts.read(RunDir(run_dir))
    return RunSource(run_key(run_dir), run_dir, plan, protocol, artifacts, tables_beside=True)


def run_sources(
    run_dirs: Sequence[Path], *, protocol: Protocol | None = None
) -> tuple[list[RunSource], list[str]]:
    """A source per run directory; a run whose record this logfork cannot read is left out
    with the reason."""
    taken: set[str] = set()
    sources, problems = [], []
    for run_dir in run_dirs:
        try:
            sources.append(run_source(run_dir, unique_key(run_dir.name, taken), protocol=protocol))
        except RunRecordError as exc:
            problems.append(str(exc))
    return sources, problems


def audit_source(
    dirs: Sequence[Path | str],
    *,
    key: str = "audit",
    protocol: Protocol = Protocol.KIP_279,
    topic: str | None = None,
    compacted: Sequence[str] = (),
    txn_timeout_ms: int | None = None,
) -> RunSource:
    """An audit of log dirs (and run directories, which expand to their nodes' log dirs).
    A single run directory also brings its run record, so its report has the timeline.
    `txn_timeout_ms`: as `txn_timeout` takes it."""
    first = None if len(dirs) != 1 or is_remote(dirs[0]) else Path(local_path(dirs[0]))
    run_dir = first if first is not None and is_run_dir(first) else None
    artifacts = RunArtifacts()
    if run_dir is not None:
        try:
            artifacts = RunArtifacts.read(RunDir(run_dir))
        except RunRecordError as exc:
            artifacts.problems.append(str(exc))
    plan = _plan(dirs, topic, compacted, txn_timeout_ms)
    return RunSource(key, run_dir, plan, protocol, artifacts)
