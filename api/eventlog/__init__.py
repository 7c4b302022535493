"""The event log: every evaluation, feedback and tracked event, appended durably, sealed into
Parquet.

``read_events`` (which needs ``pyarrow.dataset``) is imported from ``api.eventlog.reading`` by
the tools that read the lake, so API workers do not pay for it.
"""

from api.eventlog.log import EventLog, EventLogUnavailable
from api.eventlog.segmented import SegmentedEventLog

__all__ = ["EventLog", "EventLogUnavailable", "SegmentedEventLog"]
