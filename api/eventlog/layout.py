"""Where sealed events live in the lake: Hive partitions by event type and UTC date (contract
section 6), so that any Hive-aware reader gets both as columns::

    <events>/event_type=evaluation/date=YYYY-MM-DD/<file>.parquet
    <events>/event_type=feedback/date=YYYY-MM-DD/<file>.parquet
    <events>/event_type=track/date=YYYY-MM-DD/<file>.parquet

Versions before this one wrote ``<events>/<type>/date=YYYY-MM-DD/``: the type as a plain
folder, which Hive readers do not see as a column. The pipeline still lists that layout and
moves what it finds into this one (``pipelines.lake``). A file's key in the pipeline's ledger
is its path in this layout (``ledger_path``) wherever it is found, so a file is loaded once
even when a run finds it in the old place and the next one in the new.
"""

from __future__ import annotations

PARTITION_KEY = "event_type"


def type_dir(event_type: str) -> str:
    """The folder of one event type, relative to the events root."""
    return f"{PARTITION_KEY}={event_type}"


def partition_dir(event_type: str, date: str) -> str:
    """The folder of one event type and UTC date (``YYYY-MM-DD``), relative to the root."""
    return f"{type_dir(event_type)}/date={date}"


def legacy_type_dir(event_type: str) -> str:
    """The folder older versions wrote one event type to."""
    return event_type


def ledger_path(relative: str) -> str:
    """A file's path relative to the events root, in this layout: an old ``<type>/date=...``
    path gains its partition key; a path in this layout is returned as it is."""
    if relative.startswith(f"{PARTITION_KEY}="):
        return relative
    return f"{PARTITION_KEY}={relative}"
