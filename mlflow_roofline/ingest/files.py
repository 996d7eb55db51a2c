"""Reading the file to import, with bounded work whatever the path names.

Only a regular file is read: a device (``/dev/zero``), a FIFO, a socket or a directory
is refused before a byte is read (the file is opened without waiting for a FIFO's
writer, then checked). A file larger than :data:`MAX_IMPORT_BYTES` is refused, and
reading stops there even if the file grows meanwhile.

A CSV is parsed as it streams (the standard library's reader, UTF-8, an optional
byte-order mark), one record at a time: its first record names the columns, each
name once. A header that is a single name holding ``;``, a tab or ``|`` is a file
separated by another delimiter and is refused saying so. A Parquet file is read
whole (under the same cap) by pandas: its footer must be read first.

Problems of the whole file are one :class:`ConfigError` naming ``file``. The mapping
file is read under the same rules (:func:`read_small_text`, at most
:data:`MAX_MAPPING_BYTES`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from mlflow_roofline.core.errors import ConfigError

MAX_IMPORT_BYTES = 256 * 1024 * 1024
"""Largest file import reads, in bytes (256 MiB: about a million rows of a wide table)."""
MAX_MAPPING_BYTES = 1024 * 1024
"""Largest mapping file import reads, in bytes (1 MiB: thousands of ``rows`` entries)."""
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq")
OTHER_DELIMITERS: tuple[str, ...] = (";", "\t", "|")
"""Delimiters a single-column header betrays (the file is not comma-separated)."""


@dataclasses.dataclass(frozen=True)
class Cells:
    """A file as read: its column names and, per record, where it is and its non-empty cells.

    Attributes:
        header: the column names, in file order, each once.
        rows: ``(where, column -> value)``: ``line N`` of a CSV (the header is line 1) or
            ``row N`` of a Parquet file; CSV values are stripped strings, Parquet values as
            pandas read them; empty cells are left out.
        problems: ``where -> (field, rule)`` for records that cannot be read as a row
            (more cells than the header names).
    """

    header: tuple[str, ...]
    rows: list[tuple[str, dict[str, object]]]
    problems: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)


def read_cells(path: Path, max_bytes: int = MAX_IMPORT_BYTES) -> Cells:
    """The file's header and records (see the module docstring).

    Raises:
        ConfigError: naming ``file``: not a regular file, too large, unreadable, not
            UTF-8, a duplicated or missing header, another delimiter.
    """
    with _open_regular(path, max_bytes) as handle:
        if path.suffix.lower() in PARQUET_SUFFIXES:
            return _parquet_cells(path, handle)
        return _csv_cells(path, handle)


def read_small_text(path: Path, field: str, max_bytes: int = MAX_MAPPING_BYTES) -> str:
    """The UTF-8 text of a small regular file (a mapping), under the rules of :func:`read_cells`.

    Raises:
        ConfigError: naming ``field``: not a regular file, over ``max_bytes``, unreadable, not UTF-8.
    """
    with _open_regular(path, max_bytes, field) as handle:
        try:
            return handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(field, f"cannot read {path}: {exc}") from None


def _open_regular(path: Path, max_bytes: int, field: str = "file") -> io.BufferedReader:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO's open must not wait for a writer
    except OSError as exc:
        raise ConfigError(field, f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(field, f"{path} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise ConfigError(
                field, f"{path} holds {info.st_size} bytes, more than the {max_bytes} import reads: split it"
            )
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_Capped(io.FileIO(fd, "rb", closefd=True), path, max_bytes, field))


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


class _Capped(io.RawIOBase):
    """A raw reader that refuses to go past ``limit`` bytes (a file that grows while it is read)."""

    def __init__(self, raw: io.FileIO, path: Path, limit: int, field: str) -> None:
        self._raw, self._path, self._limit, self._left, self._field = raw, path, limit, limit, field

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = self._raw.readinto(buffer) or 0
        self._left -= count
        if self._left < 0:
            raise ConfigError(self._field, f"{self._path} grew past the {self._limit} bytes import reads while read")
        return count

    def close(self) -> None:
        self._raw.close()
        super().close()


def _csv_cells(path: Path, handle: io.BufferedReader) -> Cells:
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    reader = csv.reader(text)
    try:
        header = _header(path, reader)
        rows: list[tuple[str, dict[str, object]]] = []
        problems: dict[str, tuple[str, str]] = {}
        for record in _records(reader):
            where = f"line {reader.line_num}"
            if len(record) > len(header):
                problems[where] = ("file", f"has {len(record)} cells, but the header names {len(header)} columns")
            cells = {name: value.strip() for name, value in zip(header, record) if value.strip()}
            rows.append((where, dict(cells)))
    except (csv.Error, UnicodeDecodeError, OSError) as exc:
        raise ConfigError("file", f"cannot read {path} (line {reader.line_num + 1}): {exc}") from None
    return Cells(header, rows, problems)


def _records(reader: Iterator[list[str]]) -> Iterator[list[str]]:
    """The reader's records, blank lines left out."""
    for record in reader:
        if any(cell.strip() for cell in record):
            yield record


def _header(path: Path, reader: Iterator[list[str]]) -> tuple[str, ...]:
    first = next(_records(reader), None)
    if first is None:
        raise ConfigError("file", f"{path} is empty: expected a header line naming the columns")
    names = tuple(name.strip() or f"Unnamed: {i}" for i, name in enumerate(first))
    if len(names) == 1:
        delimiter = next((d for d in OTHER_DELIMITERS if d in names[0]), None)
        if delimiter is not None:
            raise ConfigError(
                "file",
                f"{path} has a single column {names[0][:80]!r}: it looks separated by {delimiter!r}, "
                "but import reads comma-separated CSV: save it with commas",
            )
    _check_unique(path, names)
    return names


def _check_unique(path: Path, names: tuple[str, ...]) -> None:
    first_at: dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        if name in first_at:
            raise ConfigError(
                "file",
                f"{path} names the column {name!r} twice (columns {first_at[name]} and {i}): name each column once",
            )
        first_at[name] = i


def _parquet_cells(path: Path, handle: io.BufferedReader) -> Cells:
    import pandas as pd

    try:
        frame = pd.read_parquet(io.BytesIO(handle.read()))  # Parquet seeks to its footer: read it whole (capped)
    except (OSError, ValueError, ImportError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError("file", f"cannot read {path}: {why}") from None
    names = tuple(str(c) for c in frame.columns)
    _check_unique(path, names)
    rows = [
        (f"row {i + 1}", {name: value for name, value in zip(names, record) if not _empty(value)})
        for i, record in enumerate(frame.itertuples(index=False, name=None))
    ]
    return Cells(names, rows)


def _empty(value: object) -> bool:
    """An empty cell: None, NaN or a blank string."""
    if value is None:
        return True
    if isinstance(value, float):
        return value != value  # NaN
    return isinstance(value, str) and not value.strip()
