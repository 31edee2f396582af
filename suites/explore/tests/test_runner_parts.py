"""The parts of a real run that need no cluster: the model's prediction beside the brokers'
judgement, and which of a shared cluster's files a schedule's evidence takes."""

from __future__ import annotations

from pathlib import Path

from checkers.simulate import simulate
from runrecord.replay import Judgement, StepResult
from runrecord.schedule import load_schedule
from suites.explore.evidence import _wanted
from suites.explore.runner import compare

EXAMPLE = Path(__file__).parents[3] / "docs" / "schedules" / "kip-279-s1-equal.json"


def _real(statuses: list[str]) -> list[StepResult]:
    return [StepResult(i, f"step {i}", "produce", s) for i, s in enumerate(statuses)]


def test_the_model_beside_the_brokers() -> None:
    schedule = load_schedule(EXAMPLE)
    prediction = simulate(schedule, "1.1.1")
    done = _real(["done"] * len(schedule.steps))
    diverged = Judgement("diverged", "replicas diverged", 0, partitions={0: "diverged", 1: None})
    c = compare(prediction, diverged, prediction.steps, done)
    assert (c.predicted, c.actual, c.agree, c.steps_differ) == ("diverged", "diverged", True, [])
    held = Judgement(None, "held", partitions={0: None, 1: None})
    skipped = _real(["done", "skipped", *["done"] * (len(schedule.steps) - 2)])
    c = compare(prediction, held, prediction.steps, skipped)
    assert (c.predicted, c.actual, c.agree, c.steps_differ) == ("diverged", None, False, [1])
    # A finding on the background partition is not the model's to predict.
    background = Judgement("diverged@background", "p1", 1, partitions={0: None, 1: "diverged"})
    assert compare(simulate(schedule, "2.8.2"), background, [], []).agree


def test_evidence_takes_the_topic_and_what_lies_beside_it(tmp_path: Path) -> None:
    for name in ("s-1-0", "s-1-1", "s-10-0", "other-0", "__cluster_metadata-0", "s-1-0.abc-delete"):
        (tmp_path / name).mkdir()
    for name in ("meta.properties", "replication-offset-checkpoint"):
        (tmp_path / name).write_text("")
    taken = sorted(p.name for p in tmp_path.iterdir() if _wanted(p, "s-1"))
    assert taken == [
        "__cluster_metadata-0",
        "meta.properties",
        "replication-offset-checkpoint",
        "s-1-0",
        "s-1-1",
    ]
