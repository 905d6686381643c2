"""An Arrow filesystem view of a task attempt (``WorkerAttempt.arrow_filesystem()``), so
Arrow's writers write through the attempt unchanged: ``pyarrow.dataset.write_dataset(
table, "", filesystem=fs, partitioning=...)`` and ``pq.write_table(table, "x.parquet",
filesystem=fs)``. Needs pyarrow.

The filesystem's root is the destination: a file written at ``a/b.parquet`` lands at
``DEST/a/b.parquet`` when the job commits. Where the attempt has a local directory (the
staging committer; the manifest committer on the local filesystem) it writes Arrow's own
local output streams below that directory. It is write-only: it knows the files this
attempt wrote (to answer the listings ``write_dataset`` makes) and nothing else;
directories need no creating; reads, moves and deletes raise ``NotImplementedError``.

``write_table`` writes one Arrow table of a task as the engine integrations do (Dask,
Ray): Parquet, CSV or JSON lines, flat or in Hive-style partition directories.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from aiocommit.errors import InvalidInput

if TYPE_CHECKING:
    from aiocommit.integrations.attempts import WorkerAttempt


def attempt_filesystem(attempt: WorkerAttempt) -> pafs.FileSystem:
    """The Arrow filesystem writing through ``attempt`` (see the module docstring): below
    the attempt's local directory when it has one, Arrow's own local filesystem."""
    if attempt.local_dir is not None:
        return pafs.PyFileSystem(LocalAttemptFileSystemHandler(attempt, attempt.local_dir))
    return pafs.PyFileSystem(AttemptFileSystemHandler(attempt))


class AttemptFileSystemHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """A ``FileSystemHandler`` over a ``WorkerAttempt``: output streams only."""

    def __init__(self, attempt: WorkerAttempt):
        self._attempt = attempt
        self._lock = threading.Lock()
        self._open: set[str] = set()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttemptFileSystemHandler) and other._attempt is self._attempt

    def __hash__(self) -> int:
        return id(self._attempt)

    def equals(self, other: Any) -> bool:
        return bool(self == other)

    def get_type_name(self) -> str:
        return "aiocommit-attempt"

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    def _known(self) -> set[str]:
        with self._lock:
            return set(self._attempt.written) | self._open

    def _info(self, path: str) -> pafs.FileInfo:
        path = path.strip("/")
        known = self._known()
        if path in known:
            return pafs.FileInfo(path, pafs.FileType.File, size=self._attempt.written.get(path))
        if path == "" or any(name.startswith(path + "/") for name in known):
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(path) for path in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        prefix = base + "/" if base else ""
        names = [name for name in self._known() if name.startswith(prefix)]
        if not selector.recursive:
            names = sorted({prefix + name[len(prefix) :].split("/")[0] for name in names})
        return [self._info(name) for name in names]

    def create_dir(self, path: str, recursive: bool) -> None:
        """Directories need no creating (they are the committed files' parents)."""

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        path = path.strip("/")
        with self._lock:
            self._open.add(path)
        file = self._attempt.open(path, "wb")
        return pa.PythonFile(_Finished(file, lambda: self._closed(path)), mode="w")

    def _closed(self, path: str) -> None:
        with self._lock:
            self._open.discard(path)

    def _unsupported(self, *args: Any) -> Any:
        raise NotImplementedError("an attempt's Arrow filesystem only writes new files")

    delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _unsupported
    move = copy_file = open_input_stream = open_input_file = open_append_stream = _unsupported


class LocalAttemptFileSystemHandler(AttemptFileSystemHandler):
    """The same over an attempt's local directory: Arrow's own local output streams (its
    writers' own speed), each at ``WorkerAttempt.placed_name`` (for the manifest
    committer, a file in a subdirectory is written at the directory's top; otherwise
    parent directories are made as needed). Listings answer with the paths the files
    land at."""

    def __init__(self, attempt: WorkerAttempt, local_dir: str):
        super().__init__(attempt)
        self._local = pafs.SubTreeFileSystem(local_dir, pafs.LocalFileSystem())

    def _placed_info(self, path: str, placed: dict[str, str]) -> pafs.FileInfo | None:
        """The info of ``path`` from the placed files (a file, or a directory above
        one), or None when no placed file is at or below it."""
        local = placed.get(path)
        if local is not None:
            return pafs.FileInfo(path, pafs.FileType.File, size=self._local_size(local))
        if any(name.startswith(path + "/") for name in placed):
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return None

    def _local_size(self, local: str) -> int | None:
        info = self._local.get_file_info(local)
        return None if info.type == pafs.FileType.NotFound else int(info.size)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        placed = self._attempt.placed()
        out = []
        for path in paths:
            path = path.strip("/")
            found = self._placed_info(path, placed) if path else None
            if found is None and path and self._attempt.shares_dir:
                found = pafs.FileInfo(path, pafs.FileType.NotFound)
            out.append(found if found is not None else self._local.get_file_info(path))
        return out

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        placed = self._attempt.placed()
        prefix = base + "/" if base else ""
        under: set[str] = set()
        for name in placed:
            if not name.startswith(prefix):
                continue
            parts = name[len(prefix) :].split("/")
            # the entry below ``base``, and with ``recursive`` every one further down
            for depth in range(1, len(parts) + 1 if selector.recursive else 2):
                under.add(prefix + "/".join(parts[:depth]))
        listed = [info for name in sorted(under) if (info := self._placed_info(name, placed))]
        if self._attempt.shares_dir:  # the other files there are other attempts'
            return listed
        if self._local.get_file_info(base).type == pafs.FileType.Directory:
            hidden = set(placed.values())
            local = pafs.FileSelector(base, recursive=selector.recursive)
            listed += [info for info in self._local.get_file_info(local) if info.path not in hidden]
        return listed

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        local = self._attempt.placed_name(path)
        parent = local.rpartition("/")[0]
        if parent:
            self._local.create_dir(parent, recursive=True)
        return self._local.open_output_stream(local, metadata=metadata)


class _Finished:
    """A file object that reports its close (after the file is finished)."""

    def __init__(self, file: Any, on_close: Any):
        self._file = file
        self._on_close = on_close
        self.closed = False

    def write(self, data: Any) -> int:
        return int(self._file.write(data))

    def tell(self) -> int:
        return int(self._file.tell())

    def flush(self) -> None:
        self._file.flush()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._file.close()
            finally:
                self._on_close()


#: the formats ``write_table`` writes, and their file extensions
FORMATS = {"parquet": "parquet", "csv": "csv", "json": "json"}


def check_format(format: str) -> str:
    """``format``, if ``write_table`` writes it; else ``InvalidInput``."""
    if format not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    return format


def partition_columns(partition_by: str | Sequence[str]) -> list[str]:
    """The partition columns of an engine's ``partition_by`` (one name or several)."""
    return [partition_by] if isinstance(partition_by, str) else list(partition_by)


def write_table(
    attempt: WorkerAttempt,
    table: pa.Table,
    *,
    format: str,
    partition_by: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
) -> None:
    """Write ``table`` through ``attempt`` as ``format`` files named
    ``part-TASK-JOB[-N].EXT``: one file, or with ``partition_by`` one per Hive-style
    partition directory (``col=value/``, the columns left out of the files, as
    ``write_dataset`` does). ``options``: the format writer's keyword arguments
    (``pq.write_table``'s, ``pyarrow.csv.WriteOptions``' fields; none for JSON)."""
    check_format(format)
    task = attempt.handle.task
    stem = f"part-{task:05d}" if isinstance(task, int) else f"part-{task}"
    stem = f"{stem}-{attempt.handle.job_id.removeprefix('job_')}"
    extension = FORMATS[format]
    options = dict(options or {})
    if partition_by:
        _write_partitioned(attempt, table, format, list(partition_by), options, stem, extension)
        return
    with attempt.open(f"{stem}.{extension}") as file:
        _write_one(file, table, format, options)


def _write_one(file: Any, table: pa.Table, format: str, options: dict[str, Any]) -> None:
    if format == "parquet":
        pq.write_table(table, file, **options)
    elif format == "csv":
        pacsv.write_csv(table, file, write_options=pacsv.WriteOptions(**options))
    else:
        for batch in table.to_batches():
            lines = "".join(json.dumps(row, default=str) + "\n" for row in batch.to_pylist())
            file.write(lines.encode())


def _write_partitioned(
    attempt: WorkerAttempt,
    table: pa.Table,
    format: str,
    partition_by: list[str],
    options: dict[str, Any],
    stem: str,
    extension: str,
) -> None:
    if format == "json":  # no Arrow JSON writer: split by hand
        keys = table.select(partition_by).to_pylist()
        groups: dict[tuple[Any, ...], list[int]] = {}
        for row, key in enumerate(keys):
            groups.setdefault(tuple(key.values()), []).append(row)
        data = table.drop_columns(partition_by)
        for values, rows in groups.items():
            directory = "/".join(
                f"{name}={_hive_value(value)}"
                for name, value in zip(partition_by, values, strict=True)
            )
            with attempt.open(f"{directory}/{stem}.{extension}") as file:
                _write_one(file, data.take(rows), format, {})
        return
    file_options: Any
    if format == "parquet":
        file_options = pads.ParquetFileFormat().make_write_options(**options)
    else:
        file_options = pads.CsvFileFormat().make_write_options(**options)
    pads.write_dataset(
        table,
        "",
        filesystem=attempt.arrow_filesystem(),
        format=format,
        file_options=file_options,
        partitioning=partition_by,
        partitioning_flavor="hive",
        basename_template=f"{stem}-{{i}}.{extension}",
        existing_data_behavior="overwrite_or_ignore",
    )


def _hive_value(value: Any) -> str:
    return (
        "__HIVE_DEFAULT_PARTITION__" if value is None else urllib.parse.quote(str(value), safe="")
    )
