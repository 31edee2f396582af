"""run.json, cluster.json and verdict.json: what ran, on what, and what it amounted to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runrecord import exits
from runrecord.outcome import Outcome, SymptomPair

EXIT_AS_EXPECTED = exits.OK
EXIT_NOT_AS_EXPECTED = exits.FINDING
EXIT_USAGE = exits.USAGE
EXIT_NOT_REACHED = exits.NO_VERDICT
EXIT_NOT_APPLICABLE = exits.NOT_APPLICABLE


@dataclass
class BootInfo:
    release: str
    mode: str
    seconds: float
    image: str


@dataclass
class RunInfo:
    """run.json: written when the run starts, rewritten when it ends."""

    scenario: str
    title: str
    release: str
    mode: str
    started: float
    host: str
    kip: str | None = None
    jira: str | None = None
    fixed_in: str | None = None
    finished: float | None = None
    outcome: Outcome | None = None
    as_expected: bool | None = None
    boot: BootInfo | None = None
    power_model: str = "cut"  # how its power losses lost data (fixtures.disks)
    # The longest transaction.timeout.ms its producers used: the audit of its log dirs ages
    # open transactions against it (checkers.transactions).
    txn_timeout_ms: int | None = None
    # When it judged its transactions (ms since the epoch): the audit ages open transactions
    # against it rather than their partition's newest write, which a hang has none after.
    txns_judged_ms: int | None = None


@dataclass
class NodeInfo:
    role: str  # zookeeper, broker, controller, combined
    node_id: int | None
    container: str
    published: dict[int, int] = field(default_factory=dict)  # container port -> host port


@dataclass
class ClusterInfo:
    """cluster.json: the nodes, their roles, ids, containers and published ports."""

    run_id: str
    release: str
    kafka_source: str
    mode: str
    spec: dict[str, Any]
    nodes: dict[str, NodeInfo]
    boot: BootInfo | None = None

    def broker_nodes(self) -> list[str]:
        """Names of the nodes that hold Kafka log dirs (every node but ZooKeeper)."""
        return sorted(name for name, node in self.nodes.items() if node.role != "zookeeper")


@dataclass
class Verdict:
    """verdict.json: the outcome against what the release should do."""

    scenario: str
    release: str
    mode: str
    outcome: Outcome
    expected: Outcome
    summary: str
    jira: str | None = None
    kip: str | None = None
    fixed_in: str | None = None
    run_dir: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    # What the scenario set out to show beside what the brokers showed (None: a run
    # recorded before symptoms were, or no scenario: a replay judged by invariants).
    symptom: SymptomPair | None = None
    model: str | None = None  # where the model's prediction and the brokers differ

    @property
    def as_expected(self) -> bool | None:
        """None when there is no verdict to compare (see `Outcome.has_verdict`)."""
        return self.outcome == self.expected if self.outcome.has_verdict else None

    @property
    def exit_code(self) -> int:
        if self.outcome == Outcome.NOT_REACHED:
            return EXIT_NOT_REACHED
        if self.outcome == Outcome.SETUP_FAILED:
            return EXIT_USAGE
        if self.outcome == Outcome.NOT_APPLICABLE:
            return EXIT_NOT_APPLICABLE
        return EXIT_AS_EXPECTED if self.as_expected else EXIT_NOT_AS_EXPECTED

    def headline(self) -> str:
        where = f"{self.scenario} on Kafka {self.release} ({self.mode})"
        if self.outcome in (Outcome.NOT_APPLICABLE, Outcome.SETUP_FAILED):
            return f"{self.outcome.label}: {where}: {self.summary}"
        if self.outcome == Outcome.NOT_REACHED:
            verdict = "NOT REACHED"
        elif self.as_expected and self.outcome == Outcome.DEPARTS:
            verdict = f"KNOWN DEPARTURE FROM {self.kip}"
        elif self.as_expected:
            verdict = "AS THE KIP SAYS"
        else:
            verdict = "NOT AS THE KIP SAYS"
        ref = f" [{self.jira}]" if self.jira else ""
        model = f" [{self.model}]" if self.model else ""
        return (
            f"{verdict}: {where} {self.outcome.value}{ref} "
            f"(expected {self.expected.value}){model}: {self.summary}"
        )
