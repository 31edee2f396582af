"""``logfork audit DIR [DIR ...] [--json FILE] [--topic T]``: judge every partition found in
copies of broker log dirs.

Each DIR is one broker's log dir (its broker id comes from meta.properties: ``broker.id`` in
ZooKeeper mode, ``node.id`` in KRaft), or a logfork run directory: one holding ``run.json``
and ``nodes/<node>/data/``, each a broker log dir. Inputs are only ever opened read-only.

Exit codes: 0 every partition consistent, 1 some partition diverged, 2 some input could not
be read at all (this wins over 1, as with grep: the audit is incomplete).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import LogReadError, UnreadableFile
from checkers.lineage import Lineage, LogDir, read_log_dir
from checkers.metadata_log import METADATA_TOPICS, MetadataLog
from checkers.model import Protocol
from checkers.verdict import DIVERGED, PartitionVerdict, judge_partition

RUN_MARKER = "run.json"
EXIT_CONSISTENT, EXIT_DIVERGED, EXIT_UNREADABLE = 0, 1, 2


@dataclass
class AuditError:
    """A bad input, with the broker whose log dir it came from (when known)."""

    error: LogReadError
    broker_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.error.to_dict(), "broker": self.broker_id}


@dataclass
class AuditResult:
    partitions: list[PartitionVerdict] = field(default_factory=list)
    errors: list[AuditError] = field(default_factory=list)
    log_dirs: list[LogDir] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # inputs that could not be read at all
    metadata: MetadataLog | None = None
    kraft_state: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return EXIT_UNREADABLE
        if any(v.status == DIVERGED for v in self.partitions):
            return EXIT_DIVERGED
        return EXIT_CONSISTENT

    def to_dict(self) -> dict[str, Any]:
        partitions = []
        for v in self.partitions:
            entry = v.to_dict()
            state = self.kraft_state.get((v.topic, v.partition))
            if state is not None:
                entry["kraft"] = state
            partitions.append(entry)
        diverged = sum(v.status == DIVERGED for v in self.partitions)
        return {
            "partitions": partitions,
            "errors": [e.to_dict() for e in self.errors],
            "torn_tails": [
                {**lin.torn_tail.to_dict(), "broker": lin.broker_id}
                for log_dir in self.log_dirs
                for lin in log_dir.lineages.values()
                if lin.torn_tail is not None
            ],
            "inputs": [
                {
                    "path": d.path,
                    "broker_id": d.broker_id,
                    "kraft": d.kraft,
                    "readable": d.readable,
                    "partitions": len(d.lineages),
                    "sidelined": d.sidelined,
                }
                for d in self.log_dirs
            ],
            "unreadable": self.unreadable,
            "metadata_log": None
            if self.metadata is None
            else {
                "path": self.metadata.path,
                "end_offset": self.metadata.end_offset,
                "snapshot": self.metadata.snapshot,
                "partitions": len(self.metadata.partitions()),
                "leader_changes": len(self.metadata.leader_changes),
            },
            "summary": {
                "partitions": len(self.partitions),
                "consistent": len(self.partitions) - diverged,
                "diverged": diverged,
                "errors": len(self.errors),
            },
            "exit_code": self.exit_code,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def summary(self) -> str:
        return _render(self)


def _zookeeper_nodes(run_dir: Path) -> set[str]:
    """Names of the run's ZooKeeper nodes, from cluster.json (absent: none known)."""
    try:
        nodes = json.loads((run_dir / "cluster.json").read_text()).get("nodes", {})
    except (OSError, ValueError, AttributeError):
        return set()
    return {
        name
        for name, node in nodes.items()
        if isinstance(node, dict) and node.get("role") == "zookeeper"
    }


def expand_inputs(dirs: Iterable[Path | str]) -> tuple[list[Path], list[AuditError]]:
    """Broker log dirs named by the inputs (run directories expand to their nodes)."""
    out: list[Path] = []
    errors: list[AuditError] = []
    for raw in dirs:
        path = Path(raw)
        if (path / RUN_MARKER).is_file():
            nodes = path / "nodes"
            # A ZooKeeper node's data dir holds ZooKeeper's files, not a broker log dir.
            skip = _zookeeper_nodes(path)
            try:
                found = sorted(
                    n / "data"
                    for n in nodes.iterdir()
                    if (n / "data").is_dir() and n.name not in skip
                )
            except OSError as exc:
                errors.append(
                    AuditError(
                        UnreadableFile(
                            str(nodes), None, f"run directory has no readable nodes/ folder: {exc}"
                        ),
                        None,
                    )
                )
                continue
            if not found:
                errors.append(
                    AuditError(
                        UnreadableFile(
                            str(nodes), None, "run directory has no nodes/<node>/data folders"
                        ),
                        None,
                    )
                )
            out.extend(found)
        else:
            out.append(path)
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique, errors


