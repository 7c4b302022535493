"""The published warehouse shared through the event lake's bucket: the object both sides use.

With the lake in object storage, the pipeline host uploads each published snapshot to
``<events URI>/_warehouse/warehouse.duckdb`` (``upload_snapshot``: one PUT, so readers see the
old object or the new one, never a part), and every API host downloads it when it is newer
than its local file (``download_if_newer``, from ``api.jobs.warehouse_snapshot``). Both sides
live here, with the warehouse, so the pipeline needs nothing of the API's processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from api.infra.objectstore import filesystem_for
from api.settings import S3Options

SNAPSHOT_NAME = "_warehouse/warehouse.duckdb"
"""Under the lake's root; the leading underscore keeps it out of Hive partition discovery."""
_CHUNK = 1 << 20

if TYPE_CHECKING:
    import pyarrow.fs as pafs


def _snapshot_object(events_location: str, s3: S3Options) -> tuple[pafs.FileSystem, str]:
    filesystem, base = filesystem_for(events_location, s3)
    return filesystem, f"{base.rstrip('/')}/{SNAPSHOT_NAME}"


def upload_snapshot(local: Path, events_location: str, s3: S3Options) -> str:
    """Put the published file into the bucket; the object's path."""
    filesystem, path = _snapshot_object(events_location, s3)
    with local.open("rb") as source, filesystem.open_output_stream(path) as target:
        while chunk := source.read(_CHUNK):
            target.write(chunk)
    return path


def download_if_newer(events_location: str, local: Path, s3: S3Options) -> bool:
    """Replace ``local`` by the bucket's snapshot when that is newer; True when it did."""
    import pyarrow.fs as pafs

    filesystem, path = _snapshot_object(events_location, s3)
    info = filesystem.get_file_info(path)
    if info.type != pafs.FileType.File or info.mtime is None:
        return False
    remote_ns = info.mtime_ns
    if local.exists() and local.stat().st_mtime_ns >= remote_ns:
        return False
    staging = local.with_name(f".{local.name}.download.{os.getpid()}")
    try:
        with filesystem.open_input_stream(path) as source, staging.open("wb") as target:
            while chunk := source.read(_CHUNK):
                target.write(chunk)
            target.flush()
            os.fsync(target.fileno())
        os.utime(staging, ns=(remote_ns, remote_ns))
        os.replace(staging, local)
    finally:
        staging.unlink(missing_ok=True)
    return True
