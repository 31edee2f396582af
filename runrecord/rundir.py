"""A run directory and its files: the one place that knows their names and types.

    runs/<scenario>-<release>-<mode>-<run id>/
      run.json  verdict.json  cluster.json  audit.json  conformance.json  state-history.json
      timeline.jsonl  producer.jsonl  reads.jsonl  states.jsonl
      nodes/<node>/{config,data,logs}/   tables/   error.txt (a logfork bug: its traceback)

Writers go through here; readers get typed records or a `RunRecordError` naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from runrecord.audit import AuditFile
from runrecord.conformance import Conformance
from runrecord.events import Event
from runrecord.history import ReadPass, Send
from runrecord.run import ClusterInfo, RunInfo, Verdict
from runrecord.states import StateHistory, StateRecord
from runrecord.typed import JsonLines, read_json, read_lines, write_json

RUN_JSON = "run.json"
VERDICT_JSON = "verdict.json"
CLUSTER_JSON = "cluster.json"
AUDIT_JSON = "audit.json"
CONFORMANCE_JSON = "conformance.json"
STATE_HISTORY_JSON = "state-history.json"
TIMELINE = "timeline.jsonl"
PRODUCER = "producer.jsonl"
READS = "reads.jsonl"
STATES = "states.jsonl"
ERROR_TXT = "error.txt"
NODES = "nodes"
TABLES = "tables"

T = TypeVar("T")


def is_run_dir(path: Path) -> bool:
    """Whether the path is a logfork run directory. A path that cannot even be looked at
    (a failed disk answers EIO) is not: the caller's own read names the failure."""
    try:
        return (path / RUN_JSON).is_file()
    except OSError:
        return False


@dataclass(frozen=True)
class RunDir:
    path: Path

    # -- layout ----------------------------------------------------------------------------
    def node_dir(self, name: str) -> Path:
        return self.path / NODES / name

    def node_data(self, name: str) -> Path:
        return self.node_dir(name) / "data"

    def node_log_dirs(self, name: str) -> list[Path]:
        """Every log dir of a node: data, then data2, data3... (a JBOD broker)."""
        extra = sorted(self.node_dir(name).glob("data[0-9]*"), key=lambda p: int(p.name[4:]))
        return [self.node_data(name), *(p for p in extra if p.is_dir())]

    @property
    def producer_path(self) -> Path:
        return self.path / PRODUCER

    @property
    def timeline_path(self) -> Path:
        return self.path / TIMELINE

    @property
    def states_path(self) -> Path:
        return self.path / STATES

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    # -- writers ---------------------------------------------------------------------------
    def write_run(self, info: RunInfo) -> Path:
        return write_json(self.path / RUN_JSON, info)

    def write_verdict(self, verdict: Verdict) -> Path:
        return write_json(self.path / VERDICT_JSON, verdict)

    def write_cluster(self, info: ClusterInfo) -> Path:
        return write_json(self.path / CLUSTER_JSON, info)

    def write_conformance(self, conformance: Conformance) -> Path:
        (self.path / "conformance.txt").write_text(conformance.table() + "\n")
        return write_json(self.path / CONFORMANCE_JSON, conformance)

    def write_state_history(self, history: StateHistory) -> Path:
        return write_json(self.path / STATE_HISTORY_JSON, history)

    def write_audit(self, document: dict[str, Any]) -> Path:
        """The audit's own JSON document (`checkers.audit.result.AuditResult.to_dict`)."""
        return write_json(self.path / AUDIT_JSON, document)

    def timeline_writer(self) -> JsonLines:
        return JsonLines(self.timeline_path, "timeline")

    def producer_writer(self) -> JsonLines:
        return JsonLines(self.producer_path, "producer")

    def reads_writer(self) -> JsonLines:
        return JsonLines(self.path / READS, "reads")

    def states_writer(self) -> JsonLines:
        return JsonLines(self.states_path, "states")

    # -- readers ---------------------------------------------------------------------------
    def run_info(self) -> RunInfo:
        return read_json(RunInfo, self.path / RUN_JSON)

    def verdict(self) -> Verdict | None:
        return self._optional(Verdict, VERDICT_JSON)

    def cluster(self) -> ClusterInfo | None:
        return self._optional(ClusterInfo, CLUSTER_JSON)

    def audit(self) -> AuditFile | None:
        return self._optional(AuditFile, AUDIT_JSON)

    def conformance(self) -> Conformance | None:
        return self._optional(Conformance, CONFORMANCE_JSON)

    def state_history(self) -> StateHistory | None:
        return self._optional(StateHistory, STATE_HISTORY_JSON)

    def timeline(self) -> tuple[list[Event], list[str]]:
        return self._lines(Event, TIMELINE)

    def states(self) -> tuple[list[StateRecord], list[str]]:
        return self._lines(StateRecord, STATES)

    def sends(self) -> tuple[list[Send], list[str]]:
        return self._lines(Send, PRODUCER)

    def reads(self) -> tuple[list[ReadPass], list[str]]:
        return self._lines(ReadPass, READS)

    def _optional(self, cls: type[T], name: str) -> T | None:
        path = self.path / name
        return read_json(cls, path) if path.is_file() else None

    def _lines(self, cls: type[T], name: str) -> tuple[list[T], list[str]]:
        path = self.path / name
        return read_lines(cls, path) if path.is_file() else ([], [])
