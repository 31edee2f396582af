"""Mutated segments, metadata logs and checkpoints never crash, hang or blow up the reader
or the audit: they only produce typed errors (or torn tails).

Seeds are crafted files covering every format and codec, and real files that Kafka brokers
wrote (checkers/tests/data/real: 0.10.2.2 and 1.1.1 message sets, 3.9.2 record batches in
every codec, 3.9.2 and 4.3.1 metadata logs, checkpoints). LOGFORK_FUZZ_EXAMPLES sets how
many mutations each test tries (default a few hundred, to keep the unit suite quick; the
hardening run uses 100,000). A hang would stall the run rather than fail it: no test here
fails on wall-clock time. Progress is checked instead: every batch the scan yields starts
after the previous one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.audit import audit
from checkers.audit.render import render
from checkers.checkpoints import (
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
)
from checkers.contents import read_records
from checkers.errors import LogReadError
from checkers.metadata_log import decode_metadata_log
from checkers.records import ScanState, make_batch
from checkers.walk import iter_batch_rows
from testsupport import craft

EXAMPLES = int(os.environ.get("LOGFORK_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# A mutated length field must not make the reader allocate what the field claims: memory
# stays bounded by the input, with room for decompression of small inputs.
MAX_PEAK_BYTES = 64 * 1024 * 1024
REAL = Path(__file__).parent / "data" / "real"


def base_segment() -> bytes:
    specs = [
        (0, 4, 1),
        (5, 9, 1, "", "gzip"),
        (10, 14, 2, "", "snappy"),
        (15, 19, 2, "", "lz4"),
        (20, 24, 3, "", "zstd"),
    ]
    legacy = (
        craft.encode_legacy_message(25, b"plain", magic=0)
        + craft.encode_legacy_wrapper([26, 27, 28], "lz4", magic=0)
        + craft.encode_legacy_wrapper([29, 30], "snappy", magic=1)
        + craft.encode_legacy_wrapper([31, 32], "gzip", magic=1)
    )
    control = craft.encode_control_batch(33, 0, b"\x00\x00\x00\x00\x00\x01", producer_id=3)
    return craft.encode_batches(specs) + legacy + control


def metadata_segment() -> bytes:
    t = craft.kafka_uuid("t")
    log = craft.MetadataLogBuilder()
    log.leader_change(1, 1, [1, 2, 3])
    log.records(
        1,
        craft.encode_topic_record("t", t),
        craft.encode_partition_record(
            t,
            0,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            leader_epoch=0,
            version=2,
            eligible_leader_replicas=[2],
        ),
    )
    log.records(
        2,
        craft.encode_partition_change_record(
            t,
            0,
            leader=2,
            isr=[2],
            leader_recovery_state=1,
            version=1,
            directories=["AAAAAAAAAAAAAAAAAAAAAQ"],
        ),
        compression="lz4",
    )
    return bytes(log.data)


BASE = base_segment()
METADATA = metadata_segment()
SEGMENT_SEEDS = [BASE] + [p.read_bytes() for p in sorted(REAL.glob("kafka-*-v*.log"))]
METADATA_SEEDS = [METADATA] + [p.read_bytes() for p in sorted(REAL.glob("*-cluster-metadata.log"))]


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "overwrite", "zero", "length"]))
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        if not buf:
            break
        if kind == "flip":
            buf[pos] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del buf[pos:]
        elif kind == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=64))
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=64))
            buf[pos : pos + len(chunk)] = chunk
        elif kind == "zero":
            end = min(len(buf), pos + draw(st.integers(1, 200)))
            buf[pos:end] = bytes(end - pos)
        else:  # rewrite a length or offset field with an extreme value
            value = draw(st.sampled_from([0, 1, 13, 48, 2**31 - 1, -1, -(2**31)]))
            buf[pos : pos + 4] = value.to_bytes(4, "big", signed=True)
    return bytes(buf)


def check_errors(errors: list) -> None:
    assert all(isinstance(e, LogReadError) for e in errors), errors
    for e in errors:
        assert str(e).startswith(e.path)


def seeded(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.sampled_from(seeds).flatmap(mutated)


@FUZZ
@given(seeded(SEGMENT_SEEDS), st.booleans())
def test_mutated_segment_scan(data: bytes, final: bool) -> None:
    tracemalloc.start()
    state = ScanState()
    rows = list(
        iter_batch_rows(
            data,
            path="/fuzz/t-0/00000000000000000000.log",
            segment="00000000000000000000.log",
            state=state,
            final=final,
        )
    )
    check_errors(state.errors)
    position = 0
    for row in rows:
        batch = make_batch(*row)
        assert batch.position >= position and batch.size >= 26
        position = batch.position + batch.size
        with contextlib.suppress(LogReadError):  # typed errors are the allowed outcome
            read_records(data, batch.position, path="/fuzz")
    assert position <= len(data)
    if state.torn_tail is not None:
        assert state.torn_tail.position + state.torn_tail.length == len(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < MAX_PEAK_BYTES


@FUZZ
@given(seeded(METADATA_SEEDS))
def test_mutated_metadata_log(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mdir = Path(tmp) / "__cluster_metadata-0"
        mdir.mkdir()
        (mdir / craft.segment_name(0)).write_bytes(data)
        log = decode_metadata_log(mdir)
    check_errors(log.errors)
    for event in log.events:
        assert event.partition is not None and event.topic_id


CHECKPOINT_TEXTS = {
    "leader-epoch-checkpoint": (
        craft.checkpoint_text([(0, 0), (3, 120)]),
        read_leader_epoch_checkpoint,
    ),
    "replication-offset-checkpoint": (
        craft.checkpoint_text([("t", 0, 5), ("u", 3, 9)]),
        read_offset_checkpoint,
    ),
    "meta.properties": ("version=1\nnode.id=3\ncluster.id=abc\n", read_meta_properties),
    "partition.metadata": (
        "version: 0\ntopic_id: " + craft.kafka_uuid("t"),
        read_partition_metadata,
    ),
    "quorum-state": (
        '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1}],"data_version":0}',
        read_quorum_state,
    ),
}


def side_file_seeds(name: str) -> list[bytes]:
    real = REAL / f"kafka-3.9.2-{name}"
    return [CHECKPOINT_TEXTS[name][0].encode()] + ([real.read_bytes()] if real.is_file() else [])


@FUZZ
@given(st.sampled_from(sorted(CHECKPOINT_TEXTS)), st.data())
def test_mutated_side_files(name: str, data: st.DataObject) -> None:
    reader = CHECKPOINT_TEXTS[name][1]
    raw = data.draw(seeded(side_file_seeds(name)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(raw)
        try:
            reader(path)
        except LogReadError as exc:
            assert exc.path == str(path)


LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 2)]


@settings(
    max_examples=max(EXAMPLES // 6, 20),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    mutated(craft.encode_batches(LOG)), mutated(craft.checkpoint_text([(1, 0), (2, 20)]).encode())
)
def test_audit_on_mutated_log_dirs(segment: bytes, epochs: bytes) -> None:
    tmp = Path(tempfile.mkdtemp())
    try:
        dirs = [craft.write_log_dir(tmp / f"b{b}", b, {("t", 0): LOG}) for b in (1, 2)]
        (dirs[1] / "t-0" / craft.segment_name(0)).write_bytes(segment)
        (dirs[1] / "t-0" / "leader-epoch-checkpoint").write_bytes(epochs)
        result = audit(dirs)
        assert result.exit_code in (0, 1)
        check_errors([e.error for e in result.errors])
        result.to_json()
        render(result)
    finally:
        shutil.rmtree(tmp)
