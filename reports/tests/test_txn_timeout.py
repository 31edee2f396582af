"""How old an open transaction must be to hang: given, recorded by the runs audited, or
Kafka's maximum; and the time it is aged against."""

from checkers.transactions import DEFAULT_TXN_TIMEOUT_MS
from reports.sources import txn_reference, txn_timeout
from runrecord.run import RunInfo
from runrecord.rundir import RunDir


def run_dir(path, timeout):
    path.mkdir()
    RunDir(path).write_run(RunInfo("s", "t", "4.4.0", "kraft", 0.0, "h", txn_timeout_ms=timeout))
    return path


def test_given_wins(tmp_path):
    assert txn_timeout([run_dir(tmp_path / "r", 30_000)], 5) == 5


def test_the_longest_recorded(tmp_path):
    runs = [run_dir(tmp_path / "a", 30_000), run_dir(tmp_path / "b", 60_000)]
    assert txn_timeout([*runs, run_dir(tmp_path / "c", None)]) == 60_000


def test_kafkas_maximum_for_plain_log_dirs_and_unreadable_runs(tmp_path):
    plain = tmp_path / "broker-1"
    plain.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    assert txn_timeout([plain, broken, "s3://bucket/dir"]) == DEFAULT_TXN_TIMEOUT_MS


def test_aged_against_the_latest_time_a_run_judged_its_transactions(tmp_path):
    runs = [run_dir(tmp_path / "a", 60_000), run_dir(tmp_path / "b", 60_000)]
    assert txn_reference(runs) is None  # each partition's newest write, then
    for path, judged in zip(runs, (1_000, 2_000), strict=True):
        info = RunDir(path).run_info()
        info.txns_judged_ms = judged
        RunDir(path).write_run(info)
    assert txn_reference([*runs, tmp_path]) == 2_000
