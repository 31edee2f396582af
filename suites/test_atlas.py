"""`logfork atlas` on simulated runs (no cluster): the plan, the cells' rule shared with
bisect, resuming from the verdict cache, the time left, the first fixed release and the
grid written from it (HTML, atlas.json, Markdown)."""

from __future__ import annotations

import json

import pytest

from basics.releases import parse_version
from fixtures import catalog
from reports.atlas_view import atlas_markdown, markdown_from, render_atlas
from runrecord.atlas import Atlas
from runrecord.outcome import Outcome
from runrecord.typed import read_json
from suites import atlas, cli, registry
from suites.atlas import Cell, CellResult, Eta, find_fix, plan_cells, run_cells
from suites.cells import Attempt, Candidate, NoCache, RunResult, why_not
from suites.verdict_cache import VerdictCache
from testsupport.simulated import simulate_runs

SNAP = catalog.snapshot()


def cands(*versions: str) -> list[Candidate]:
    return [Candidate.maven(v) for v in versions]


def judged(scenario: str, mode: str, outcomes: dict[str, str]) -> list[CellResult]:
    return [
        CellResult(
            Cell(scenario, Candidate.maven(v), mode),
            [Attempt(RunResult(o, 30.0), cached=False, retry=False)],
        )
        for v, o in outcomes.items()
    ]


def test_the_plan_covers_every_mode_and_says_why_a_cell_is_not_run():
    scenarios = [registry.get("kip-101-s1"), registry.get("kip-279-s1-equal")]
    releases = cands("0.10.2.2", "3.9.2", "4.4.0")
    planned = plan_cells(scenarios, releases, lambda s, c, m: why_not(SNAP, s, c, m))
    shown = {(c.scenario, c.candidate.key, c.mode): c.reason for c in planned}
    assert len(planned) == 2 * (1 + 2 + 1)  # 0.10.2 zk; 3.9 zk and kraft; 4.4 kraft
    assert shown[("kip-101-s1", "0.10.2.2", "zk")] is None
    assert shown[("kip-279-s1-equal", "0.10.2.2", "zk")] == "needs leader epochs (KIP-101, 0.11.0)"
    assert shown[("kip-101-s1", "3.9.2", "kraft")] == "runs in zk mode only"
    assert shown[("kip-101-s1", "4.4.0", "kraft")] == "runs in zk mode only"
    assert shown[("kip-279-s1-equal", "4.4.0", "kraft")] is None
    only_zk = plan_cells(scenarios, releases, lambda s, c, m: why_not(SNAP, s, c, m), "zk")
    assert {c.reason for c in only_zk if c.candidate.key == "4.4.0"} == {
        "Kafka 4.4.0 has no zk mode"
    }


class Simulated:
    def __init__(self, fix: str, flaky: dict[str, int] | None = None):
        self.fix, self.flaky, self.runs = fix, dict(flaky or {}), []

    def __call__(self, c: Candidate) -> RunResult:
        self.runs.append(c.key)
        if self.flaky.get(c.key, 0) > 0:
            self.flaky[c.key] -= 1
            return RunResult("not-reached", 5.0)
        broken = c.release.parts < parse_version(self.fix)
        return RunResult("reproduced" if broken else "consistent", 60.0)


def test_cells_follow_the_rule_bisect_follows_and_a_second_atlas_runs_nothing(tmp_path):
    todo = [Cell("kip-279-s3", c, "zk") for c in cands("1.1.1", "2.0.1", "2.8.2", "3.9.2")]
    cache = VerdictCache(tmp_path, "kip-279-s3", "zk", version="1")
    runner = Simulated("2.0.0", flaky={"2.0.1": 1, "2.8.2": 2})
    lines = []

    def show(i, result, left):
        lines.append(atlas.progress_line(i, len(todo), result, left))

    clock = lambda: 60.0 * len(runner.runs)  # noqa: E731 - each run takes a minute
    first = run_cells(todo, lambda c: runner, lambda c: cache, on_cell=show, clock=clock)
    assert runner.runs == ["1.1.1", "2.0.1", "2.0.1", "2.8.2", "2.8.2", "3.9.2"]
    assert [r.outcome for r in first] == ["reproduced", "consistent", "not-reached", "consistent"]
    assert [r.runs for r in first] == [1, 2, 2, 1]
    assert lines[0].startswith("[1/4] kip-279-s3") and "reproduced" in lines[0]
    assert " 60 s " in lines[0] and lines[0].endswith("· about 3 min left")
    assert "not-reached" in lines[2] and "120 s, retried" in lines[2]
    assert lines[-1].endswith("· under a minute left")

    runner.runs.clear()
    again = run_cells(todo, lambda c: runner, lambda c: cache)
    assert runner.runs == ["2.8.2"]  # only the cell without a verdict runs again
    assert [r.cached for r in again] == [True, True, False, True]


