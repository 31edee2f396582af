"""What the pipeline reads, found on the driver: run directories, their small artifact files,
and the list of partition directories that Spark tasks will scan.

The driver only lists directories and reads small files (run.json, checkpoints, JSON lines).
Segments are never opened here: each partition directory becomes a `ReplicaTask` that an
executor reads with `checkers.lineage.read_partition`.

The log dir walk mirrors `checkers.lineage.read_log_dir` step by step (same files, same
errors, same order) so that an audit through Spark answers exactly as `checkers.audit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.audit import RUN_MARKER, AuditError, expand_inputs
from checkers.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from checkers.errors import UnreadableFile
from checkers.lineage import LogDir, list_log_dir
from checkers.metadata_log import METADATA_TOPICS
from checkers.model import Protocol

# Run artifact files (suites/scenario.py and the scenario steps write them).
RUN_JSON, VERDICT_JSON, CLUSTER_JSON = "run.json", "verdict.json", "cluster.json"
TIMELINE, PRODUCER, STATES = "timeline.jsonl", "producer.jsonl", "states.jsonl"
AUDIT_JSON, CONFORMANCE_JSON = "audit.json", "conformance.json"


@dataclass(frozen=True)
class ReplicaTask:
    """One partition directory of one log dir: the unit of work of a scan task."""

    run: str
    log_dir: int  # index of the log dir in `RunSource.log_dirs`
    child: int  # position of the partition dir among the log dir's sorted children
    broker: int  # -1 when the log dir's meta.properties could not be read
    topic: str
    partition: int
    path: str
    high_watermark: int | None
    log_start_checkpoint: int | None
    recovery_point: int | None
    metadata: bool  # a KRaft metadata log: also decoded
    judged: bool  # False: an unreadable log dir or a second copy; read but not judged
    size: int = 0  # bytes of its .log segments: how the judging is spread


@dataclass
class RunArtifacts:
    """The small files of a run directory; every one optional."""

    run: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    conformance: list[dict[str, Any]] | None = None
    audit: dict[str, Any] | None = None
    producer: Path | None = None  # read by Spark: it can hold millions of sends
    problems: list[str] = field(default_factory=list)  # artifact files that did not parse


# An entry of the audit's error list, in the audit's order: a ready error, or a placeholder
# for errors that only the scan finds: ("lineage", log dir, topic, partition) or
# ("metadata", log dir).
ErrorSlot = AuditError | tuple[Any, ...]


@dataclass
class RunSource:
    key: str  # unique among the pipeline's inputs; names tables and report files
    path: Path | None  # the run directory; None for an audit of plain log dirs
    inputs: list[str]
    log_dirs: list[LogDir] = field(default_factory=list)
    tasks: list[ReplicaTask] = field(default_factory=list)
    error_slots: list[ErrorSlot] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    quorum_states: dict[int, Any] = field(default_factory=dict)  # log dir -> QuorumState
    artifacts: RunArtifacts = field(default_factory=RunArtifacts)
    protocol: Protocol = Protocol.KIP_279
    topic: str | None = None
    # Tables go beside the run (`logfork report`); an audit never writes into its inputs.
    tables_beside: bool = False

    @property
    def release(self) -> str | None:
        for doc in (self.artifacts.run, self.artifacts.verdict, self.artifacts.cluster):
            if doc and doc.get("release"):
                return str(doc["release"])
        return None

    @property
    def scenario(self) -> str | None:
        for doc in (self.artifacts.run, self.artifacts.verdict):
            if doc and doc.get("scenario"):
                return str(doc["scenario"])
        return None


def is_run_dir(path: Path) -> bool:
    return (path / RUN_MARKER).is_file()


def find_run_dirs(paths: Iterable[Path | str]) -> tuple[list[Path], list[str]]:
    """Run directories named by `paths`: each a run directory, or a folder holding some
    (such as ``runs/``). Returns (run dirs, problems)."""
    found: list[Path] = []
    problems: list[str] = []
    for raw in paths:
        path = Path(raw)
        if is_run_dir(path):
            found.append(path)
            continue
        if not path.is_dir():
            problems.append(f"{path}: {'not a directory' if path.exists() else 'does not exist'}")
            continue
        children = sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p))
        if not children:
            problems.append(
                f"{path}: neither a run directory (no {RUN_MARKER}) nor a folder of them"
            )
        found.extend(children)
    unique: list[Path] = []
    seen: set[Path] = set()
    for p in found:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    return unique, problems


def protocol_for_release(release: str | None, default: Protocol = Protocol.KIP_279) -> Protocol:
    """How a follower of `release` finds where to truncate, with the inter-broker protocol
    at the release's own: before KIP-101 its high watermark; OffsetsForLeaderEpoch v0 from
    0.11; v1 (KIP-279) from 2.0; the Fetch response's diverging epoch from 2.7."""
    if not release or not re.fullmatch(r"\d+(\.\d+){1,3}", release):
        return default
    parts = tuple(int(p) for p in release.split("."))
    if parts < (0, 11):
        return Protocol.HIGH_WATERMARK
    if parts < (2, 0):
        return Protocol.KIP_101
    if parts < (2, 7):
        return Protocol.KIP_279
    return Protocol.DIVERGING_EPOCH


