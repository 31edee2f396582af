"""Arrow schemas of the pipeline's rows and tables (the codecs that fill them:
`reports.rows`).

A scan task turns one replica (a `checkers.lineage.Lineage`) into one row of
`REPLICA_SCHEMA`; the grouped judge turns rows back into equal `Lineage` objects and hands
back one `VERDICT_SCHEMA` row per partition; the rest are the tables written beside a run.
"""

from __future__ import annotations

import pyarrow as pa

from checkers.records import BATCH_FIELDS

BATCH_TYPES: dict[str, pa.DataType] = {
    "base_offset": pa.int64(),
    "last_offset": pa.int64(),
    "leader_epoch": pa.int32(),
    "crc": pa.int64(),
    "crc_valid": pa.bool_(),
    "size": pa.int64(),
    "magic": pa.int32(),
    "record_count": pa.int32(),
    "compression": pa.string(),
    "is_control": pa.bool_(),
    "is_transactional": pa.bool_(),
    "producer_id": pa.int64(),
    "producer_epoch": pa.int32(),
    "base_sequence": pa.int32(),
    "max_timestamp": pa.int64(),
    "segment": pa.string(),
    "position": pa.int64(),
}
assert tuple(BATCH_TYPES) == BATCH_FIELDS, "batch columns must follow checkers.records.Batch"

EPOCH_STRUCT = pa.struct([("epoch", pa.int32()), ("start_offset", pa.int64())])
ERROR_STRUCT = pa.struct(
    [("kind", pa.string()), ("path", pa.string()), ("offset", pa.int64()), ("reason", pa.string())]
)
ABORTED_STRUCT = pa.struct(
    [
        ("producer_id", pa.int64()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("last_stable_offset", pa.int64()),
    ]
)
TORN_STRUCT = pa.struct(
    [
        ("path", pa.string()),
        ("position", pa.int64()),
        ("length", pa.int64()),
        ("reason", pa.string()),
    ]
)

KEY_FIELDS = [
    ("run", pa.string()),
    ("log_dir", pa.int32()),
    ("child", pa.int32()),
    ("broker", pa.int32()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("judged", pa.bool_()),
    ("metadata", pa.bool_()),
]
# A read task (`checkers.audit.plan.ReadTask`) with the run it belongs to.
TASK_SCHEMA = pa.schema(
    [
        *KEY_FIELDS,
        ("bucket", pa.int32()),  # the group the judge sees this replica in
        ("path", pa.string()),
        ("high_watermark", pa.int64()),
        ("log_start_checkpoint", pa.int64()),
        ("recovery_point", pa.int64()),
        ("cleaned_to", pa.int64()),
        ("cleaner_unknown", pa.bool_()),
        ("size", pa.int64()),
        ("tables", pa.string()),  # where the run's tables go; null: none written
    ]
)
TASK_ONLY = ("run", "bucket", "tables")  # the fields that are not the ReadTask's

# Everything a Lineage holds; `replica` is one struct so that pandas hands it to the judge
# as a dict of Python values (a nullable int column would arrive as float64).
LINEAGE_STRUCT = pa.struct(
    [
        ("path", pa.string()),
        ("topic_id", pa.string()),
        ("log_start_offset", pa.int64()),
        ("high_watermark", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("recovery_point", pa.int64()),
        ("checkpointed", pa.list_(EPOCH_STRUCT)),  # null: no leader-epoch-checkpoint file
        ("derived", pa.list_(EPOCH_STRUCT)),
        ("torn_tail", TORN_STRUCT),
        ("transient_files", pa.list_(pa.string())),
        ("errors", pa.list_(ERROR_STRUCT)),
        ("batch_count", pa.int64()),
        ("cleaned_to", pa.int64()),
        ("cleaner_unknown", pa.bool_()),
        ("aborted", pa.list_(ABORTED_STRUCT)),
        ("remote_from", pa.int64()),
    ]
)
REPLICA_SCHEMA = pa.schema(
    [
        *KEY_FIELDS,
        ("bucket", pa.int32()),
        ("replica", LINEAGE_STRUCT),
        ("batches", pa.binary()),  # pickled list of batch row tuples
    ]
)
METADATA_TASK_SCHEMA = pa.schema(
    [("run", pa.string()), ("log_dir", pa.int32()), ("path", pa.string())]
)
METADATA_SCHEMA = pa.schema(
    [("run", pa.string()), ("log_dir", pa.int32()), ("metadata_log", pa.string())]
)
BATCHES_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("broker", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("judged", pa.bool_()),
        ("seq", pa.int32()),
        *[(name, BATCH_TYPES[name]) for name in BATCH_FIELDS],
    ]
)

# Acknowledged sends, as the judge receives them next to the replicas.
PRODUCER_FIELDS = [
    ("topic", pa.string()),
    ("key", pa.string()),
    ("value", pa.string()),
    ("acks", pa.string()),
    ("sent", pa.float64()),
    ("acked", pa.float64()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("error", pa.string()),
    ("broker", pa.int32()),
]

# A replica row's columns the judge groups, in order.
REPLICA_COLUMNS = (
    "topic",
    "partition",
    "log_dir",
    "child",
    "broker",
    "judged",
    "metadata",
    "replica",
    "batches",
)

# What a judged bucket hands back per partition (`reports.judge.PartitionRow`).
VERDICT_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("status", pa.string()),
        ("report_json", pa.string()),
        ("replicas_json", pa.string()),  # every replica read, judged or not
        ("verdict_pickle", pa.binary()),  # the compact PartitionVerdict
    ]
)

# The `verdicts` table written beside a run.
VERDICTS_TABLE_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("status", pa.string()),
        ("diverged_at", pa.int64()),
        ("below_high_watermark", pa.bool_()),
        ("high_watermark", pa.int64()),
        ("leader", pa.int32()),
        ("replicas", pa.list_(pa.int32())),
        ("protocol", pa.string()),
        ("acked", pa.int64()),
        ("lost", pa.int64()),
        ("verdict_json", pa.string()),
        ("report_json", pa.string()),
    ]
)