def test_an_error_fails_its_cell_alone():
    class Broken(Exception):
        pass

    def runner(c):
        if c.key == "2.0.1":
            raise Broken("no jars for 2.0.1")
        return RunResult("consistent", 1.0)

    todo = [Cell("smoke", c, "zk") for c in cands("1.1.1", "2.0.1", "2.8.2")]
    done = run_cells(todo, lambda c: runner, lambda c: NoCache(), errors=(Broken,))
    assert [r.outcome for r in done] == ["consistent", None, "consistent"]
    assert done[1].error == "no jars for 2.0.1"
    grid = atlas.build_atlas(
        [registry.get("smoke")], [c.cell.candidate for c in done], done, started=0, complete=True
    )
    failed = grid.rows[0].cells[1][0]
    assert failed.failed and failed.outcome is None and "no jars for 2.0.1" in failed.note
    assert "| 2.0.1 | error |" in atlas_markdown(grid) and ">error<" in render_atlas(grid)
    assert atlas.exit_code(grid) == atlas.EXIT_NO_VERDICT


def test_the_time_left_comes_from_the_scenario_then_the_cache_then_any_run():
    eta = Eta()
    cell = Cell("kip-101-s1", Candidate.maven("1.1.1"), "zk")
    assert eta.left([cell]) is None and "not known" in atlas.duration(None)
    eta.recorded["kip-101-s1"] = [100.0, 200.0]
    assert eta.left([cell, cell]) == 300.0
    eta.ran["kip-101-s1"] = [40.0]
    assert eta.left([cell]) == 40.0
    eta.ran["smoke"] = [80.0]
    assert eta.left([Cell("kip-279-s3", cell.candidate, "zk")]) == 60.0
    assert atlas.duration(3 * 3600 + 5 * 60) == "about 3 h 05 min left"
    assert atlas.duration(600) == "about 10 min left"


def test_the_first_fixed_release_agrees_with_fixed_in_or_is_a_finding():
    newest = {"1.0.2": "reproduced", "1.1.1": "reproduced", "2.0.1": "consistent"}
    found = find_fix("2.0.0", "zk", judged("s", "zk", {**newest, "2.8.2": "consistent"}))
    assert found.first_fixed == "2.0.1" and found.last_broken == "1.1.1" and found.agrees
    assert "first fixed 2.0.1, last broken 1.1.1" in found.text and "AGREES" in found.text

    late = find_fix("2.0.0", "zk", judged("s", "zk", {**newest, "2.0.1": "diverged"}))
    assert late.agrees is False and "still broken on the newest run, 2.0.1" in late.text

    clean = find_fix("2.0.0", "kraft", judged("s", "kraft", {"3.3.2": "consistent"}))
    assert clean.agrees and clean.first_fixed is None and "no release run shows" in clean.text

    flip = {"0.11.0.3": "consistent", "1.1.1": "reproduced", "2.0.1": "consistent"}
    flipped = find_fix("2.0.0", "zk", judged("s", "zk", flip))
    assert flipped.agrees is False and "0.11.0.3 behave as fixed before 1.1.1" in flipped.text

    holds = find_fix(None, "zk", judged("smoke", "zk", {"1.1.1": "consistent"}))
    assert holds.agrees is None and "holds on every release run" in holds.text
    assert find_fix("2.0.0", "zk", []) is None


def _grid(tmp_path) -> Atlas:
    scenarios = [registry.get("kip-279-s1-equal"), registry.get("kip-101-s1")]
    releases = cands("0.10.2.2", "1.1.1", "2.0.1", "3.9.2", "4.4.0")
    planned = plan_cells(scenarios, releases, lambda s, c, m: why_not(SNAP, s, c, m))
    results = []
    for cell in planned:
        if cell.reason or cell.candidate.key == "4.4.0":  # 4.4.0 not run yet
            results.append(CellResult(cell))
            continue
        s = registry.get(cell.scenario)
        expected = s.expected(cell.candidate.release).value
        outcome = "consistent" if cell.candidate.key == "0.10.2.2" else expected
        run = RunResult(outcome, 42.0, None, "simulated", expected)
        result = CellResult(cell, [Attempt(run, cached=cell.candidate.key == "1.1.1", retry=False)])
        result.report = f"{cell.scenario}-{cell.candidate.key}.html"
        results.append(result)
    return atlas.build_atlas(scenarios, releases, results, started=0.0, complete=False)


