"""Where the tables go: a local folder, or a folder under any filesystem URI
(`checkers.storage`), written through `pyarrow.fs` alike.

A local file is written aside and renamed into place, so that a reader never sees half of
it; an object store writes an object whole or not at all, so a remote file is written in
place.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from checkers.storage import copy_sparse, filesystem, is_remote, join, local_path

Location = Path | str  # a local path, or a URI (kept a string: Path would mangle "//")


def child(location: Location, name: str) -> Location:
    return join(location, name) if isinstance(location, str) else location / name


def as_location(text: str | os.PathLike[str]) -> Location:
    return str(text) if is_remote(text) else Path(local_path(text))


def resolve(location: Location) -> tuple[Any, str]:
    if isinstance(location, str) and is_remote(location):
        return filesystem(location)
    return pafs.LocalFileSystem(), str(Path(location).resolve())


def fresh(folder: Location) -> None:
    """An empty folder (whatever was there is removed)."""
    fs, path = resolve(folder)
    remove(folder)
    fs.create_dir(path, recursive=True)


def remove(folder: Location) -> None:
    fs, path = resolve(folder)
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def exists(folder: Location) -> bool:
    fs, path = resolve(folder)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def has_parquet(folder: Location) -> bool:
    fs, path = resolve(folder)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return False
    return any(i.path.endswith(".parquet") for i in fs.get_file_info(pafs.FileSelector(path)))


def write_parquet(folder: Location, name: str, table: pa.Table) -> None:
    """`folder/name` holding `table`, never seen half written."""
    fs, path = resolve(folder)
    if isinstance(fs, pafs.LocalFileSystem):
        partial = f"{path}/.{name}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp"
        pq.write_table(table, partial)
        os.replace(partial, f"{path}/{name}")
    else:
        pq.write_table(table, f"{path}/{name}", filesystem=fs)


def read_parquet(folder: Location) -> pa.Table:
    fs, path = resolve(folder)
    return pq.read_table(path, filesystem=fs)


def put_tree(local: Path, folder: Location, *, skip: tuple[str, ...] = ()) -> int:
    """Copy the files under `local` to `folder` (a path or URI), keeping their relative
    paths, except those under the top-level entries named in `skip`. Returns the count."""
    fs, root = resolve(folder)
    count = 0
    for path in sorted(local.rglob("*")):
        rel = path.relative_to(local)
        if rel.parts[0] in skip or not path.is_file() or path.is_symlink():
            continue
        target = f"{root}/{rel.as_posix()}"
        fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        with open(path, "rb") as source:
            if isinstance(fs, pafs.LocalFileSystem):
                copy_sparse(source, Path(target))
            else:
                with fs.open_output_stream(target) as out:
                    shutil.copyfileobj(source, out, 8 << 20)
        count += 1
    return count


def get_tree(folder: Location, local: Path) -> int:
    """Copy the files under `folder` (a path or URI) into `local`. Returns the count."""
    fs, root = resolve(folder)
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        return 0
    count = 0
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        target = local / info.path[len(root) :].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_input_stream(info.path) as source:
            copy_sparse(source, target)
        count += 1
    return count