LINEAGE_TABLE_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("log_dir", pa.string()),
        ("broker", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("judged", pa.bool_()),
        ("path", pa.string()),
        ("topic_id", pa.string()),
        ("batches", pa.int64()),
        ("log_start_offset", pa.int64()),
        ("high_watermark", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("recovery_point", pa.int64()),
        ("torn_tail", pa.string()),
        ("errors", pa.int32()),
    ]
)

EPOCHS_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("broker", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("source", pa.string()),  # "checkpoint" (leader-epoch-checkpoint) or "batches"
        ("epoch", pa.int32()),
        ("start_offset", pa.int64()),
    ]
)

ERRORS_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("broker", pa.int32()),
        ("kind", pa.string()),
        ("path", pa.string()),
        ("offset", pa.int64()),
        ("reason", pa.string()),
    ]
)

TIMELINE_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("seq", pa.int32()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("wall", pa.float64()),
        ("mono", pa.float64()),
        ("node", pa.string()),
        ("broker", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader", pa.int32()),
        ("epoch", pa.int32()),
        ("fields_json", pa.string()),
    ]
)

STATES_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("seq", pa.int32()),
        ("wall", pa.float64()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("isr", pa.list_(pa.int32())),
        ("recovery_state", pa.string()),
        ("version", pa.int64()),
        ("source", pa.string()),
        ("elr", pa.list_(pa.int32())),
        ("last_known_elr", pa.list_(pa.int32())),
    ]
)

RUNS_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("path", pa.string()),
        ("scenario", pa.string()),
        ("title", pa.string()),
        ("kip", pa.string()),
        ("jira", pa.string()),
        ("fixed_in", pa.string()),
        ("release", pa.string()),
        ("mode", pa.string()),
        ("outcome", pa.string()),
        ("expected", pa.string()),
        ("as_expected", pa.bool_()),
        ("summary", pa.string()),
        ("started", pa.float64()),
        ("finished", pa.float64()),
        ("protocol", pa.string()),
        ("run_json", pa.string()),
        ("verdict_json", pa.string()),
        ("cluster_json", pa.string()),
    ]
)
