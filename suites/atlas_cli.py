"""`logfork atlas [--scenarios a,b,c] [--releases V ...] [--kafka-mode M]`.

Runs scenarios over releases (default: every scenario, on the newest release of each line
logfork runs, 0.10.2 to the newest 4.x) in every mode each release has, and writes the grid
(suites.atlas) as the index of a folder of reports: scenarios as rows, releases as columns,
each cell its outcome linked to its run's report, and per scenario the first fixed release
found beside the declared one. Cells that cannot run on a release or in a mode are shown
with the reason and not run. Verdicts come from and go to the verdict cache that bisect
uses, so an interrupted atlas, run again, runs only what it lacks; the grid is rewritten
after every cell.

Exit: 0 every cell as the KIP says and every fix found where declared; 1 some cell or fix
is not; 2 bad input; 3 some cell has no verdict yet (not reached twice, or logfork failed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from basics.errors import LogforkError, SetupError
from runrecord.atlas import Atlas
from suites.atlas import (
    Cell,
    CellResult,
    Eta,
    build_atlas,
    exit_code,
    plan_cells,
    progress_line,
    run_cells,
)
from suites.cells import Candidate, add_run_arguments, candidate, scenario_runner, why_not

HELP = "run scenarios over releases and write the grid of which release is safe from which bug"


def _names(values: Sequence[str] | None) -> list[str]:
    """Values given comma-separated, space-separated, or both."""
    return [v for value in values or () for v in value.split(",") if v.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenarios",
        nargs="+",
        metavar="ID",
        help="scenario ids, comma- or space-separated (default: every scenario)",
    )
    parser.add_argument(
        "--releases",
        nargs="+",
        metavar="V",
        help="releases or local distributions, comma- or space-separated (default: the newest "
        "release of each line from 0.10.2 to the newest 4.x)",
    )
    parser.add_argument(
        "--kafka-mode",
        choices=("zk", "kraft"),
        help="only this mode (default: every mode each release has)",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="where the grid (index.html, atlas.json, atlas.md) and each run's report go "
        "(default: DIR/atlas/ under --out)",
    )
    add_run_arguments(parser, out_help=", shared with bisect")


def _releases(given: list[str], catalog) -> list[Candidate]:
    if not given:
        return [Candidate.maven(v) for v in catalog.newest_patch_per_minor()]
    chosen: dict[str, Candidate] = {}
    for spec in given:
        c = candidate(spec)
        if not c.local and c.release.version not in catalog:
            raise SetupError(
                f"--releases: Kafka {spec} is not a release on Maven Central ({catalog.source})."
                f" Releases there: {', '.join(catalog.versions)}."
            )
        chosen.setdefault(c.key, c)
    return sorted(chosen.values(), key=lambda c: (c.release.parts, c.label))


def _reporter(report_dir: Path):
    from reports.cli import error_reason, report_path, report_run

    def report(result: CellResult) -> None:
        run = result.result
        if run is None or not run.run_dir or not Path(run.run_dir).is_dir():
            return
        path = report_path(Path(run.run_dir), report_dir)
        if not path.is_file():
            try:
                path = report_run(Path(run.run_dir), report_dir, index=False)
            except Exception as exc:  # noqa: BLE001 - a report is not worth the atlas
                print(f"  no report for {result.cell}: {error_reason(exc)}", file=sys.stderr)
                return
        result.report = path.name

    return report


def main(args: argparse.Namespace) -> int:
    from fixtures import catalog as catalogue
    from reports.atlas_view import write_atlas
    from suites import registry
    from suites.verdict_cache import VerdictCache

    started = time.time()
    names = _names(args.scenarios)
    scenarios = [registry.get(n) for n in dict.fromkeys(names)] or list(registry.SCENARIOS.values())
    catalog = catalogue.load(refresh=args.refresh_catalog)
    releases = _releases(_names(args.releases), catalog)
    out = Path(args.out)
    report_dir = Path(args.report) if args.report else out / "atlas"

    planned = plan_cells(
        scenarios, releases, lambda s, c, m: why_not(catalog, s, c, m), args.kafka_mode
    )
    todo = [c for c in planned if not c.reason]
    caches = {(s.id, m): VerdictCache(out, s.id, m) for s in scenarios for m in ("zk", "kraft")}
    runners = {
        (s.id, m): scenario_runner(s, m, out=out, base_image=args.base_image)
        for s in scenarios
        for m in ("zk", "kraft")
    }

    def cache_for(cell: Cell) -> VerdictCache:
        return caches[(cell.scenario, cell.mode)]

    cached = sum(cache_for(c).get(c.candidate) is not None for c in todo)
    print(
        f"atlas: {len(scenarios)} scenario(s) × {len(releases)} release(s) "
        f"({'--releases' if args.releases else catalog.source}): "
        f"{' '.join(c.label for c in releases)}"
    )
    print(
        f"{len(planned)} cells: {len(todo) - cached} to run, {cached} from the verdict cache "
        f"({caches[(scenarios[0].id, 'zk')].dir}), {len(planned) - len(todo)} not applicable "
        f"(shown in the grid with the reason)",
        flush=True,
    )
    done: dict[Cell, CellResult] = {}
    report = _reporter(report_dir)

    def write(complete: bool) -> Atlas:
        results = [done.get(c, CellResult(c)) for c in planned]
        atlas = build_atlas(scenarios, releases, results, started=started, complete=complete)
        write_atlas(atlas, report_dir)
        return atlas

    def on_cell(i: int, result: CellResult, left: float | None) -> None:
        done[result.cell] = result
        print(progress_line(i, len(todo), result, left), flush=True)
        if result.error:
            print(f"  {result.error}", flush=True)
        write(complete=False)

    complete = False
    try:
        run_cells(
            todo,
            lambda cell: runners[(cell.scenario, cell.mode)],
            cache_for,
            eta=Eta(),
            after=report,
            on_cell=on_cell,
            errors=(LogforkError,),
        )
        complete = all(done[c].outcome is not None for c in todo)
    finally:
        atlas = write(complete)  # interrupted too: the grid of what has run
    for row in atlas.rows:
        for f in row.findings:
            print(f"{row.scenario} {f.text}")
    print(
        f"{atlas.runs} run(s), {atlas.cached} cell(s) from the verdict cache, "
        f"{(time.time() - started) / 60:.1f} min; grid: {report_dir / 'index.html'}"
    )
    return exit_code(atlas)
