"""Dataclasses to and from JSON, checked against their type hints.

Every file of a run directory is one of the dataclasses in this package. Reading checks the
file's `schema` version first, then every field against its type, and names the file and
the field at fault; a reader never guesses between spellings of a field.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import types
import typing
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, Union

from basics.errors import LogforkError

SCHEMA = 1  # the version every file of a run directory is written with

T = TypeVar("T")


class RunRecordError(LogforkError):
    """A run directory's file that this logfork cannot read: unknown schema, bad JSON, or a
    field of the wrong type."""


def to_json(obj: Any) -> Any:
    """Plain JSON values of a dataclass (recursively); enums by value."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value if isinstance(obj.value, str) else obj.name
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    return obj


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(cls: type[T], data: Any, where: str) -> T:
    """A `cls` from parsed JSON; `where` names the file (and field) in errors."""
    return _convert(cls, data, where)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, where)
            except RunRecordError as exc:
                errors.append(str(exc))
        raise RunRecordError(errors[0] if errors else f"{where}: unexpected {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise RunRecordError(f"{where}: expected an object, found {_kind(value)}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            if f.name in value:
                kwargs[f.name] = _convert(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RunRecordError(f"{where}: the field {f.name!r} is missing")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, Enum):
        if isinstance(value, str) and value in tp.__members__:
            return tp[value]
        try:
            return tp(value)
        except (ValueError, TypeError):
            names = ", ".join(m.value if isinstance(m.value, str) else m.name for m in tp)
            raise RunRecordError(f"{where}: {value!r} is not one of {names}") from None
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise RunRecordError(f"{where}: expected a list, found {_kind(value)}")
        args = typing.get_args(tp)
        item = args[0] if args else Any
        items = [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise RunRecordError(f"{where}: expected an object, found {_kind(value)}")
        key_type, value_type = typing.get_args(tp) or (Any, Any)
        return {
            _key(key_type, k, where): _convert(value_type, v, f"{where}.{k}")
            for k, v in value.items()
        }
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise RunRecordError(f"{where}: expected a number, found {_kind(value)}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise RunRecordError(f"{where}: expected an integer, found {_kind(value)}")
    if tp in (str, bool):
        if type(value) is tp:
            return value
        raise RunRecordError(f"{where}: expected {tp.__name__}, found {_kind(value)}")
    raise RunRecordError(f"{where}: cannot read a {tp!r}")


def _key(tp: Any, key: str, where: str) -> Any:
    if tp is int:
        try:
            return int(key)
        except ValueError:
            raise RunRecordError(f"{where}: key {key!r} is not an integer") from None
    return key


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:80]


# --------------------------------------------------------------------------------------
# Files


def check_schema(data: Any, path: Path) -> None:
    if not isinstance(data, dict):
        raise RunRecordError(f"{path}: not a JSON object, so not a logfork run record")
    version = data.get("schema")
    if version != SCHEMA:
        said = "no schema version" if version is None else f"schema {version!r}"
        raise RunRecordError(
            f"{path} was written with {said}; this logfork reads schema {SCHEMA}. Re-run the "
            "scenario, or read it with the logfork release that wrote it."
        )


def write_text(path: Path, text: str) -> Path:
    """Write a file atomically: readers never see half a file, and a failed write leaves
    the old one (the one atomic writer of every file logfork writes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def dumps_record(record: Any) -> str:
    """A record's file text, with the schema version first."""
    doc = {"schema": SCHEMA, **to_json(record)}
    return json.dumps(doc, indent=1, default=str) + "\n"


def write_json(path: Path, record: Any) -> Path:
    """Write a record atomically (`write_text`), with the schema version first."""
    return write_text(path, dumps_record(record))


def read_json(cls: type[T], path: Path) -> T:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunRecordError(f"{path}: cannot read: {exc}") from None
    except ValueError as exc:
        raise RunRecordError(f"{path}: not JSON ({exc})") from None
    check_schema(data, path)
    body = {k: v for k, v in data.items() if k != "schema"}
    return from_json(cls, body, str(path))


class JsonLines:
    """A JSON-lines file of one record type: a header line with the schema version, then one
    record per line, appended as they happen (a run killed mid-write loses one line at most).
    Appends from several threads are serialised."""

    def __init__(self, path: Path, kind: str) -> None:
        import threading

        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema": SCHEMA, "kind": kind}) + "\n")

    def append(self, record: Any) -> None:
        line = json.dumps(to_json(record), default=str) + "\n"
        with self._lock, self.path.open("a") as f:
            f.write(line)


def read_lines(cls: type[T], path: Path) -> tuple[list[T], list[str]]:
    """The records of a JSON-lines file, and problems with lines that were skipped (a run
    killed mid-write leaves a partial last line; the rest is still good)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise RunRecordError(f"{path}: cannot read: {exc}") from None
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    check_schema(header, path)
    records: list[T] = []
    bad: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            records.append(from_json(cls, json.loads(line), f"{path}:{number}"))
        except (ValueError, RunRecordError) as exc:
            bad.append(str(exc))
    problems = []
    if bad:
        problems.append(f"{path.name}: {len(bad)} line(s) skipped, first: {bad[0]}")
    return records, problems
