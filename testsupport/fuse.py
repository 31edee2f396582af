"""Tests on real FUSE mounts (`fixtures.crashfs`): skipped where the machine has none, and
failed under CI=true, which must have them."""

from __future__ import annotations

from fixtures import crashfs
from fixtures.ci import require


def need_fuse() -> None:
    require(crashfs.unavailable())
