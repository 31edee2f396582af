"""atlas.json: `logfork atlas`'s grid of scenarios (rows) by releases (columns), each cell
the outcome of one scenario on one release in each of its modes, and per scenario and mode
the first fixed release found beside the declared one."""

from __future__ import annotations

from dataclasses import dataclass, field

from runrecord.outcome import Outcome


@dataclass
class AtlasEntry:
    """One scenario on one release in one mode."""

    mode: str
    outcome: Outcome | None  # None: not run (yet), or logfork failed; `note` says which
    note: str = ""  # why it does not apply, the verdict's summary, or the error
    expected: Outcome | None = None
    as_expected: bool | None = None
    seconds: float = 0.0  # the run's wall time (the original run's, when cached)
    cached: bool = False
    runs: int = 0  # runs this time: 0 when cached or not applicable, 2 after a retry
    report: str | None = None  # the run's report, relative to the atlas's index
    first_fixed: bool = False  # the first fixed release found for this scenario and mode
    failed: bool = False  # logfork could not run it (`note` says why): run the atlas again


@dataclass
class AtlasFinding:
    """Where the fix lies for one scenario in one mode, found by running, against fixed_in."""

    mode: str
    text: str  # what was found, then the judgement against fixed_in
    found: str = ""  # what was found alone, for the grid's row headers
    first_fixed: str | None = None  # the first release with no broken release after it
    last_broken: str | None = None
    agrees: bool | None = None  # with fixed_in; None: nothing to compare


@dataclass
class AtlasRow:
    scenario: str
    title: str
    fixed_in: str | None
    cells: list[list[AtlasEntry]]  # one list per release column, an entry per mode
    findings: list[AtlasFinding] = field(default_factory=list)


@dataclass
class Atlas:
    releases: list[str]
    rows: list[AtlasRow]
    started: float
    seconds: float  # wall time of this invocation
    runs: int  # runs this invocation
    cached: int  # cells answered from the verdict cache
    complete: bool  # every cell that applies has an outcome
