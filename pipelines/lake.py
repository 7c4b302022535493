"""The event lake as the pipeline sees it: sealed files to list, and a way to read some.

Two kinds, one interface:

* ``LocalLake``: a folder (the embedded default). Listed with ``pathlib``; DuckDB reads the
  files itself with ``read_parquet``. pyarrow is not imported.
* ``ObjectStoreLake``: S3-compatible storage, every host's objects under one prefix. Listed
  with pyarrow's filesystem; DuckDB scans a ``pyarrow.dataset`` over exactly the objects
  asked for (streamed, columns pushed down), so DuckDB needs no extension of its own.

A file's ``relative_path`` (``event_type=<type>/date=<day>/<name>.parquet``, its object name
under the lake's root) is its key in the ledger of loaded files: each is loaded once, whichever
host wrote it. Files that older versions wrote as ``<type>/date=<day>/<name>.parquet`` are
listed under the same key (``api.eventlog.layout``) and moved into the current layout by
``relocate_legacy`` before each load.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from api.eventlog.layout import ledger_path, legacy_type_dir, type_dir
from api.eventlog.segments import fsync_dir
from api.infra.objectstore import filesystem_for, is_object_store
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
        """Every sealed file of ``event_type`` (``date=*/*.parquet`` under the type's folder,
        in either layout), sorted by ``relative_path``; one entry per ``relative_path``, the
        current layout's copy when both exist."""

    def relocate_legacy(self, event_type: str) -> int:
        """Move the type's files of the old layout into the current one; how many moved.
        Safe to interrupt and to repeat: a file keeps its ledger key in both places."""

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
        found: dict[str, LakeFile] = {}
        for folder in (legacy_type_dir(event_type), type_dir(event_type)):  # the current wins
            for path in (self.root / folder).glob("date=*/*.parquet"):
                if not _is_sealed_name(path.name):
                    continue
                relative = ledger_path(path.relative_to(self.root).as_posix())
                stat = path.stat()
                found[relative] = LakeFile(
                    relative_path=relative,
                    absolute_path=str(path),
                    size_bytes=stat.st_size,
                    event_date=path.parent.name.removeprefix("date=") or None,
                    modified_ns=stat.st_mtime_ns,
                )
        return [found[relative] for relative in sorted(found)]

    def relocate_legacy(self, event_type: str) -> int:
        legacy = self.root / legacy_type_dir(event_type)
        moved = 0
        touched: set[Path] = set()  # folders whose entries changed: fsynced once each
        for path in sorted(legacy.glob("date=*/*.parquet")):
            if not _is_sealed_name(path.name):
                continue
            target = self.root / ledger_path(path.relative_to(self.root).as_posix())
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():  # sealed again after an upgrade: the same bytes
                path.unlink()
            else:
                os.rename(path, target)  # atomic: the file is whole in one place or the other
            touched |= {path.parent, target.parent, target.parent.parent, self.root}
            moved += 1
        for folder in sorted(touched, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(folder)
        for folder in sorted(legacy.glob("date=*")) + [legacy]:
            with contextlib.suppress(OSError):  # not empty (an old writer's file), or gone
                folder.rmdir()
        return moved

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
        found: dict[str, LakeFile] = {}
        for folder in (legacy_type_dir(event_type), type_dir(event_type)):  # the current wins
            for info, relative, date in self._sealed_objects(folder):
                found[ledger_path(relative)] = LakeFile(
                    relative_path=ledger_path(relative),
                    absolute_path=info.path,
                    size_bytes=int(info.size or 0),
                    event_date=date or None,
                    modified_ns=int(info.mtime_ns or 0),
                )
        return [found[relative] for relative in sorted(found)]

    def relocate_legacy(self, event_type: str) -> int:
        """A server-side copy, then the old object's deletion: between the two the file is
        in both places under one ledger key, which ``sealed_files`` lists once."""
        moved = 0
        for info, relative, _ in self._sealed_objects(legacy_type_dir(event_type)):
            self.filesystem.copy_file(info.path, f"{self.base}/{ledger_path(relative)}")
            self.filesystem.delete_file(info.path)
            moved += 1
        return moved

    def _sealed_objects(self, folder: str) -> Iterator[tuple[pafs.FileInfo, str, str]]:
        """``(info, path relative to the base, date)`` of each sealed object under ``folder``."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(f"{self.base}/{folder}", recursive=True, allow_not_found=True)
        for info in self.filesystem.get_file_info(selector):
            relative = info.path[len(self.base) + 1 :]
            parts = relative.split("/")
            if (
                info.type == pafs.FileType.File
                and len(parts) == 3
                and parts[1].startswith("date=")
                and _is_sealed_name(parts[2])
            ):
                yield info, relative, parts[1].removeprefix("date=")

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