def test_the_grid_marks_first_fixed_and_declared_and_reads_back(tmp_path):
    grid = _grid(tmp_path)
    assert grid.releases == ["0.10.2.2", "1.1.1", "2.0.1", "3.9.2", "4.4.0"]
    equal, s1 = grid.rows
    zk = next(f for f in equal.findings if f.mode == "zk")
    assert zk.first_fixed == "2.0.1" and zk.agrees is True
    assert [e.first_fixed for e in equal.cells[2]] == [True]
    assert equal.cells[0][0].outcome == Outcome.NOT_APPLICABLE
    assert "leader epochs" in equal.cells[0][0].note
    assert equal.cells[4][0].outcome is None and equal.cells[4][0].note == "not run yet"
    # kip-101-s1 is clean on 0.10.2.2 here, before its declared fix: a finding.
    assert s1.findings[0].agrees is False and atlas.exit_code(grid) == atlas.EXIT_NOT_AS_EXPECTED

    html = render_atlas(grid)
    assert 'href="kip-279-s1-equal-2.0.1.html"' in html and "first-fixed" in html
    assert "◆ fixed_in 2.0.0" in html and "runs in zk mode only" in html
    assert "incomplete" in html and "<script" not in html

    from reports.atlas_view import write_atlas

    write_atlas(grid, tmp_path / "atlas")
    assert read_json(Atlas, tmp_path / "atlas" / "atlas.json") == grid
    text = markdown_from(tmp_path / "atlas" / "atlas.json")
    assert text == atlas_markdown(grid) == (tmp_path / "atlas" / "atlas.md").read_text().strip()
    lines = text.splitlines()
    assert lines[0] == (
        "| release | `kip-279-s1-equal`<br>fixed in 2.0.0 | `kip-101-s1`<br>fixed in 0.11.0 |"
    )
    assert lines[4].startswith("| 2.0.1 | **consistent ✓** ★ ◆ |")
    assert "| 3.9.2 | zk consistent ✓<br>kraft consistent ✓ | consistent ✓ |" in text
    assert "- `kip-101-s1` on 4.4.0: runs in zk mode only" in text


# -- the command, with runs simulated ---------------------------------------------------------


@pytest.fixture
def simulated(monkeypatch):
    """Every release behaves as its scenario expects; returns the runs made."""
    return simulate_runs(monkeypatch, lambda s, release, mode: s.expected(release)).calls


def run_atlas(tmp_path, capsys, *args):
    code = cli.main(["atlas", *args, "--out", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_writes_the_grid_and_resumes_from_the_cache(simulated, tmp_path, capsys):
    args = ("--scenarios", "kip-101-s1,kip-279-s3", "--releases", "0.10.2.2", "1.1.1,2.0.1")
    code, out, err = run_atlas(tmp_path, capsys, *args)
    assert code == 0, err + out
    assert "2 scenario(s) × 3 release(s) (--releases): 0.10.2.2 1.1.1 2.0.1" in out
    assert "6 cells: 5 to run, 0 from the verdict cache" in out and "1 not applicable" in out
    progress = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert len(progress) == 5 and progress[0].startswith("[1/5] kip-101-s1")
    assert "kip-279-s3 zk: first fixed 2.0.1, last broken 1.1.1; AGREES with fixed_in 2.0.0" in out
    assert len(simulated) == 5
    index = tmp_path / "runs" / "atlas" / "index.html"
    assert index.is_file() and "needs leader epochs" in index.read_text()
    grid = json.loads((tmp_path / "runs" / "atlas" / "atlas.json").read_text())
    assert grid["complete"] is True and grid["runs"] == 5

    code, out, _ = run_atlas(tmp_path, capsys, *args)
    assert code == 0 and len(simulated) == 5  # nothing ran again
    assert "0 to run, 5 from the verdict cache" in out and "0 run(s), 5 cell(s)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenarios", "kip-9999"], "There is no scenario 'kip-9999'"),
        (["--releases", "2.9.9"], "Kafka 2.9.9 is not a release on Maven Central"),
        (["--releases", "latest"], "'latest' is not a Kafka version"),
    ],
)
def test_bad_input_is_a_clear_error(simulated, tmp_path, capsys, args, message):
    code, _, err = run_atlas(tmp_path, capsys, *args)
    assert code == 2 and message in err and "Traceback" not in err
    assert simulated == []


def test_the_readme_grid_is_generated_from_the_published_atlas_of_current_releases():
    """README.md's grid is docs/atlas.json's; when this fails, run the atlas, copy its
    atlas.json to docs/ and run `python -m reports.atlas_view --write`."""
    from fixtures.catalog import render
    from reports.atlas_view import PUBLISHED, ROOT, readme_section

    readme = (ROOT / "README.md").read_text()
    assert render(readme, readme_section()) == readme
    published = read_json(Atlas, PUBLISHED)
    assert published.releases == SNAP.newest_patch_per_minor(), "the current releases"
    assert published.complete
