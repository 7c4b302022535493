"""The event log: every evaluation and feedback event, appended durably, sealed into Parquet."""

from api.eventlog.log import EventLog, EventLogUnavailable
from api.eventlog.reading import read_events
from api.eventlog.segmented import SegmentedEventLog

__all__ = ["EventLog", "EventLogUnavailable", "SegmentedEventLog", "read_events"]