def unique_key(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"
    key, n = base, 2
    while key in taken:
        key, n = f"{base}-{n}", n + 1
    taken.add(key)
    return key


def run_source(
    run_dir: Path,
    key: str,
    *,
    protocol: Protocol | None = None,
    topic: str | None = None,
) -> RunSource:
    """A scenario run: its artifacts and its nodes' log dirs."""
    artifacts = read_artifacts(run_dir)
    source = RunSource(
        key, run_dir, [str(run_dir)], artifacts=artifacts, topic=topic, tables_beside=True
    )
    source.protocol = protocol or protocol_for_release(source.release)
    list_inputs(source, run_log_dirs(run_dir, artifacts.cluster))
    return source


def run_log_dirs(run_dir: Path, cluster: dict[str, Any] | None) -> list[Path]:
    """The log dirs of a run's Kafka nodes. cluster.json names each node's role, so a
    ZooKeeper node's data dir (no meta.properties: not a broker log dir) stays out; without
    it, every ``nodes/<node>/data`` is taken, as `logfork audit` takes them."""
    nodes = (cluster or {}).get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        return [run_dir]
    kafka = sorted(
        name
        for name, node in nodes.items()
        if not (isinstance(node, dict) and node.get("role") == "zookeeper")
    )
    dirs = [run_dir / "nodes" / name / "data" for name in kafka]
    return [d for d in dirs if d.is_dir()] or [run_dir]


def audit_source(
    dirs: Sequence[Path | str],
    *,
    key: str = "audit",
    protocol: Protocol = Protocol.KIP_279,
    topic: str | None = None,
) -> RunSource:
    """An audit of log dirs (and run directories, which expand to their nodes' log dirs).

    A single run directory also brings its artifacts, so its report has the timeline."""
    paths = [Path(d) for d in dirs]
    run_dir = paths[0] if len(paths) == 1 and is_run_dir(paths[0]) else None
    artifacts = read_artifacts(run_dir) if run_dir is not None else RunArtifacts()
    source = RunSource(key, run_dir, [str(p) for p in paths], artifacts=artifacts, topic=topic)
    source.protocol = protocol
    list_inputs(source, paths)
    return source


def list_inputs(source: RunSource, dirs: Sequence[Path]) -> None:
    """Walk the log dirs as `checkers.audit.audit` does, without reading any segment."""
    paths, errors = expand_inputs(dirs)
    source.error_slots.extend(errors)
    source.unreadable.extend(e.error.path for e in errors)
    held: dict[tuple[str, int], dict[int, str]] = {}
    for index, path in enumerate(paths):
        listing = list_log_dir(path, source.topic)
        log_dir, children, offsets = listing.log_dir, listing.partitions, listing.offsets
        source.log_dirs.append(log_dir)
        if log_dir.quorum_state is not None:
            source.quorum_states[index] = log_dir.quorum_state
        source.error_slots.extend(AuditError(e, log_dir.broker_id) for e in log_dir.errors)
        judged = log_dir.readable and log_dir.broker_id is not None
        if not judged:
            source.unreadable.append(log_dir.path)
        broker = log_dir.broker_id if log_dir.broker_id is not None else -1
        tasks = {}
        for position, (child, tp) in enumerate(children):
            tasks[tp] = ReplicaTask(
                run=source.key,
                log_dir=index,
                child=position,
                broker=broker,
                topic=tp[0],
                partition=tp[1],
                path=str(child),
                high_watermark=offsets.get(REPLICATION_OFFSET_CHECKPOINT, {}).get(tp),
                log_start_checkpoint=offsets.get(LOG_START_OFFSET_CHECKPOINT, {}).get(tp),
                recovery_point=offsets.get(RECOVERY_POINT_CHECKPOINT, {}).get(tp),
                metadata=tp[0] in METADATA_TOPICS,
                judged=judged,
                size=segment_bytes(str(child)),
            )
        if judged:
            for tp in sorted(tasks):
                source.error_slots.append(("lineage", index, *tp))
                copies = held.setdefault(tp, {})
                if broker in copies:
                    source.error_slots.append(
                        AuditError(
                            UnreadableFile(
                                tasks[tp].path,
                                None,
                                f"broker {broker} holds {tp[0]}-{tp[1]} in two log dirs "
                                f"(also {copies[broker]}); this copy is left out",
                            ),
                            broker,
                        )
                    )
                    tasks[tp] = replace(tasks[tp], judged=False)
                    continue
                copies[broker] = tasks[tp].path
            if any(t.metadata for t in tasks.values()):
                source.error_slots.append(("metadata", index))
        source.tasks.extend(sorted(tasks.values(), key=lambda t: t.child))


def segment_bytes(partition_dir: str) -> int:
    """Bytes of a partition dir's segment files (a directory listing, no file is opened)."""
    total = 0
    try:
        with os.scandir(partition_dir) as listing:
            for entry in listing:
                if entry.name.endswith(".log"):
                    with contextlib.suppress(OSError):
                        total += entry.stat().st_size
    except OSError:
        return 0
    return total


# --------------------------------------------------------------------------------------
# Run artifacts


def read_artifacts(run_dir: Path | None) -> RunArtifacts:
    """Every artifact file the run directory has; a missing one is simply absent, a broken
    one is noted in `problems` and skipped."""
    art = RunArtifacts()
    if run_dir is None:
        return art
    art.run = _json_file(run_dir / RUN_JSON, art.problems)
    art.verdict = _json_file(run_dir / VERDICT_JSON, art.problems)
    art.cluster = _json_file(run_dir / CLUSTER_JSON, art.problems)
    art.audit = _json_file(run_dir / AUDIT_JSON, art.problems)
    conformance = _json_file(run_dir / CONFORMANCE_JSON, art.problems)
    if isinstance(conformance, dict):
        conformance = conformance.get("statements") or conformance.get("conformance")
    if isinstance(conformance, list):
        art.conformance = [c for c in conformance if isinstance(c, dict)]
    art.timeline = _json_lines(run_dir / TIMELINE, art.problems)
    art.states = _json_lines(run_dir / STATES, art.problems)
    if (run_dir / PRODUCER).is_file():
        art.producer = run_dir / PRODUCER
    for name in ("run", "verdict", "cluster", "audit"):
        if getattr(art, name) is not None and not isinstance(getattr(art, name), dict):
            art.problems.append(f"{name}.json is not a JSON object; ignored")
            setattr(art, name, None)
    return art


def _json_file(path: Path, problems: list[str]) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: {exc}")
        return None


def _json_lines(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out: list[dict[str, Any]] = []
    bad = 0
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                if isinstance(item, dict):
                    out.append(item)
                else:
                    bad += 1
    except OSError as exc:
        problems.append(f"{path.name}: {exc}")
    if bad:
        # A run killed mid-write leaves a partial last line; the rest is still good.
        problems.append(f"{path.name}: {bad} line(s) are not JSON objects; skipped")
    return out
