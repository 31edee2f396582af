"""Holding off Python's cyclic garbage collector while many acyclic objects are built."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside: building hundreds of thousands of objects (batches,
    collected rows) would otherwise set off repeated passes over every object alive,
    which nearly doubles the cost of a partition scan."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
