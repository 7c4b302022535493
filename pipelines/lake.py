"""The event lake as the pipeline sees it: sealed files to list, and a way to read some.

Two kinds, one interface:

* ``LocalLake``: a folder (the embedded default). Listed with ``pathlib``; DuckDB reads the
  files itself with ``read_parquet``. pyarrow is not imported.
* ``ObjectStoreLake``: S3-compatible storage, every host's objects under one prefix. Listed
  with pyarrow's filesystem; DuckDB scans a ``pyarrow.dataset`` over exactly the objects
  asked for (streamed, columns pushed down), so DuckDB needs no extension of its own.

A file's ``relative_path`` (``<type>/date=<day>/<name>.parquet``, its object name under the
lake's root) is its key in the ledger of loaded files: each is loaded once, whichever host
wrote it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from api.objectstore import filesystem_for, is_object_store
from api.settings import S3Options

if TYPE_CHECKING:
    import pyarrow.fs as pafs

_scan_names = itertools.count(1)


@dataclass(frozen=True)
class LakeFile:
    """One sealed Parquet file of the event lake."""

    relative_path: str
    absolute_path: str
    size_bytes: int
    event_date: str | None
    modified_ns: int = 0


@dataclass(frozen=True)
class Scan:
    """Some lake files as a DuckDB relation: ``SELECT ... FROM {relation}`` with ``params``."""

    relation: str
    params: list[Any]
    row_counts: dict[str, int] = field(default_factory=dict)
    """Rows of each file, by ``absolute_path``."""


class Lake(Protocol):
    def sealed_files(self, event_type: str) -> list[LakeFile]:
        """Every sealed ``<event_type>/date=*/*.parquet`` file, sorted by path."""

    def scan(
        self, con: duckdb.DuckDBPyConnection, event_type: str, files: list[LakeFile]
    ) -> Any:  # a context manager of Scan
        """``files`` readable by ``con`` for the duration of the ``with`` block."""


def _is_sealed_name(name: str) -> bool:
    """Files being written start with ``.`` (and end with ``.tmp``); ``_`` is not data."""
    return name.endswith(".parquet") and not name.startswith((".", "_"))


class LocalLake:
    """A lake in a local folder."""

    def __init__(self, root: Path):
        self.root = root

    def sealed_files(self, event_type: str) -> list[LakeFile]:
        files = []
        for path in sorted((self.root / event_type).glob("date=*/*.parquet")):
            if path.name.startswith("."):
                continue
            date = path.parent.name.removeprefix("date=")
            stat = path.stat()
            files.append(
                LakeFile(
                    relative_path=path.relative_to(self.root).as_posix(),
                    absolute_path=str(path),
                    size_bytes=stat.st_size,
                    event_date=date or None,
                    modified_ns=stat.st_mtime_ns,
                )
            )
        return files

    @contextmanager
    def scan(
        self, con: duckdb.DuckDBPyConnection, event_type: str, files: list[LakeFile]
    ) -> Iterator[Scan]:
        paths = [f.absolute_path for f in files]
        rows = con.execute(
            "SELECT file_name, num_rows FROM parquet_file_metadata(?)", [paths]
        ).fetchall()
        yield Scan(
            "read_parquet(?, hive_partitioning = false, union_by_name = true)",
            [paths],
            {name: int(count) for name, count in rows},
        )


class ObjectStoreLake:
    """A lake in object storage (``s3://bucket/prefix``)."""

    def __init__(self, filesystem: pafs.FileSystem, base: str):
        self.filesystem = filesystem
        self.base = base.rstrip("/")

    def sealed_files(self, event_type: str) -> list[LakeFile]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(
            f"{self.base}/{event_type}", recursive=True, allow_not_found=True
        )
        files = []
        for info in self.filesystem.get_file_info(selector):
            relative = info.path[len(self.base) + 1 :]
            parts = relative.split("/")
            if (
                info.type != pafs.FileType.File
                or len(parts) != 3
                or not parts[1].startswith("date=")
                or not _is_sealed_name(parts[2])
            ):
                continue
            files.append(
                LakeFile(
                    relative_path=relative,
                    absolute_path=info.path,
                    size_bytes=int(info.size or 0),
                    event_date=parts[1].removeprefix("date=") or None,
                    modified_ns=int(info.mtime_ns or 0),
                )
            )
        return sorted(files, key=lambda f: f.relative_path)

    @contextmanager
    def scan(
        self, con: duckdb.DuckDBPyConnection, event_type: str, files: list[LakeFile]
    ) -> Iterator[Scan]:
        import pyarrow.dataset as pads

        from api.eventlog.schema import SCHEMAS

        dataset = pads.dataset(
            [f.absolute_path for f in files],
            schema=SCHEMAS[event_type],  # the newest: older files' missing columns read NULL
            format="parquet",
            filesystem=self.filesystem,
        )
        counts = {fragment.path: fragment.metadata.num_rows for fragment in dataset.get_fragments()}
        name = f"lake_scan_{next(_scan_names)}"
        _finish_pending_result(con)
        con.register(name, dataset)
        try:
            yield Scan(name, [], counts)
        finally:
            _finish_pending_result(con)
            con.unregister(name)


def _finish_pending_result(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB refuses ``register``/``unregister`` while a result is half fetched (a
    ``fetchone``); a finished statement of our own ends it."""
    con.execute("SELECT 1").fetchall()


def open_lake(events_location: str, s3: S3Options | None = None) -> Lake:
    """The lake at ``events_location``: a folder, ``file://`` URI or ``s3://`` URI."""
    if is_object_store(events_location):
        filesystem, base = filesystem_for(events_location, s3)
        return ObjectStoreLake(filesystem, base)
    if events_location.startswith("file://"):
        return LocalLake(Path(events_location.removeprefix("file://")))
    if "://" in events_location:
        raise ValueError(f"events location {events_location!r}: use a folder or s3://")
    return LocalLake(Path(events_location))
