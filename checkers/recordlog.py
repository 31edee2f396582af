"""A replica's records, decoded from its segments on demand: what the checks that look
inside batches read (the history checker, the comparison of compacted partitions)."""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterator
from pathlib import Path

from checkers.contents import read_records
from checkers.errors import LogReadError
from checkers.lineage import Lineage, cleaned_end
from checkers.records import Batch, Record


class ReplicaLog:
    """One replica's records, decoded from its segments on demand, each batch once."""

    def __init__(self, lineage: Lineage) -> None:
        self.lineage = lineage
        self.name = f"replica {lineage.broker_id}"
        self.log_start = lineage.log_start_offset or 0
        self.log_end = lineage.leo
        self.cleaned_below = cleaned_end(lineage)
        self._maps: dict[str, mmap.mmap | None] = {}
        self._batches: dict[tuple[str, int], dict[int, Record] | str] = {}

    def at(self, offset: int) -> Record | str | None:
        batch = self.lineage.batch_containing(offset)
        if batch is None or self.lineage.path is None:
            return None
        found = self._decoded(batch.segment, batch.position)
        return found if isinstance(found, str) else found.get(offset)

    def records(self) -> Iterator[Record]:
        for _batch, record in self.with_batches():
            yield record

    def with_batches(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[Batch, Record]]:
        """Each record of the batches that hold offsets in [start, end), with its batch;
        a batch that does not decode yields nothing (`batch_problem` says why)."""
        first = self.lineage.index_from(start)
        for batch in self.lineage.batches[first:]:
            if end is not None and batch.base_offset >= end:
                break
            found = self.batch(batch)
            if not isinstance(found, str):
                for record in found.values():
                    yield batch, record

    def batch(self, batch: Batch) -> dict[int, Record] | str:
        """A batch's records by offset, or why they could not be decoded."""
        return self._decoded(batch.segment, batch.position)

    def _decoded(self, segment: str, position: int) -> dict[int, Record] | str:
        key = (segment, position)
        if key not in self._batches:
            self._batches[key] = self._decode(Path(self.lineage.path or "") / segment, position)
        return self._batches[key]

    def _decode(self, path: Path, position: int) -> dict[int, Record] | str:
        name = str(path)
        if name not in self._maps:
            try:
                with open(path, "rb") as fh:
                    self._maps[name] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                self._maps[name] = None
                return f"cannot read {name}: {exc}"
        buf = self._maps[name]
        if buf is None:
            return f"cannot read {name}"
        try:
            return {r.offset: r for r in read_records(buf, position, path=name)}
        except LogReadError as exc:
            return str(exc)

    def close(self) -> None:
        for buf in self._maps.values():
            if buf is not None:
                with contextlib.suppress(BufferError):
                    buf.close()
        self._maps.clear()
        self._batches.clear()
