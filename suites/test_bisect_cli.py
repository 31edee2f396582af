"""`logfork bisect` end to end, with scenario runs simulated (no cluster) and the release
catalogue taken from logfork's built-in list (no network)."""

from __future__ import annotations

import pytest

from basics.releases import parse_version
from fixtures import catalog
from runrecord.outcome import Outcome
from suites import cli
from testsupport.simulated import simulate_runs


@pytest.fixture
def simulated(monkeypatch):
    """Every release before `state["fix"]` shows the bug; `state["calls"]` records the runs."""
    state = {"fix": "2.0.0", "not_reached": set()}

    def decide(scenario, release, mode):
        if str(release) in state["not_reached"]:
            return Outcome.NOT_REACHED
        if release.parts < parse_version(state["fix"]):
            return Outcome.REPRODUCED
        return Outcome.CONSISTENT

    runs = simulate_runs(monkeypatch, decide)
    state["runs"], state["calls"] = runs, runs.calls
    return state


def bisect(tmp_path, capsys, *args):
    code = cli.main(["bisect", *args, "--out", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_fix_agreeing_with_fixed_in_then_from_the_cache(simulated, tmp_path, capsys):
    args = ("kip-279-s1-equal", "--bad", "1.0.0", "--good", "2.8.2")
    code, out, err = bisect(tmp_path, capsys, *args)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("bisecting a fix: kip-279-s1-equal (zk), the first release after")
    assert lines[1].startswith("candidates (28, logfork's built-in list of")
    steps = [ln for ln in lines if ln.startswith(("--bad", "--good", "step"))]
    assert steps[0].split()[:3] == ["--bad", "1.0.0", "reproduced"]
    assert steps[1].split()[:3] == ["--good", "2.8.2", "consistent"]
    assert all(" s  like " in ln and "cached" not in ln for ln in steps)
    assert "ANSWER: 2.0.0 is the first release that behaves like --good (fixed)" in out
    assert "AGREES with fixed_in 2.0.0" in out
    runs = len(simulated["calls"])
    assert runs == len(steps) <= 2 + 5

    code, again, _ = bisect(tmp_path, capsys, *args)
    assert code == 0 and len(simulated["calls"]) == runs  # nothing ran again
    cached = [ln for ln in again.splitlines() if ln.endswith("cached")]
    assert len(cached) == runs
    assert f"0 run(s), {runs} verdict(s) from the cache" in again


def test_a_disagreement_is_a_finding_with_exit_1(simulated, tmp_path, capsys):
    simulated["fix"] = "2.1.0"
    code, out, _ = bisect(tmp_path, capsys, "kip-279-s1-equal", "--bad", "1.1.1", "--good", "2.8.2")
    assert code == 1
    assert "ANSWER: 2.1.0" in out and "FINDING: the scenario declares fixed_in 2.0.0" in out


def test_a_regression(simulated, tmp_path, capsys):
    # smoke must hold everywhere; simulate it breaking: consistent before, diverged after.
    def decide(scenario, release, mode):
        return Outcome.DIVERGED if release.parts >= (3, 7, 1) else Outcome.CONSISTENT

    simulated["runs"].decide = decide
    code, out, _ = bisect(
        tmp_path, capsys, "smoke", "--regression", "--good", "3.3.0", "--bad", "4.0.0"
    )
    assert code == 0
    assert out.startswith("bisecting a regression: smoke (kraft)")  # 4.0 has no ZooKeeper
    assert "ANSWER: 3.7.1 is the first release that behaves like --bad (broken)" in out
    assert "declares no fix" in out
    assert {mode for _, mode in simulated["calls"]} == {"kraft"}


def test_a_fix_given_the_wrong_way_round_is_a_clear_error(simulated, tmp_path, capsys):
    code, out, err = bisect(
        tmp_path, capsys, "kip-279-s1-equal", "--good", "1.1.1", "--bad", "2.0.1"
    )
    assert code == 2 and out == "" and simulated["calls"] == []
    assert err.startswith("logfork: For a fix, --bad is the older release")
    assert "add --regression" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bad", "1.1.1", "--good", "9.9.9"], "--good 9.9.9 cannot be used: Kafka 9.9.9 is not"),
        (["--bad", "1.1.1", "--good", "1.1.1"], "--good and --bad are both 1.1.1"),
        (["--bad", "0.10.2.2", "--good", "2.0.1"], "--bad 0.10.2.2 cannot be used: "),
        (["--bad", "1.1.1", "--good", "latest"], "'latest' is not a Kafka version"),
    ],
)
def test_bad_ranges(simulated, tmp_path, capsys, args, message):
    code, _, err = bisect(tmp_path, capsys, "kip-279-s1-equal", *args)
    assert code == 2 and message in err, err
    assert simulated["calls"] == []


def test_ends_behaving_alike_exit_2(simulated, tmp_path, capsys):
    code, out, _ = bisect(tmp_path, capsys, "kip-279-s1-equal", "--bad", "2.0.0", "--good", "2.8.2")
    assert code == 2 and "both ended consistent" in out


