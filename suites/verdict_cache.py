"""Verdicts of earlier runs, so that a second `logfork bisect` or `logfork atlas` over the
same cells reruns nothing.

One file per (scenario, release, mode, logfork version) under `<runs dir>/.cache/verdicts/`,
a `runrecord.cell.CellVerdict` written on the run record's schema (runrecord.typed), and
atomically, so that an interrupted run never leaves half a verdict. Only verdicts are kept
(reproduced, consistent, departs, diverged): a run that ended not reached is no verdict and
is run again next time. A new logfork version starts afresh, since its scenarios may judge
differently; so does any change to the product's source (the version carries a digest of
it, as a checkout's version stays the same between fixes). A file of another schema, or
torn, is a miss.
"""

from __future__ import annotations

import hashlib
import re
import time
from importlib import metadata
from pathlib import Path

from basics.paths import PROJECT_ROOT
from runrecord.cell import CellKey, CellVerdict
from runrecord.outcome import Outcome
from runrecord.typed import RunRecordError, read_json, write_json
from suites.cells import VERDICTS, Candidate, RunResult

PRODUCT = ("fixtures", "observe", "faults", "checkers", "runrecord", "reports", "suites")


def source_digest() -> str:
    """A digest of the product's Python source (tests left out): what judged a verdict."""
    root = PROJECT_ROOT
    digest = hashlib.sha256()
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            if "tests" in relative.parts or path.name.startswith("test_"):
                continue
            digest.update(str(relative).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def logfork_version() -> str:
    try:
        version = metadata.version("logfork")
    except metadata.PackageNotFoundError:  # run from a checkout without installing
        version = "0"
    return f"{version}+{source_digest()}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


class VerdictCache:
    def __init__(
        self, runs_dir: Path, scenario: str, mode: str, version: str | None = None
    ) -> None:
        self.dir = Path(runs_dir) / ".cache" / "verdicts"
        self.scenario = scenario
        self.mode = mode
        self.version = version or logfork_version()

    def key(self, candidate: Candidate) -> CellKey:
        return CellKey(self.scenario, candidate.key, self.mode, self.version)

    def path(self, candidate: Candidate) -> Path:
        key = self.key(candidate)
        name = "--".join(_safe(v) for v in (key.scenario, key.release, key.mode, key.logfork))
        return self.dir / f"{name}.json"

    def record(self, candidate: Candidate) -> CellVerdict | None:
        path = self.path(candidate)
        if not path.is_file():
            return None
        try:
            record = read_json(CellVerdict, path)
        except RunRecordError:
            return None
        # The file name is a sanitised key; the key inside must match exactly.
        if record.key != self.key(candidate) or record.outcome.value not in VERDICTS:
            return None
        return record

    def get(self, candidate: Candidate) -> RunResult | None:
        record = self.record(candidate)
        if record is None:
            return None
        expected = None if record.expected is None else record.expected.value
        return RunResult(
            record.outcome.value, record.seconds, record.run_dir, record.summary, expected
        )

    def put(self, candidate: Candidate, result: RunResult) -> None:
        if result.outcome not in VERDICTS:
            return
        record = CellVerdict(
            key=self.key(candidate),
            label=candidate.label,
            outcome=Outcome(result.outcome),
            seconds=round(result.seconds, 3),
            run_dir=result.run_dir,
            summary=result.summary,
            expected=None if result.expected is None else Outcome(result.expected),
            recorded_at=time.time(),
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(self.path(candidate), record)
