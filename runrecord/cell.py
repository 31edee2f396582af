"""A cell's cached verdict: one scenario on one release in one mode, as `logfork bisect` and
`logfork atlas` keep it in `<runs>/.cache/verdicts/` so that neither runs a cell twice."""

from __future__ import annotations

from dataclasses import dataclass

from runrecord.outcome import Outcome


@dataclass(frozen=True)
class CellKey:
    scenario: str
    release: str  # a version, or local-<digest> for a local distribution
    mode: str
    logfork: str  # the logfork version that judged it: another may judge differently


@dataclass(frozen=True)
class CellVerdict:
    key: CellKey
    label: str  # the release as the user gave it
    outcome: Outcome
    seconds: float
    run_dir: str | None = None
    summary: str = ""
    expected: Outcome | None = None
    recorded_at: float = 0.0
