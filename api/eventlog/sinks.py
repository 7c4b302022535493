"""Sinks: where a sealed table is published, whole or not at all, under a deterministic name.

A sink takes one table of one segment's events of one type and UTC date and makes it a file
(or object) named after the segment. Publishing the same table under the same names again
replaces it with identical bytes, which is what makes re-sealing after a crash safe.

* ``ParquetSink``: a folder (the embedded default) or any pyarrow filesystem with a rename.
  Written under a hidden temporary name in the final directory, fsynced, renamed.
* ``ObjectStoreSink``: S3-compatible storage. One PUT of the whole file, which the store makes
  visible atomically, so there is no temporary object (an S3 "rename" is a copy and a delete).
  Object names carry the host's id (``api.infra.host_identity``): hosts sharing a bucket never
  collide, and a segment re-sealed by another process of the same host gets the same name.
"""

from __future__ import annotations

import os
from typing import Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from api.eventlog.layout import partition_dir, type_dir
from api.eventlog.segments import fsync_dir
from api.infra.objectstore import LakeUnavailable, filesystem_for

ROW_GROUP_ROWS = 128 * 1024
"""One row group for a normal segment; very busy segments get several of this size."""
COMPRESSION = "zstd"


class Sink(Protocol):
    def publish(self, table: pa.Table, event_type: str, date: str, stem: str) -> str:
        """Publish ``table`` as the file of segment ``stem`` for (type, date); its path."""


def parquet_bytes(table: pa.Table, row_group_rows: int = ROW_GROUP_ROWS) -> pa.Buffer:
    """The Parquet file of ``table`` with the lake's fixed writer options (deterministic)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer, compression=COMPRESSION, row_group_size=row_group_rows)
    return buffer.getvalue()


class ParquetSink:
    """Publishes tables as whole files under an events location with a rename (local disk)."""

    def __init__(self, location: str, *, row_group_rows: int = ROW_GROUP_ROWS):
        self.filesystem, self.base = filesystem_for(location)
        self.row_group_rows = row_group_rows
        self._local = isinstance(self.filesystem, pafs.LocalFileSystem)

    def publish(self, table: pa.Table, event_type: str, date: str, stem: str) -> str:
        """Write ``table`` to its final name atomically; durable on return for local disks."""
        directory = f"{self.base}/{partition_dir(event_type, date)}"
        final = f"{directory}/{stem}.parquet"
        temporary = f"{directory}/.{stem}.parquet.tmp"
        self.filesystem.create_dir(directory, recursive=True)
        pq.write_table(
            table,
            temporary,
            filesystem=self.filesystem,
            compression=COMPRESSION,
            row_group_size=self.row_group_rows,
        )
        if self._local:
            _fsync_file(temporary)
        self.filesystem.move(temporary, final)
        if self._local:
            # The rename and any new partition directories must outlive a machine crash
            # before the segment that could rebuild them is deleted.
            for path in (directory, f"{self.base}/{type_dir(event_type)}", self.base):
                fsync_dir(path)
        return final


class ObjectStoreSink:
    """Publishes tables as objects, one PUT each, named ``<host id>-<segment>.parquet``."""

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        base: str,
        host: str,
        *,
        row_group_rows: int = ROW_GROUP_ROWS,
    ):
        self.filesystem = filesystem
        self.base = base.rstrip("/")
        self.host = host
        self.row_group_rows = row_group_rows

    def object_name(self, event_type: str, date: str, stem: str) -> str:
        name = object_stem(self.host, stem)
        return f"{self.base}/{partition_dir(event_type, date)}/{name}.parquet"

    def publish(self, table: pa.Table, event_type: str, date: str, stem: str) -> str:
        """PUT the whole file; on return the store holds it. Raises ``LakeUnavailable``."""
        name = self.object_name(event_type, date, stem)
        data = parquet_bytes(table, self.row_group_rows)  # built first: nothing half-sent
        try:
            with self.filesystem.open_output_stream(name) as stream:
                stream.write(data)
        except OSError as exc:
            raise LakeUnavailable(f"cannot put {name}: {exc}") from exc
        return name


def object_stem(host: str, segment_stem: str) -> str:
    """An object's name without its suffix: the host's id, then the segment's own name."""
    return f"{host}-{segment_stem}"


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