def test_skips_leave_an_ambiguous_range_exit_3(simulated, tmp_path, capsys):
    simulated["not_reached"] = {"2.0.0", "2.0.1"}
    code, out, _ = bisect(tmp_path, capsys, "kip-279-s1-equal", "--bad", "1.1.1", "--good", "2.1.0")
    assert code == 3
    assert "AMBIGUOUS" in out and "one of 2.0.0, 2.0.1, 2.1.0" in out
    assert "skipped: 2.0.0, 2.0.1" in out


def test_releases_the_scenario_cannot_run_are_left_out_with_the_reason(
    simulated, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(catalog.UNRUNNABLE, "1.0.1", "a reason for the test")
    code, out, _ = bisect(
        tmp_path, capsys, "kip-279-s1-equal", "--bad", "0.11.0.0", "--good", "2.0.1"
    )
    assert code == 0
    assert "left out: 1.0.1: a reason for the test" in out
    assert "1.0.1" not in {kafka for kafka, _ in simulated["calls"]}


def _distribution(root, version):
    libs = root / f"kafka_2.13-{version}" / "libs"
    libs.mkdir(parents=True)
    (libs / f"kafka_2.13-{version}.jar").write_bytes(b"PK")
    return libs.parent


def test_local_builds_as_ends_and_candidates(simulated, tmp_path, capsys):
    builds = [_distribution(tmp_path / f"b{i}", v) for i, v in enumerate(["1.1.1", "2.0.0"])]
    simulated["fix"] = "2.0.0"
    code, out, err = bisect(
        tmp_path,
        capsys,
        "kip-279-s1-equal",
        "--bad",
        "1.1.0",
        "--good",
        "2.0.1",
        "--candidates",
        *map(str, builds),
    )
    assert code == 0, err
    assert "candidates (4, --candidates)" in out
    assert f"ANSWER: {builds[1]} (2.0.0) is the first release" in out
    assert str(builds[0]) in {kafka for kafka, _ in simulated["calls"]}

    code, _, err = bisect(
        tmp_path,
        capsys,
        "kip-279-s1-equal",
        "--bad",
        "1.1.0",
        "--good",
        "2.0.1",
        "--candidates",
        *map(str, reversed(builds)),
    )
    assert code == 2 and "oldest first" in err


def test_a_local_build_at_an_end_takes_maven_releases_between(simulated, tmp_path, capsys):
    build = _distribution(tmp_path / "mine", "2.0.1")
    code, out, err = bisect(
        tmp_path, capsys, "kip-279-s1-equal", "--bad", "1.1.0", "--good", str(build)
    )
    assert code == 0, err
    assert f"candidates (4, logfork's built-in list of {catalog.SNAPSHOT_DATE}): " in out
    assert f"): 1.1.0 1.1.1 2.0.0 {build} (2.0.1)\n" in out
    assert "left out: 2.0.1: same version as a local distribution at an end" in out
    assert "ANSWER: 2.0.0" in out


def test_a_schedule_file_is_bisected_by_its_expect(tmp_path, capsys, monkeypatch):
    """`--schedule FILE`: the mode is the schedule's, the declared fix is where its `expect`
    says the bug ends, and releases whose storage cannot be formatted with its features
    are left out."""
    from suites import bisect_cli
    from suites.cells import RunResult

    monkeypatch.setattr(catalog, "load", lambda refresh=False: catalog.snapshot())
    runs: list[str] = []

    def runner(schedule, name, *, out, base_image=None):
        def run(c):
            runs.append(c.label)
            bug = c.release.parts < (4, 1)
            return RunResult("reproduced" if bug else "consistent", 1.0, None, "", None)

        return run

    monkeypatch.setattr(bisect_cli, "schedule_runner", runner)
    path = tmp_path / "KAFKA-19522.json"
    path.write_text(
        '{"format": 1, "cluster": {"mode": "kraft", "replication_factor": 3, '
        '"topic_config": {"min.insync.replicas": 2}, '
        '"features": {"eligible.leader.replicas.version": 1}}, '
        '"steps": [{"kind": "kill"}], "expect": [{"before": "4.1.0", "kind": '
        '"fenced-leader"}, {"kind": "consistent"}]}'
    )
    code, out, err = bisect(
        tmp_path, capsys, "--schedule", str(path), "--bad", "4.0.2", "--good", "4.1.0"
    )
    assert code == 0, err
    assert out.startswith("bisecting a fix: schedule-KAFKA-19522-")
    assert "(kraft)" in out.splitlines()[0]
    assert "ANSWER: 4.1.0" in out and "AGREES with fixed_in 4.1.0" in out
    assert runs[:2] == ["4.0.2", "4.1.0"]
    code, _, err = bisect(tmp_path, capsys, "--schedule", str(path), "--bad", "3.9.2",
                          "--good", "4.1.0")  # fmt: skip
    assert code == 2 and "needs 4.0" in err


def test_a_scenario_or_a_schedule_one_of_the_two(tmp_path, capsys):
    code, _, err = bisect(tmp_path, capsys, "--bad", "1.1.1", "--good", "2.8.2")
    assert code == 2 and "name a scenario or a schedule file" in err
