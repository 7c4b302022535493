"""Reading sealed events back: for tests, tools and notebooks (the pipeline uses DuckDB)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from api.eventlog.layout import type_dir
from api.eventlog.schema import SCHEMAS
from api.infra.objectstore import filesystem_for
from api.settings import S3Options

PARTITION_FIELD = pa.field("date", pa.date32())


def read_events(events_location: str, event_type: str, s3: S3Options | None = None) -> pa.Table:
    """Every sealed event of one type: its schema's columns plus the Hive ``date`` column.

    Hidden files (``.``/``_`` prefixes, i.e. files being written) are never read; nor are
    files of the layout older versions wrote until the pipeline has moved them
    (``api.eventlog.layout``).
    """
    schema = SCHEMAS[event_type].append(PARTITION_FIELD)
    filesystem, base = filesystem_for(events_location, s3)
    root = f"{base}/{type_dir(event_type)}"
    if filesystem.get_file_info(root).type == pafs.FileType.NotFound:
        return schema.empty_table()
    dataset = pads.dataset(
        root,
        schema=schema,
        format="parquet",
        filesystem=filesystem,
        partitioning=pads.partitioning(pa.schema([PARTITION_FIELD]), flavor="hive"),
    )
    return dataset.to_table()
