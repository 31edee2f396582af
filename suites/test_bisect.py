"""The bisect search on a simulated runner: no cluster, every outcome scripted."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from basics.releases import parse_version
from fixtures.catalog import snapshot
from runrecord.typed import SCHEMA
from suites.bisect import (
    EXIT_AGREES,
    EXIT_AMBIGUOUS,
    EXIT_BAD_INPUT,
    EXIT_DISAGREES,
    BadRange,
    Direction,
    bisect,
    max_runs,
    plan,
    spans_lines_note,
)
from suites.cells import Candidate, RunResult
from suites.verdict_cache import VerdictCache

FIX, REGRESSION = Direction.FIX, Direction.REGRESSION


def releases(low: str, high: str) -> list[Candidate]:
    return [Candidate.maven(v) for v in snapshot().between(low, high)]


class Simulated:
    """Outcomes by version: `behaviour(version) -> outcome`, with scripted not-reached runs
    (`flaky[version]` = how many runs in a row end not reached)."""

    def __init__(self, behaviour, flaky=None):
        self.behaviour = behaviour
        self.flaky = Counter(flaky or {})
        self.runs: list[str] = []

    def __call__(self, c: Candidate) -> RunResult:
        self.runs.append(c.key)
        if self.flaky[c.key] > 0:
            self.flaky[c.key] -= 1
            return RunResult("not-reached", 2.5)
        return RunResult(self.behaviour(c.key), 10.0 + len(self.runs))


def fixed_at(fix: str, before="reproduced", after="consistent"):
    return lambda v: after if parse_version(v) >= parse_version(fix) else before


def test_a_fix_is_found_and_agrees_with_fixed_in():
    cands = releases("0.11.0.0", "2.8.2")  # --bad 0.11.0.0, --good 2.8.2
    runner = Simulated(fixed_at("2.0.0"))
    shown = []
    result = bisect(cands, runner, fixed_in="2.0.0", on_step=shown.append)
    assert result.answer.label == "2.0.0" and result.before.label == "1.1.1"
    assert result.agrees is True and result.exit_code == EXIT_AGREES
    assert runner.runs[:2] == ["0.11.0.0", "2.8.2"]  # both ends first
    assert len(runner.runs) <= max_runs(len(cands)) == 2 + 5
    assert [s.role for s in shown][:2] == ["--bad", "--good"] and shown == result.steps
    assert "ANSWER: 2.0.0 is the first release that behaves like --good (fixed)" in "\n".join(
        result.summary()
    )
    line = result.steps[0].line()
    assert "0.11.0.0" in line and "reproduced" in line and " s " in line and "like --bad" in line


def test_a_fix_later_than_fixed_in_is_a_finding():
    # Past the declared fix a bug that still shows is reported `diverged`, not
    # `reproduced`: the search places it on the broken side by kind.
    def behaviour(v):
        if parse_version(v) < parse_version("2.0.0"):
            return "reproduced"
        return "diverged" if parse_version(v) < parse_version("2.2.0") else "consistent"

    result = bisect(releases("1.1.1", "2.8.2"), Simulated(behaviour), fixed_in="2.0.0")
    assert result.answer.label == "2.2.0" and result.before.label == "2.1.1"
    assert result.agrees is False and result.exit_code == EXIT_DISAGREES
    assert "FINDING: the scenario declares fixed_in 2.0.0" in result.comparison
    assert "2.1.1 still behaves as broken" in result.comparison


def test_a_fix_where_the_scenario_declares_none_is_a_finding():
    # kafka-20716, kip-903 in ZooKeeper mode: declared never fixed in the mode searched.
    cands = releases("3.0.0", "3.9.2")
    runner = Simulated(fixed_at("3.5.0"))
    never = "unclean elections cannot guarantee exactly-once"
    result = bisect(cands, runner, unfixed=never)
    assert result.answer.label == "3.5.0"
    assert result.agrees is False and result.exit_code == EXIT_DISAGREES
    assert f"never fixed in this mode ({never}), but 3.5.0 behaves as fixed" in result.comparison
    # A regression's good end contradicts it as well.
    behaves = Simulated(fixed_at("3.5.0", before="consistent", after="reproduced"))
    regression = bisect(cands, behaves, direction=REGRESSION, unfixed=never)
    assert regression.exit_code == EXIT_DISAGREES
    assert "but 3.4.1 behaves as fixed" in regression.comparison


def test_never_fixed_is_read_from_a_schedules_expect():
    from runrecord.schedule_expect import Expectation, never_fixed

    unfixed = (Expectation("hanging", modes=("kraft",)),)
    assert "hanging on every release in kraft mode" in never_fixed(unfixed, "kraft")
    assert never_fixed(unfixed, "zk") is None
    fixed = (Expectation("diverged", before="2.0.0"), Expectation("consistent"))
    assert never_fixed(fixed, "zk") is None
    since = (Expectation("consistent", before="4.3.0"), Expectation("hanging", since="4.3.0"))
    said = "its expect names hanging on every release from 4.3.0 in kraft mode"
    assert never_fixed(since, "kraft") == said


def test_a_regression_good_before_bad():
    cands = releases("3.0.0", "3.9.2")  # --good 3.0.0 (older), --bad 3.9.2
    runner = Simulated(fixed_at("3.6.1", before="consistent", after="diverged"))
    result = bisect(cands, runner, direction=REGRESSION)
    assert result.answer.label == "3.6.1" and result.before.label == "3.6.0"
    assert result.exit_code == EXIT_AGREES and "declares no fix" in result.comparison
    assert [s.role for s in result.steps][:2] == ["--good", "--bad"]
    assert "behaves like --bad (broken)" in "\n".join(result.summary())
    assert len(runner.runs) <= max_runs(len(cands))

    # A regression after the declared fix contradicts it; one before it does not.
    again = bisect(cands, runner, direction=REGRESSION, fixed_in="2.0.0")
    assert again.exit_code == EXIT_DISAGREES and "3.6.1" in again.comparison
    before = bisect(cands, runner, direction=REGRESSION, fixed_in="4.0.0")
    assert before.exit_code == EXIT_AGREES and before.agrees is True


def test_not_reached_is_retried_once_then_skipped_and_searched_around():
    cands = releases("1.0.0", "2.8.2")  # 20 candidates
    mid = cands[(len(cands) - 1) // 2].key  # the first step's release
    runner = Simulated(fixed_at("2.0.0"), flaky={mid: 2, "2.0.0": 1})
    result = bisect(cands, runner, fixed_in="2.0.0")
    assert result.answer.label == "2.0.0" and result.exit_code == EXIT_AGREES
    assert runner.runs.count(mid) == 2  # run, retried, skipped
    assert runner.runs.count("2.0.0") == 2  # not reached once, then a verdict on the retry
    roles = [(s.candidate.key, s.role, s.side) for s in result.steps]
    assert (mid, "step", None) in roles and (mid, "retry", None) in roles
    assert ("2.0.0", "retry", "--good") in roles
    assert f"skipped: {mid}" in result.summary()
    assert "not reached twice" in next(s for s in result.steps if s.role == "retry").line()


def test_skips_at_the_boundary_make_the_answer_ambiguous():
    cands = releases("1.1.0", "2.1.1")  # 1.1.0 1.1.1 2.0.0 2.0.1 2.1.0 2.1.1
    runner = Simulated(fixed_at("2.0.0"), flaky={"2.0.0": 9, "2.0.1": 9})
    result = bisect(cands, runner, fixed_in="2.0.0")
    assert result.answer is None and result.exit_code == EXIT_AMBIGUOUS
    assert [c.label for c in result.ambiguous] == ["2.0.0", "2.0.1", "2.1.0"]
    text = "\n".join(result.summary())
    assert "AMBIGUOUS" in text and "one of 2.0.0, 2.0.1, 2.1.0" in text
    assert result.agrees is None


def test_an_outcome_matching_neither_end_is_skipped():
    # Both ends show the bug, differently (departs before 2.0, diverged after): a clean run
    # in between cannot be placed on either side.
    def behaviour(v):
        if v == "1.0.1":  # the first step's release
            return "consistent"
        return "departs" if parse_version(v) < parse_version("2.0.0") else "diverged"

    result = bisect(releases("0.11.0.0", "2.0.1"), Simulated(behaviour), fixed_in="2.0.0")
    assert result.answer.label == "2.0.0" and result.exit_code == EXIT_AGREES
    neither = [s for s in result.steps if s.candidate.key == "1.0.1"]
    assert neither and neither[0].side is None and "matches neither end" in neither[0].line()


def test_a_second_bisect_reuses_cached_verdicts(tmp_path):
    cands = releases("1.1.0", "2.8.2")
    cache = VerdictCache(tmp_path / "runs", "kip-279-s1-equal", "zk", version="9.9")
    first_runner = Simulated(fixed_at("2.0.0"), flaky={"2.1.0": 1})
    first = bisect(cands, first_runner, cache, fixed_in="2.0.0")
    assert first.cached == 0 and first.runs == len(first_runner.runs)
    files = sorted((tmp_path / "runs" / ".cache" / "verdicts").glob("*.json"))
    assert len(files) == len({s.candidate.key for s in first.steps})
    record = json.loads(files[0].read_text())
    assert record["schema"] == SCHEMA  # the run record's one typed schema
    assert record["key"]["scenario"] == "kip-279-s1-equal" and record["key"]["logfork"] == "9.9"

    second_runner = Simulated(pytest.fail)  # must not run anything
    second = bisect(cands, second_runner, cache, fixed_in="2.0.0")
    assert second_runner.runs == [] and second.runs == 0
    assert second.cached == len(second.steps) > 2
    assert all(s.cached and s.line().endswith("cached") for s in second.steps)
    assert second.answer.label == first.answer.label == "2.0.0"
    assert "0 run(s), " in second.summary()[0] and "from the cache" in second.summary()[0]

    # Another logfork version, mode or scenario does not reuse them.
    for other in (
        VerdictCache(tmp_path / "runs", "kip-279-s1-equal", "zk", version="10.0"),
        VerdictCache(tmp_path / "runs", "kip-279-s1-equal", "kraft", version="9.9"),
        VerdictCache(tmp_path / "runs", "kip-279-s3", "zk", version="9.9"),
    ):
        assert other.get(cands[0]) is None


def test_the_cache_keeps_verdicts_only_and_ignores_foreign_files(tmp_path):
    cache = VerdictCache(tmp_path, "smoke", "zk", version="1")
    c = Candidate.maven("3.9.2")
    cache.put(c, RunResult("not-reached", 3.0))
    assert cache.get(c) is None and not cache.dir.exists()
    kept = RunResult("consistent", 3.0, "runs/x", "all present", "consistent")
    cache.put(c, kept)
    assert cache.get(c) == kept and cache.get(c).as_expected is True
    assert [p.name for p in cache.dir.iterdir()] == ["smoke--3.9.2--zk--1.json"]  # no temp
    record = json.loads(cache.path(c).read_text())
    cache.path(c).write_text(json.dumps({**record, "schema": SCHEMA + 1}))
    assert cache.get(c) is None  # another schema: a miss, not an error
    cache.path(c).write_text(json.dumps({**record, "outcome": "not-reached"}))
    assert cache.get(c) is None
    cache.path(c).write_text("{torn")
    assert cache.get(c) is None


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 17, 33, 76])
def test_runs_stay_within_log2_n_plus_2(n):
    versions = snapshot().runnable()[:n]
    cands = [Candidate.maven(v) for v in versions]
    for boundary in versions[1:]:
        runner = Simulated(fixed_at(boundary))
        result = bisect(cands, runner)
        assert result.answer.key == boundary
        assert len(runner.runs) <= max_runs(n)
    assert max_runs(n) <= 2 + (n - 1).bit_length()


# -- bad input --------------------------------------------------------------------------------


def test_a_fix_whose_good_is_older_than_its_bad_is_refused():
    with pytest.raises(BadRange) as info:
        plan(Candidate.maven("1.1.1"), Candidate.maven("2.0.1"), FIX, releases("1.1.1", "2.0.1"))
    message = str(info.value)
    assert "For a fix, --bad is the older release" in message
    assert "--bad 2.0.1 is newer than --good 1.1.1" in message and "--regression" in message
    assert info.value.exit_code == EXIT_BAD_INPUT


def test_a_regression_whose_good_is_newer_than_its_bad_is_refused():
    with pytest.raises(BadRange, match="For a regression, --good is the older release"):
        plan(Candidate.maven("3.9.2"), Candidate.maven("3.0.0"), REGRESSION, [])


def test_good_equal_to_bad_is_refused():
    with pytest.raises(BadRange, match=r"--good and --bad are both 2\.0\.1"):
        plan(Candidate.maven("2.0.1"), Candidate.maven("2.0.1"), FIX, [])


def test_an_end_that_cannot_run_is_refused_and_others_are_left_out_with_the_reason():
    snap = snapshot()

    def exclude(c):
        if c.key == "1.1.0":
            return "needs something 1.1.0 lacks"
        return snap.why_not_runnable(c.key)

    with pytest.raises(BadRange, match=r"--good 9\.9\.9 cannot be used: .*not on Maven Central"):
        plan(Candidate.maven("9.9.9"), Candidate.maven("2.0.1"), FIX, [], exclude=exclude)
    cands, left_out = plan(
        Candidate.maven("2.0.1"),
        Candidate.maven("1.0.2"),
        FIX,
        releases("1.0.2", "2.0.1"),
        exclude=exclude,
    )
    assert [c.key for c in cands] == ["1.0.2", "1.1.1", "2.0.0", "2.0.1"]
    assert [(c.key, r) for c, r in left_out] == [("1.1.0", "needs something 1.1.0 lacks")]


def test_candidates_out_of_order_are_refused():
    with pytest.raises(BadRange, match=r"oldest first.*2\.0\.0 \(2\.0\.0\) cannot come before"):
        plan(
            Candidate.maven("2.8.2"),
            Candidate.maven("1.1.1"),
            FIX,
            [Candidate.maven("2.0.0"), Candidate.maven("1.1.0")],
            given=True,
        )


def test_ends_with_the_same_behaviour_are_bad_input():
    runner = Simulated(lambda v: "consistent")
    result = bisect(releases("2.0.0", "2.8.2"), runner, fixed_in="2.0.0")
    assert result.exit_code == EXIT_BAD_INPUT and result.answer is None
    assert "both ended consistent" in result.problem and len(runner.runs) == 2


def test_an_end_not_reached_twice_leaves_everything_ambiguous():
    runner = Simulated(fixed_at("2.0.0"), flaky={"2.8.2": 2})
    result = bisect(releases("1.1.1", "2.8.2"), runner, fixed_in="2.0.0")
    assert (
        result.exit_code == EXIT_AMBIGUOUS and "--good end 2.8.2 gave no verdict" in result.problem
    )
    assert "may be any of 2.0.0 .. 2.8.2" in "\n".join(result.summary())
    assert runner.runs == ["1.1.1", "2.8.2", "2.8.2"]


def test_a_search_across_release_lines_is_flagged() -> None:
    """KAFKA-18723 is fixed in 3.9.1 and 4.0.1, not in 4.0.0: across lines the search may
    have no single answer, and bisect says so; within one line it does not."""
    one_line = [Candidate.maven(v) for v in ("3.9.0", "3.9.1", "3.9.2")]
    assert spans_lines_note(one_line) is None
    across = [Candidate.maven(v) for v in ("3.9.0", "3.9.1", "4.0.0", "4.0.1", "4.1.1")]
    note = spans_lines_note(across)
    assert note is not None and "3.9, 4.0, 4.1" in note
