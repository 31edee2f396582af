"""`logfork report` and `logfork audit` on either engine, called as the `logfork` command
calls them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from checkers import audit as checkers_audit
from checkers.audit.render import render
from reports.cli import add_report_arguments, run_report
from reports.tests.conftest import KIP_RUN, MASTER, RUNS
from suites.audit_cli import add_arguments as add_audit_arguments
from suites.audit_cli import main as run_audit
from testsupport import craft
from testsupport.craft import PartitionSpec

LOG = [(0, 9, 1), (10, 19, 1), (20, 29, 2), (30, 39, 2), (40, 49, 3)]


def report_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    return parser.parse_args(list(argv))


def audit_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_audit_arguments(parser)
    return parser.parse_args(list(argv))


def divergent_log_dirs(root: Path) -> list[Path]:
    parts = {("t", p): PartitionSpec(LOG, high_watermark=50) for p in range(4)}
    other = dict(parts)
    other[("t", 2)] = PartitionSpec([*LOG[:3], (30, 34, 4)], high_watermark=30)
    return [
        craft.write_log_dir(root / f"broker-{b}", b, p)
        for b, p in ((1, parts), (2, other), (3, parts))
    ]


def test_report_command_writes_reports_and_index(
    runs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site"
    code = run_report(
        report_args(str(runs_dir), "--out", str(out), "--spark-master", MASTER, "--no-tables")
    )
    assert code == 0
    stdout = capsys.readouterr().out
    assert f"{KIP_RUN}: t-0 diverged at 11 -> {out / KIP_RUN}.html" in stdout
    assert (out / "index.html").is_file() and len(list(out.glob("*.html"))) == len(RUNS) + 1


def test_report_command_on_a_missing_dir_says_so_in_one_paragraph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_report(report_args(str(tmp_path / "nope"), "--out", str(tmp_path / "o")))
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "does not exist" in err and "no run directory" in err and "Traceback" not in err


def test_audit_html_on_crafted_divergent_log_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    html, js, tables = tmp_path / "audit.html", tmp_path / "audit.json", tmp_path / "tables"
    code = run_audit(
        audit_args(
            *dirs,
            "--html",
            str(html),
            "--json",
            str(js),
            "--tables",
            str(tables),
            "--spark-master",
            MASTER,
        )
    )
    expected = checkers_audit.audit(dirs)
    assert code == expected.exit_code == 1
    assert json.loads(js.read_text()) == expected.to_dict()
    assert capsys.readouterr().out.strip() == render(expected)
    text = html.read_text()
    assert "DIVERGED" in text and 'data-diverged-at="30"' in text
    assert 'Replicas parted at offset <strong class="diverged-at">30</strong>' in text
    assert (tables / "verdicts.parquet").is_dir()


def test_audit_json_on_stdout_stays_pure_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    code = run_audit(
        audit_args(
            *dirs, "--json", "-", "--html", str(tmp_path / "a.html"), "--spark-master", MASTER
        )
    )
    captured = capsys.readouterr()
    assert code == 1 and json.loads(captured.out)["exit_code"] == 1
    assert "report:" in captured.err


def test_audit_without_html_is_the_checkers_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    assert run_audit(audit_args(*dirs)) == 1
    assert capsys.readouterr().out.strip() == render(checkers_audit.audit(dirs))


@pytest.mark.parametrize("inputs", ["logs", "run"])
def test_both_engines_print_the_same_json(
    inputs: str, runs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if inputs == "logs":
        dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    else:
        dirs = [str(runs_dir / KIP_RUN)]
    printed = {}
    for engine in ("local", "spark"):
        extra = ["--spark-master", MASTER] if engine == "spark" else []
        code = run_audit(audit_args(*dirs, "--json", "-", "--engine", engine, *extra))
        printed[engine] = (code, json.loads(capsys.readouterr().out))
    assert printed["local"] == printed["spark"]


def test_engine_choice_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    code = run_audit(audit_args(*dirs, "--engine", "local", "--tables", str(tmp_path / "t")))
    assert code == 2 and "--tables needs the Spark engine" in capsys.readouterr().err
    code = run_audit(audit_args(*dirs, "--engine", "local", "--spark-master", MASTER))
    assert code == 2 and "--spark-master needs the Spark engine" in capsys.readouterr().err


def test_audit_html_with_unreadable_input_exits_2(tmp_path: Path) -> None:
    dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    html = tmp_path / "a.html"
    code = run_audit(
        audit_args(*dirs, str(tmp_path / "missing"), "--html", str(html), "--spark-master", MASTER)
    )
    assert code == 2 and "could not be read at all" in html.read_text()


def test_audit_html_to_an_unwritable_place_is_one_paragraph(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = [str(d) for d in divergent_log_dirs(tmp_path / "logs")]
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = run_audit(audit_args(*dirs, "--html", str(blocker / "a.html"), "--spark-master", MASTER))
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "could not write" in err and "Traceback" not in err
