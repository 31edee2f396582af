"""Where the checkout is: the folder holding pyproject.toml and the product packages, for a
subprocess that must run from it (Spark's shards and report tasks) and for files the project
ships beside its code. One place, so that moving a module never moves the root it reckons."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
