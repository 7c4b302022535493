"""Event schemas, version 1: the contract between the API, the lake and the warehouse.

Both event types are appended by API workers and sealed into Hive-partitioned Parquet::

    <events>/evaluation/date=YYYY-MM-DD/<segment>.parquet
    <events>/feedback/date=YYYY-MM-DD/<segment>.parquet

``date`` is the UTC date of ``evaluated_at`` / ``received_at``. Columns are documented in
``docs/events.md``; a change of columns bumps ``SCHEMA_VERSION`` and keeps old files readable.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1

EVALUATION = "evaluation"
FEEDBACK = "feedback"
EVENT_TYPES = (EVALUATION, FEEDBACK)

# Where an evaluation came from.
SOURCE_EVALUATE = "v1"
SOURCE_EVALUATE_BULK = "v1-bulk"
SOURCE_OFREP = "ofrep"
SOURCE_OFREP_BULK = "ofrep-bulk"


class EvaluationEvent(NamedTuple):
    """One evaluate answer (single, bulk entry or OFREP flag). Times in microseconds UTC."""

    evaluation_id: str
    evaluated_at_us: int
    organization_id: str
    environment_id: str
    flag_key: str
    user_identifier: str
    value: bool
    matched_rule_type: str | None
    error_type: str | None
    sdk: str | None
    api_key_id: str
    source: str


class FeedbackEvent(NamedTuple):
    """One accepted feedback item; ``environment_id`` is read from the evaluation id."""

    evaluation_id: str
    received_at_us: int
    organization_id: str
    environment_id: str
    result: bool
    latency_ms: float | None
    error_type: str | None
    api_key_id: str


@cache
def _arrow_schemas() -> dict[str, pa.Schema]:
    """The Arrow schemas, built on first use: API workers append events without pyarrow
    (tens of MB per process); sealing and the lake's readers import it."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    evaluation = pa.schema(
        [
            pa.field("schema_version", pa.int16(), nullable=False),
            pa.field("evaluation_id", pa.string(), nullable=False),
            pa.field("evaluated_at", ts, nullable=False),
            pa.field("organization_id", pa.string(), nullable=False),
            pa.field("environment_id", pa.string(), nullable=False),
            pa.field("flag_key", pa.string(), nullable=False),
            pa.field("user_identifier", pa.string(), nullable=False),
            pa.field("value", pa.bool_(), nullable=False),
            pa.field("matched_rule_type", pa.string()),
            pa.field("error_type", pa.string()),
            pa.field("sdk", pa.string()),
            pa.field("api_key_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
        ]
    )

    feedback = pa.schema(
        [
            pa.field("schema_version", pa.int16(), nullable=False),
            pa.field("evaluation_id", pa.string(), nullable=False),
            pa.field("received_at", ts, nullable=False),
            pa.field("organization_id", pa.string(), nullable=False),
            pa.field("environment_id", pa.string(), nullable=False),
            pa.field("result", pa.bool_(), nullable=False),
            pa.field("latency_ms", pa.float64()),
            pa.field("error_type", pa.string()),
            pa.field("api_key_id", pa.string(), nullable=False),
        ]
    )
    return {EVALUATION: evaluation, FEEDBACK: feedback}


def __getattr__(name: str) -> object:
    """``EVALUATION_SCHEMA``, ``FEEDBACK_SCHEMA`` and ``SCHEMAS``, importing pyarrow lazily."""
    if name == "SCHEMAS":
        return _arrow_schemas()
    if name == "EVALUATION_SCHEMA":
        return _arrow_schemas()[EVALUATION]
    if name == "FEEDBACK_SCHEMA":
        return _arrow_schemas()[FEEDBACK]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
