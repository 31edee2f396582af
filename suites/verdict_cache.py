"""Verdicts of earlier runs, so that a second `logfork bisect` over a range reruns nothing.

One small JSON file per (scenario, release, mode, logfork version) under
`<runs dir>/.cache/verdicts/`, written atomically (a temporary file renamed over the
target), so that an interrupted bisect never leaves half a verdict. Only verdicts are kept
(reproduced, consistent, departs, diverged): a run that ended not reached is no verdict and
is run again next time. A new logfork version starts afresh, since its scenarios may judge
differently.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from importlib import metadata
from pathlib import Path

from suites.bisect import VERDICTS, Candidate, RunResult


def logfork_version() -> str:
    try:
        return metadata.version("logfork")
    except metadata.PackageNotFoundError:  # run from a checkout without installing
        return "0+unknown"


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

    def _key(self, candidate: Candidate) -> dict[str, str]:
        return {
            "scenario": self.scenario,
            "release": candidate.key,
            "mode": self.mode,
            "logfork": self.version,
        }

    def path(self, candidate: Candidate) -> Path:
        name = "--".join(_safe(v) for v in self._key(candidate).values())
        return self.dir / f"{name}.json"

    def get(self, candidate: Candidate) -> RunResult | None:
        try:
            data = json.loads(self.path(candidate).read_text())
        except (OSError, ValueError):
            return None
        # The file name is a sanitised key; the key inside must match exactly.
        if not isinstance(data, dict) or data.get("key") != self._key(candidate):
            return None
        if data.get("outcome") not in VERDICTS:
            return None
        return RunResult(data["outcome"], float(data.get("seconds", 0.0)), data.get("detail", ""))

    def put(self, candidate: Candidate, result: RunResult) -> None:
        if result.outcome not in VERDICTS:
            return
        record = {
            "key": self._key(candidate),
            "label": candidate.label,
            "outcome": result.outcome,
            "seconds": round(result.seconds, 3),
            "detail": result.detail,
            "recorded_at": time.time(),
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        target = self.path(candidate)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=self.dir)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f, indent=1)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
