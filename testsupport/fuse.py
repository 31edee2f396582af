"""Tests on real FUSE mounts (`fixtures.crashfs`): skipped where the machine has none, and
failed under CI=true, which must have them."""

from __future__ import annotations

import os

import pytest

from fixtures import crashfs

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need_fuse() -> None:
    reason = crashfs.unavailable()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)
