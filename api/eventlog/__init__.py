"""The event log: every evaluation and feedback event, appended durably, sealed into Parquet."""

from api.eventlog.log import EventLog, EventLogUnavailable

__all__ = ["EventLog", "EventLogUnavailable"]
