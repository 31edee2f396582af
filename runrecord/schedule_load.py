"""How a schedule file states a step: `load_step` reads one (its kind, its fields, each
checked as its metadata says) and checks what a step needs of the cluster."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from runrecord.power import CUT
from runrecord.schedule_cluster import Cluster
from runrecord.schedule_fields import Problems, an_object, is_int, unknown_fields
from runrecord.schedule_steps import (
    QUORUM,
    STEP_KINDS,
    Cut,
    ElectUnclean,
    FailDir,
    Heal,
    MoveDir,
    PowerLoss,
    Quorum,
    Reassign,
    Role,
    Step,
    TxnWrite,
)


def _load_target(
    value: Any, path: str, problems: Problems, cluster: Cluster | None, endpoint: bool
) -> Any:
    if is_int(value):
        if cluster is not None and not 1 <= value <= cluster.brokers:
            problems.add(
                path, f"broker {value} does not exist (brokers are 1 to {cluster.brokers})"
            )
            return None
        if value < 1:
            problems.add(path, "broker ids start at 1")
            return None
        return value
    if endpoint and value == QUORUM:
        return QUORUM
    try:
        role = Role(value)
    except ValueError:
        roles = ", ".join(r.value for r in Role) + (f", {QUORUM}" if endpoint else "")
        problems.add(path, f"must be a broker id or one of: {roles}")
        return None
    if role is Role.CONTROLLER and cluster is not None and cluster.mode == "kraft" and not endpoint:
        problems.add(path, "in KRaft mode the controller is not a broker; only cuts may name it")
        return None
    return role


def load_step(value: Any, path: str, problems: Problems, cluster: Cluster | None) -> Step | None:
    obj = an_object(value, path, problems)
    if obj is None:
        return None
    kind = obj.get("kind")
    if kind is None:
        problems.add(f"{path}.kind", "missing")
        return None
    cls = STEP_KINDS.get(kind)
    if cls is None:
        problems.add(f"{path}.kind", f"unknown step kind {kind!r} (kinds: {', '.join(STEP_KINDS)})")
        return None
    specs = {f.name: f for f in fields(cls)}
    unknown_fields(obj, ["kind", *specs], path, problems)
    before = len(problems.items)
    kwargs: dict[str, Any] = {}
    for name, spec in specs.items():
        where = f"{path}.{name}"
        check = spec.metadata["check"]
        if name not in obj:
            if spec.default is MISSING:
                problems.add(where, "missing")
            continue
        raw = obj[name]
        if raw is None and spec.default is None:
            continue
        if check in ("target", "endpoint"):
            kwargs[name] = _load_target(raw, where, problems, cluster, check == "endpoint")
        else:
            converted, message = check(raw)
            if message:
                problems.add(where, message)
            kwargs[name] = converted
    if len(problems.items) > before:
        return None
    step = cls(**kwargs)
    _check_step(step, path, problems, cluster)
    return step


def _check_step(step: Step, path: str, problems: Problems, cluster: Cluster | None) -> None:
    if isinstance(step, Heal) and (step.a is None) != (step.b is None):
        problems.add(path, "a heal names both ends of a link (a and b) or neither (heal every cut)")
    if isinstance(step, Cut | Heal) and step.a is not None and step.a == step.b:
        problems.add(f"{path}.b", "a link needs two different ends")
    if isinstance(step, Quorum) and cluster is not None:
        if cluster.mode != "kraft":
            problems.add(f"{path}.kind", "a quorum step needs KRaft (cluster.mode kraft)")
        elif isinstance(step.voter, int) and step.voter > cluster.controllers:
            problems.add(f"{path}.voter", f"the cluster has {cluster.controllers} controller(s)")
    if isinstance(step, PowerLoss) and step.power_model != CUT and step.lose is not None:
        problems.add(f"{path}.lose", f"the {step.model} model decides what is lost: no lose")
    if isinstance(step, MoveDir | FailDir) and cluster is not None and cluster.log_dirs < 2:
        what = "a move between log dirs" if isinstance(step, MoveDir) else "a failed log dir"
        problems.add(f"{path}.kind", f"{what} needs cluster.log_dirs 2")
    spans = isinstance(step, TxnWrite) and step.partitions and cluster is not None
    if spans and step.partitions > 1 + cluster.background_partitions:
        problems.add(
            f"{path}.partitions",
            f"the topic has {1 + cluster.background_partitions} partitions "
            "(cluster.background_partitions + 1)",
        )
    if isinstance(step, Reassign):
        if step.add is None and step.remove is None and step.prefer is None:
            problems.add(path, "a reassignment names at least one of add, remove and prefer")
        if cluster is not None and cluster.mode != "kraft":
            # The ZooKeeper-mode controller bumps the leader epoch at a reassignment's
            # start, end and each removal (KafkaController.onPartitionReassignment), which
            # the model does not follow.
            problems.add(f"{path}.kind", "a reassignment step needs KRaft (cluster.mode kraft)")
    unclean = cluster is None or cluster.topic_config.unclean_leader_election_enable
    if isinstance(step, ElectUnclean) and not unclean:
        problems.add(
            f"{path}.kind",
            "an unclean election needs cluster.topic_config."
            "unclean.leader.election.enable set to true",
        )
