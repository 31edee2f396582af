"""reads.jsonl: every consumer's pass over a partition, written as the run reads and read back
typed, made only by a run that reads."""

from pathlib import Path

from runrecord.history import READ_UNCOMMITTED, ReadPass, ReadRecord
from runrecord.rundir import READS, RunDir
from suites.workload import History


def test_reads_are_written_at_the_first_and_read_back_typed(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    history = History(run.producer_writer(), run.reads_writer)
    assert not (tmp_path / READS).exists()
    one = ReadPass("t", 0, READ_UNCOMMITTED, 3, 1.0, 2.0, [ReadRecord(0, "k", None)])
    history.add_read(one)
    history.add_read(ReadPass("t", 1, READ_UNCOMMITTED, 0, 2.0, 3.0))
    reads, problems = run.reads()
    assert problems == [] and reads == history.reads and reads[0] == one
    assert reads[0].records[0] == ReadRecord(0, "k", None)  # a tombstone read stays None
