"""What the API needs from an event log: append, durably, or say it cannot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from api.eventlog.schema import (
    EvaluationBatch,
    EvaluationEvent,
    FeedbackEvent,
    LocalReport,
    TrackEvent,
)


class EventLogUnavailable(RuntimeError):
    """The log cannot take writes now (disk full, permissions, closed)."""


class EventLog(Protocol):
    def append_evaluations(self, events: Sequence[EvaluationEvent]) -> None:
        """Return only once the events survive the process being killed; else raise
        ``EventLogUnavailable``."""

    def append_evaluation_batch(self, batch: EvaluationBatch) -> None:
        """As ``append_evaluations``, for one flag's evaluations in columnar form."""

    def append_evaluation_frame(self, frame: bytearray, count: int) -> None:
        """As ``append_evaluation_batch``, for a batch of ``count`` users already encoded as
        a frame (``api.eventlog.frames``), as the native fast path gives it."""

    def append_local_report(self, report: LocalReport) -> None:
        """As ``append_evaluations``, for the evaluations of one local report, kept as sent
        (``LocalReport``: no event is built per evaluation)."""

    def append_feedback(self, events: Sequence[FeedbackEvent]) -> None:
        """As ``append_evaluations``."""

    def append_track(self, events: Sequence[TrackEvent]) -> None:
        """As ``append_evaluations``, for tracked events (``POST /v1/track``)."""

    def unready_reason(self) -> str | None:
        """Why an append would raise ``EventLogUnavailable`` now, or None if it would not."""

    def close(self) -> None:
        """Flush, fsync and seal everything this process appended."""
