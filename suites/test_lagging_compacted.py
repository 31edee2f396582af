"""lagging-compacted on real brokers: a replica stopped for maintenance while its peers'
cleaners compact past its log end is a lagging prefix, consistent, with the lagging
replica named; one record changed on it, or on a leader below its end, is found at that
record's offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.cli import main as logfork
from suites.scenarios.lagging_compacted import ASSIGNMENT, STOPPED, TOPIC
from testsupport.audits import change_in_copy, held_by_all, replicas
from testsupport.scenarios import run_scenario

pytestmark = pytest.mark.cluster


def test_lagging_compacted(kafka_target, logfork_runs, request, tmp_path: Path) -> None:
    verdict = run_scenario("lagging-compacted", kafka_target, logfork_runs, request)
    run_dir = Path(verdict.run_dir)
    assert logfork(["audit", str(run_dir), "--topic", TOPIC]) == 0
    # Broker 1 is the leader of partition 0 no more; its peers lead there, and hold what it
    # holds below its log end as the cleaner leaves it.
    partition = next(p for p, r in enumerate(ASSIGNMENT) if r[0] == STOPPED)
    lineages = replicas(run_dir, TOPIC, partition)
    lagging = next(lin for lin in lineages if lin.broker_id == STOPPED)
    leader = max((lin for lin in lineages if lin is not lagging), key=lambda lin: lin.leo)
    assert lagging.leo < leader.leo and (leader.cleaned_to or 0) > lagging.leo
    # Below broker 1's own high watermark: a tail above it (writes it led but no follower
    # fetched before the controlled shutdown) is truncated at its next fetch, so a change
    # there is no divergence.
    committed = min(lagging.leo, lagging.high_watermark or lagging.leo)
    shared = held_by_all([lagging, leader], max(lagging.log_start_offset, 0), committed)
    assert shared, (lagging.leo, leader.cleaned_to)
    offset = shared[len(shared) // 2]
    for victim in (lagging, leader):
        found = change_in_copy(run_dir, tmp_path / f"b{victim.broker_id}", victim, offset)
        assert (found.status, found.diverged_at) == ("diverged", offset), found.notes
