"""The audit's text summary (what `logfork audit` prints without --json)."""

from __future__ import annotations

import textwrap

from checkers.audit.result import (
    EXIT_CONSISTENT,
    EXIT_DIVERGED,
    EXIT_UNREADABLE,
    AuditResult,
)
from checkers.verdict import DIVERGED, PartitionVerdict
from runrecord.outcome import high_watermark_clause


def wrap(text: str, indent: str = "  ") -> str:
    # Paths stay whole so they can be copied from the output.
    return textwrap.fill(
        text,
        width=100,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def leniency(v: PartitionVerdict) -> list[str]:
    """Where the partition was not compared byte for byte, and why: one line per range."""
    lines = []
    if v.lenient:
        start = min(r["start"] for r in v.lenient)
        end = max(r["end"] for r in v.lenient)
        lines.append(
            f"compacted ({v.lenient[0]['why']}): offsets {start} to {end - 1} compared record "
            "by record, as the log cleaner leaves them"
        )
    lines += [
        f"not checked: offsets {r['start']} to {r['end'] - 1} of broker {r['broker']}, {r['why']}"
        for r in v.unchecked
    ]
    return lines


def consistency(v: PartitionVerdict) -> str:
    """ "consistent", or "consistent once truncated" where a replica's tail awaits the
    truncation its next fetch does; which replicas lag, where any do."""
    text = "consistent"
    if v.pending_truncation is not None:
        text += f" once truncated: {v.pending_truncation.line()}"
    if v.lagging:
        behind = ", ".join(f"broker {b} (log end {leo})" for b, leo in sorted(v.lagging.items()))
        text += f"; lags: {behind}"
    return text


def transaction_lines(v: PartitionVerdict) -> list[str]:
    """Hanging and torn transactions and duplicate sequences (`checkers.transactions`)."""
    t = v.transactions
    lines = [
        f"HANGING transaction: producer {h.producer_id} (epoch {h.producer_epoch}) open from "
        f"offset {h.first_offset} on broker(s) {', '.join(map(str, h.brokers))}, "
        f"{h.age_ms / 60000:.1f} min older than the partition's newest batch"
        for h in t.hanging
    ]
    lines += [
        f"TORN transaction: producer {x.producer_id} from offset {x.first_offset}, marker at "
        f"{x.marker_offset}: "
        + ", ".join(f"{kind} on broker {b}" for b, kind in x.kinds)
        + (
            ""
            if x.coordinator is None
            else f"; its coordinator completed {x.coordinator} ({x.transactional_id!r})"
        )
        for x in t.torn
    ]
    lines += [
        f"DUPLICATE sequence: producer {d.producer_id} epoch {d.producer_epoch} sequence "
        f"{d.base_sequence} appended {len(d.offsets)} times on broker {d.broker}, at offsets "
        + ", ".join(map(str, d.offsets))
        for d in t.duplicates
    ]
    return lines


def render(result: AuditResult) -> str:
    """The audit as a Kafka engineer reads it first: one line per partition, the versions
    at a divergence and what the protocol does next, then the bad input."""
    lines: list[str] = []
    brokers = sorted({d.broker_id for d in result.log_dirs if d.broker_id is not None})
    lines.append(
        f"logfork audit: {len(result.log_dirs)} log dir(s), brokers "
        f"{', '.join(map(str, brokers)) or 'none'}; {len(result.partitions)} partition(s)"
    )
    for v in result.partitions:
        name = f"{v.topic}-{v.partition}"
        leos = " ".join(f"{b}:{v.log_end_offsets[b]}" for b in v.replicas)
        if v.status != DIVERGED:
            lines.append(f"  {name}: {consistency(v)} (replicas "
                         f"{', '.join(map(str, v.replicas))}; log end offsets {leos})")  # fmt: skip
        else:
            lines.extend(_render_diverged(name, v, leos))
            state = result.kraft_state.get((v.topic, v.partition))
            if state is not None:
                lines.append(
                    wrap(
                        f"metadata log: leader {state['leader']}, leader epoch "
                        f"{state['leader_epoch']}, ISR {state['isr']}, "
                        f"{state['leader_recovery_state']} (offset {state['offset']})",
                        "      ",
                    )
                )
        lines.extend(wrap(line, "      ") for line in leniency(v))
        lines.extend(wrap(line, "      ") for line in transaction_lines(v))
        lines.extend(wrap(note, "      note: ") for note in v.notes)
    lines.extend(_render_log_dirs_apart(result))
    if result.errors:
        lines.append(f"bad input ({len(result.errors)}):")
        for e in result.errors:
            who = f"[broker {e.broker_id}] " if e.broker_id is not None else ""
            lines.append(wrap(f"{who}{e.error}"))
    diverged = sum(v.status == DIVERGED for v in result.partitions)
    with_findings = sum(v.transactions.found for v in result.partitions)
    verdict = {
        EXIT_CONSISTENT: "all consistent",
        EXIT_DIVERGED: "divergence found" if diverged else "transaction finding(s)",
        EXIT_UNREADABLE: "some input could not be read at all",
    }[result.exit_code]
    with_txn = f", {with_findings} with transaction findings" if with_findings else ""
    lines.append(
        f"result: {len(result.partitions) - diverged} consistent, {diverged} diverged"
        f"{with_txn}, {len(result.errors)} bad input(s): {verdict} (exit {result.exit_code})"
    )
    return "\n".join(lines)


def _render_diverged(name: str, v: PartitionVerdict, leos: str) -> list[str]:
    hw = (
        "unknown high watermark"
        if v.high_watermark is None
        else high_watermark_clause(v.below_high_watermark, v.high_watermark)
    )
    lines = [f"  {name}: DIVERGED at offset {v.diverged_at} ({hw}); log end offsets {leos}"]
    for version in v.versions:
        b = version.batch
        sound = "" if b.crc_valid else " (fails its CRC check)"
        lines.append(
            f"      {b.span} epoch {b.leader_epoch} crc 0x{b.crc:08x}{sound}: replica(s) "
            f"{', '.join(map(str, version.replicas))}"
        )
    if v.lacking:
        lines.append(f"      not held by replica(s) {', '.join(map(str, v.lacking))}")
    lines.append(
        f"      next, with leader {v.leader} ({v.leader_source}), under {v.protocol.rules}:"
    )
    for follower, prediction in v.predictions.items():
        steps = prediction.describe()
        lines.append(wrap(f"replica {follower}: {steps[0]}", "        "))
        lines.extend(wrap(step, "          ") for step in steps[1:])
    return lines


def _render_log_dirs_apart(result: AuditResult) -> list[str]:
    """Offline log dirs, with the replicas they took away, and the dirs set aside
    (`-future`, `-delete`, `-stray`): none of them judged, each named."""
    lines: list[str] = []

    def who(broker: int | None) -> str:
        return f"[broker {broker}] " if broker is not None else "[broker unknown] "

    if result.offline:
        lines.append(
            f"offline log dir(s) ({len(result.offline)}): their partitions are judged on the "
            "replicas that remain"
        )
        lines.extend(wrap(f"{who(d.broker_id)}{d.path}: {d.offline}") for d in result.offline)
        offline = result.offline_by_broker()
        missing = [
            f"{v.topic}-{v.partition}: {', '.join(map(str, gone))}"
            for v in result.partitions
            if (gone := result.missing_replicas(v, offline))
        ]
        if missing:
            lines.append(wrap(f"replicas missing: {'; '.join(missing)}"))
    aside = [d for d in result.log_dirs if d.sidelined]
    if aside:
        count = sum(len(d.sidelined) for d in aside)
        lines.append(f"set aside, not judged ({count}): moves in flight and deletions")
        lines.extend(wrap(f"{who(d.broker_id)}{d.path}: {', '.join(d.sidelined)}") for d in aside)
    return lines
