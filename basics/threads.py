"""Work on several clusters at once, in threads (explore's workers, a shrinking batch, the
Spark driver's jobs): started together, waited for in short joins."""

from __future__ import annotations

import threading


def run_threads(threads: list[threading.Thread]) -> None:
    """Start the threads and wait for them all, in short joins: Ctrl-C reaches this thread
    (a long join would hold it off), and the caller stops the threads."""
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        for thread in threads:
            thread.join(timeout=0.5)
