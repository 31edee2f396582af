"""The symptom, checked at a script's end with Kafka's own tools (lib.sh's check_*), after
the heal the replay also made: paused brokers resumed, stopped ones started and unfenced.
Each check that finds its symptom writes one line to $WORK/symptoms, and the script then
exits 1:

- fenced-leader: the metadata log, as DumpLogSegments decodes it, elects a broker that it
  has itself fenced at that offset (KAFKA-19522);
- hanging-transaction: a partition still reports a transaction open
  (`kafka-transactions.sh describe-producers`) a minute after the heal (KAFKA-20716,
  KAFKA-20734);
- a leader epoch lost in a swap between log dirs (KAFKA-20961), checked as the move ends;
- diverged: two replicas hold different batches (DumpLogSegments' base and last offsets,
  leader epoch and crc) at an offset below the high watermark the brokers checkpointed
  (KAFKA-18723).
"""

from __future__ import annotations

# How long a transaction may stay open on its partition after the heal: the coordinator
# sends its markers as soon as the commit is logged, so a minute is many retries.
MARKER_SECONDS = 60


def symptom(transactions: bool, brokers: dict[int, str], partitions: tuple[int, ...]) -> str:
    lines = [
        "# The heal, as the replay's: paused brokers resumed, links healed, stopped ones started.",
        'for n in "${!PID[@]}"; do kill -CONT "${PID[$n]}" 2>/dev/null || true; done; PAUSED=" "',
        "heal_all",
    ]
    for b, name in sorted(brokers.items()):
        lines += [
            f"if stopped {name}; then start_node {name}; fi",
            f'wait_until "broker {b} unfenced" 180 is_unfenced {b}',
        ]
    lines += ["", "# The symptom, through Kafka's own tools; what they printed stays in $WORK."]
    lines.append("check_fenced_leaders")
    if transactions:
        lines += [f"check_closed {p} {MARKER_SECONDS}" for p in partitions]
    for name in sorted(brokers.values()):
        lines.append(f"dump_partition {name} 0")
    lines += ["check_replicas_agree 0", "end_with_symptoms"]
    return "\n".join(lines) + "\n"
