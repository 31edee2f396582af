"""Log dirs anywhere a filesystem URI reaches: local paths and ``file://`` are read in
place; any other URI (``s3://``, ``s3a://``, ``hdfs://``, whatever `pyarrow.fs` knows) is
read through `pyarrow.fs`, one directory at a time, into a local scratch copy that the
readers read as they read any log dir, then relabelled with the URI and deleted.

- Planning (`staged_listing`) copies a log dir's small files and gives its large ones
  (segments and indexes) as sparse placeholders of their true size: the plan needs their
  names and sizes, not their bytes.
- Reading (`staged_dir`) copies one partition dir whole, so what a reader holds on local
  disk at a time is one replica.

Credentials and endpoints come from the filesystem's own settings (for S3: AWS_* variables
such as AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from checkers.errors import LogReadError, UnreadableFile

T = TypeVar("T")
# What planning needs only the size of: the rest of a log dir is small and copied.
LARGE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
# pyarrow knows S3 as s3://; Hadoop's connector names the same store s3a:// or s3n://.
_ALIASES = {"s3a": "s3", "s3n": "s3"}


def is_remote(location: str | os.PathLike[str]) -> bool:
    text = str(location)
    return "://" in text and not text.startswith("file://")


def local_path(location: str | os.PathLike[str]) -> str:
    """A local path for a local path or a ``file://`` URI."""
    text = str(location)
    return text[len("file://") :] if text.startswith("file://") else text


def filesystem(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) of a URI."""
    import pyarrow.fs as pafs

    scheme, rest = uri.split("://", 1)
    return pafs.FileSystem.from_uri(f"{_ALIASES.get(scheme, scheme)}://{rest}")


def join(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}"


class RemoteUnreadable(UnreadableFile):
    """A URI that its filesystem could not list or read."""


def _listing(uri: str) -> tuple[Any, str, list[Any]]:
    import pyarrow.fs as pafs

    fs, root = filesystem(uri)
    info = fs.get_file_info(root)
    if info.type != pafs.FileType.Directory:
        raise FileNotFoundError("not a directory" if info.type else "does not exist")
    return fs, root, fs.get_file_info(pafs.FileSelector(root, recursive=True))


def _copy(fs: Any, source: str, target: Path) -> None:
    with fs.open_input_stream(source) as stream:
        copy_sparse(stream, target)


READ_BYTES = 8 << 20  # per read: an object store answers each read with a request
HOLE_BYTES = 64 << 10  # a run of zeros this long, so aligned, is left a hole


def copy_sparse(stream: Any, target: Path) -> None:
    """Copy a stream to a local file, leaving aligned blocks of zeros as holes: Kafka
    preallocates its index files (10 MB each by default, `segment.index.bytes`), sparse on
    the broker's disk, and a log dir holds dozens of them."""
    zeros = bytes(HOLE_BYTES)
    size = 0
    with open(target, "wb") as out:
        while chunk := stream.read(READ_BYTES):
            view = memoryview(chunk)
            for start in range(0, len(view), HOLE_BYTES):
                block = view[start : start + HOLE_BYTES]
                if block == zeros[: len(block)]:
                    out.seek(len(block), os.SEEK_CUR)
                else:
                    out.write(block)
            size += len(chunk)
        out.truncate(size)


def _stage(uri: str, into: Path, *, large: bool) -> None:
    import pyarrow.fs as pafs

    fs, root, found = _listing(uri)
    into.mkdir(parents=True, exist_ok=True)
    for info in sorted(found, key=lambda i: i.path):
        target = into / info.path[len(root) :].lstrip("/")
        if info.type == pafs.FileType.Directory:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if not large and info.path.endswith(LARGE_SUFFIXES):
            with open(target, "wb") as out:
                out.truncate(info.size)  # sparse: the size without the bytes
        else:
            _copy(fs, info.path, target)


@contextlib.contextmanager
def staged_listing(uri: str) -> Iterator[Path]:
    """A local stand-in for a remote log dir, good for listing it (see the module doc)."""
    with _scratch() as scratch:
        _stage(uri, scratch / "d", large=False)
        yield scratch / "d"


@contextlib.contextmanager
def staged_dir(uri: str) -> Iterator[Path]:
    """A local copy of a remote directory (a partition dir), deleted afterwards."""
    with _scratch() as scratch:
        _stage(uri, scratch / "d", large=True)
        yield scratch / "d"


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    # Spark gives each executor its own local dirs; elsewhere the system's temporary dir.
    base = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
    folder = Path(tempfile.mkdtemp(prefix="logfork-stage-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def relabel(value: T, old: str, new: str) -> T:
    """`value` with every path under `old` (in strings, errors and nested dataclasses)
    named under `new` instead. Batches hold a segment's name, never a path: skipped."""
    if isinstance(value, str):
        return value.replace(old, new)  # type: ignore[return-value]
    if isinstance(value, LogReadError):
        error = copy.copy(value)
        error.path, error.reason = relabel(error.path, old, new), relabel(error.reason, old, new)
        error.args = (error.path, error.offset, error.reason)
        return error  # type: ignore[return-value]
    if isinstance(value, list):
        return [relabel(v, old, new) for v in value]  # type: ignore[return-value]
    if isinstance(value, tuple):
        return tuple(relabel(v, old, new) for v in value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {relabel(k, old, new): relabel(v, old, new) for k, v in value.items()}  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: relabel(getattr(value, f.name), old, new)
            for f in dataclasses.fields(value)
            if f.init and f.name != "batches"
        }
        return dataclasses.replace(value, **changes)
    return value


def unreadable(uri: str, exc: BaseException) -> RemoteUnreadable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return RemoteUnreadable(uri, None, f"could not be read through its filesystem: {reason}")
