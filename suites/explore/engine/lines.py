"""What `logfork explore` prints: a line per schedule as it ends, and the summary."""

from __future__ import annotations

from runrecord.explore import UNTOLD, ExploreRecord, ScheduleEntry
from runrecord.outcome import Outcome, finding_key
from runrecord.replay import AGREED, AGREED_GIVEN, CANNOT_PREDICT, DISAGREED


def progress_line(e: ScheduleEntry, budget: int | None) -> str:
    of = f"/{budget}" if budget else ""
    held = "held" if e.outcome == Outcome.CONSISTENT else e.outcome.value
    verdict = finding_key(e.failure, e.cause) or held
    predicted = e.predicted or "no finding"
    # Its category (ScheduleEntry.category); without a verdict, the model's prediction.
    model = {
        AGREED: f"model agrees ({predicted})",
        AGREED_GIVEN: f"model agrees given {UNTOLD} ({predicted})",
        CANNOT_PREDICT: "model cannot predict",
        DISAGREED: f"model DISAGREES ({predicted})",
    }.get(e.category, f"model: {predicted}")
    skipped = f", {e.skipped} skipped" if e.skipped else ""
    fresh = f"  [fresh cluster: {e.fresh_cluster}]" if e.fresh_cluster else ""
    where = f"  on {e.cluster}" if e.cluster else ""
    line = (
        f"[{e.number}{of}] {e.steps} steps{skipped}  {verdict}  {model}  {e.seconds:.0f}s"
        f"{where}{fresh}"
    )
    if e.outcome == Outcome.SETUP_FAILED:
        return f"{line}\n    {e.summary}"
    return line


def summary_lines(record: ExploreRecord, elapsed: float) -> list[str]:
    n = len(record.schedules)
    rate = n / (elapsed / 60) if elapsed > 0 else 0.0
    shrinking = f", then {record.shrink_runs} shrinking run(s)" if record.shrink_runs else ""
    lines = [
        f"explore: {n} schedules in {elapsed / 60:.1f} min ({rate:.2f} schedules/min)"
        f"{shrinking}; {len(record.findings)} finding(s); {record.agreement()}; "
        f"{len(record.boots)} cluster boot(s)"
    ]
    for shard in record.shards:
        where = f" on {shard.worker}" if shard.worker else ""
        why = f": {shard.detail}" if shard.detail else ""
        lines.append(
            f"shard {shard.index} {shard.status}{where}: schedules "
            f"{', '.join(map(str, shard.schedules))}{why}"
        )
    if record.not_run:
        numbers = ", ".join(str(e.number) for e in record.not_run)
        lines.append(
            f"not run (no verdict, never a pass): {len(record.not_run)} schedule(s): {numbers}"
        )
    for e in record.disagreements:
        lines.append(
            f"disagreement: schedule {e.number}: model {e.predicted or 'no finding'}, brokers "
            f"{e.failure or 'held'}: replay: {e.schedule_file}"
        )
    return lines