def audit(
    dirs: Iterable[Path | str], topic: str | None = None, protocol: Protocol = Protocol.KIP_279
) -> AuditResult:
    """Read every log dir, judge every partition (or those of `topic`). Never raises on bad
    input: what cannot be read is in `errors` and `unreadable`."""
    result = AuditResult()
    paths, errors = expand_inputs(dirs)
    result.errors.extend(errors)
    result.unreadable.extend(e.error.path for e in errors)
    replicas: dict[tuple[str, int], dict[int, Lineage]] = defaultdict(dict)
    for path in paths:
        log_dir = read_log_dir(path, topic=topic)
        result.log_dirs.append(log_dir)
        result.errors.extend(AuditError(e, log_dir.broker_id) for e in log_dir.errors)
        if not log_dir.readable or log_dir.broker_id is None:
            result.unreadable.append(log_dir.path)
            continue
        for tp, lineage in sorted(log_dir.lineages.items()):
            result.errors.extend(AuditError(e, log_dir.broker_id) for e in lineage.errors)
            held = replicas[tp]
            if log_dir.broker_id in held:
                result.errors.append(
                    AuditError(
                        UnreadableFile(
                            lineage.path or log_dir.path,
                            None,
                            f"broker {log_dir.broker_id} holds {tp[0]}-{tp[1]} in two log dirs "
                            f"(also {held[log_dir.broker_id].path}); this copy is left out",
                        ),
                        log_dir.broker_id,
                    )
                )
                continue
            held[log_dir.broker_id] = lineage
        if log_dir.metadata_log is not None:
            result.errors.extend(
                AuditError(e, log_dir.broker_id) for e in log_dir.metadata_log.errors
            )
            # The longest copy of the metadata log tells the current leaders.
            best = result.metadata
            if best is None or log_dir.metadata_log.end_offset > best.end_offset:
                result.metadata = log_dir.metadata_log
    quorum_leader = _quorum_leader(result.log_dirs)
    for tp in sorted(replicas):
        leader = None
        if result.metadata is not None:
            event = result.metadata.current(*tp)
            if event is not None:
                result.kraft_state[tp] = event.to_dict()
                leader = event.leader if event.leader >= 0 else None
        if tp[0] in METADATA_TOPICS:
            leader = quorum_leader
        result.partitions.append(
            judge_partition(list(replicas[tp].values()), leader=leader, protocol=protocol)
        )
    return result


def _quorum_leader(log_dirs: Sequence[LogDir]) -> int | None:
    states = [d.quorum_state for d in log_dirs if d.quorum_state is not None]
    if not states:
        return None
    best = max(states, key=lambda s: s.leader_epoch)
    return best.leader_id if best.leader_id >= 0 else None


# --------------------------------------------------------------------------------------
# Rendering


def _wrap(text: str, indent: str = "  ") -> str:
    # Paths stay whole so they can be copied from the output.
    return textwrap.fill(
        text,
        width=100,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _render(result: AuditResult) -> str:
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
            lines.append(
                f"  {name}: consistent (replicas {', '.join(map(str, v.replicas))}; "
                f"log end offsets {leos})"
            )
        else:
            lines.extend(_render_diverged(name, v, leos))
            state = result.kraft_state.get((v.topic, v.partition))
            if state is not None:
                lines.append(
                    _wrap(
                        f"metadata log: leader {state['leader']}, leader epoch "
                        f"{state['leader_epoch']}, ISR {state['isr']}, "
                        f"{state['leader_recovery_state']} (offset {state['offset']})",
                        "      ",
                    )
                )
        lines.extend(_wrap(note, "      note: ") for note in v.notes)
    if result.errors:
        lines.append(f"bad input ({len(result.errors)}):")
        for e in result.errors:
            who = f"[broker {e.broker_id}] " if e.broker_id is not None else ""
            lines.append(_wrap(f"{who}{e.error}"))
    diverged = sum(v.status == DIVERGED for v in result.partitions)
    verdict = {
        EXIT_CONSISTENT: "all consistent",
        EXIT_DIVERGED: "divergence found",
        EXIT_UNREADABLE: "some input could not be read at all",
    }[result.exit_code]
    lines.append(
        f"result: {len(result.partitions) - diverged} consistent, {diverged} diverged, "
        f"{len(result.errors)} bad input(s): {verdict} (exit {result.exit_code})"
    )
    return "\n".join(lines)


def _render_diverged(name: str, v: PartitionVerdict, leos: str) -> list[str]:
    hw = (
        "unknown high watermark"
        if v.high_watermark is None
        else (
            f"below the high watermark {v.high_watermark}: committed data differs"
            if v.below_high_watermark
            else f"at or above the high watermark {v.high_watermark}"
        )
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
        lines.append(_wrap(f"replica {follower}: {steps[0]}", "        "))
        lines.extend(_wrap(step, "          ") for step in steps[1:])
    return lines


# --------------------------------------------------------------------------------------
# Command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="a broker log dir, or a logfork run directory (holding run.json)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="also write the verdicts as JSON to FILE ('-' for stdout only)",
    )
    parser.add_argument("--topic", metavar="T", help="audit only the partitions of topic T")
    parser.add_argument(
        "--protocol",
        choices=[p.value for p in Protocol],
        default=Protocol.KIP_279.value,
        help="protocol the prediction of what happens next follows (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        protocol = Protocol(getattr(args, "protocol", None) or Protocol.KIP_279.value)
        result = audit(args.dirs, topic=getattr(args, "topic", None), protocol=protocol)
    except Exception as exc:  # noqa: BLE001 - end in a paragraph, never a traceback
        print(
            _wrap(f"logfork audit could not complete: {type(exc).__name__}: {exc}", ""),
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    json_path = getattr(args, "json", None)
    if json_path == "-":
        print(result.to_json())
        return result.exit_code
    print(result.summary())
    if json_path:
        try:
            Path(json_path).write_text(result.to_json() + "\n")
        except OSError as exc:
            print(_wrap(f"could not write {json_path}: {exc}", ""), file=sys.stderr)
            return EXIT_UNREADABLE
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="logfork audit", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
