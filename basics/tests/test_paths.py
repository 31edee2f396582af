"""The checkout's root, which Spark's shards and report tasks run from."""

from basics.paths import PROJECT_ROOT


def test_the_root_holds_the_project_and_the_modules_run_from_it() -> None:
    assert (PROJECT_ROOT / "pyproject.toml").is_file()
    # `python -m suites.explore.engine.shard` from the root: from anywhere else, a folder of
    # the project on sys.path shadows the standard library (suites/bisect.py for bisect).
    assert (PROJECT_ROOT / "suites" / "explore" / "engine" / "shard.py").is_file()
    assert not (PROJECT_ROOT / "bisect.py").exists()
