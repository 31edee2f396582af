"""How a schedule file states a step: `load_step` reads one (its kind, its fields, each
checked as its metadata says) and asks the step what it needs of the cluster
(`StepKind.problems`): nothing here knows one kind from another."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from runrecord.schedule_cluster import Cluster
from runrecord.schedule_fields import Problems, an_object, is_int, unknown_fields
from runrecord.steps import QUORUM, STEP_KINDS, Role, Step


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
    for name, message in step.problems(cluster):
        problems.add(f"{path}.{name}" if name else path, message)
