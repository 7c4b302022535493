"""Event schemas, version 2: the contract between the API, the lake and the warehouse.

Every event type is appended by API workers and sealed into Hive-partitioned Parquet::

    <events>/event_type=evaluation/date=YYYY-MM-DD/<segment>.parquet
    <events>/event_type=feedback/date=YYYY-MM-DD/<segment>.parquet
    <events>/event_type=track/date=YYYY-MM-DD/<segment>.parquet

``date`` is the UTC date of each schema's first time column (``evaluated_at``,
``received_at``, ``occurred_at``; ``api.eventlog.layout``). Columns are documented in
``docs/events.md``; a change of columns bumps ``SCHEMA_VERSION`` and keeps old files readable
(version 2 added ``rule_index``, ``arm`` and ``rollout_percentage`` to evaluations; readers
of version-1 files see them as NULL). The ``track`` type came later without a bump: a new
type changes no column of the others, and no older file of it exists.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from flagsight_core.model import NOT_EVALUATED, OUTCOMES, arm_of

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 2

EVALUATION = "evaluation"
FEEDBACK = "feedback"
TRACK = "track"
EVENT_TYPES = (EVALUATION, FEEDBACK, TRACK)

# Where an evaluation came from.
SOURCE_EVALUATE = "v1"
SOURCE_EVALUATE_BULK = "v1-bulk"
SOURCE_OFREP = "ofrep"
SOURCE_OFREP_BULK = "ofrep-bulk"
SOURCE_LOCAL = "local"
"""Decided in the application by a local SDK, and reported (``POST /v1/local/report``)."""

# Who sent a tracked event (``POST /v1/track``): the client says so in a header
# (``flagsight_core.contract.TRACK_SOURCE_HEADER``).
TRACK_SOURCE_HTTP = "http"
"""Any HTTP caller that does not say it is one of the two below."""
TRACK_SOURCE_SDK = "sdk"
"""The Python SDK's ``FlagsightClient.track``."""
TRACK_SOURCE_PROVIDER = "provider"
"""The SDK's OpenFeature provider (``FlagsightProvider.track``)."""
TRACK_SOURCES = (TRACK_SOURCE_HTTP, TRACK_SOURCE_SDK, TRACK_SOURCE_PROVIDER)


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
    rule_index: int | None
    arm: str | None
    rollout_percentage: float | None


class EvaluationBatch(NamedTuple):
    """Evaluations of one flag for many users, answered together (any evaluate request).

    What the users share is kept once; per user, only the identifier and an outcome byte.
    Evaluation ids are ``flagsight_core.ids.bulk_ids(evaluation_id_prefix, n)``. A frame of
    10,000 users is a tenth of the size of 10,000 ``EvaluationEvent`` rows, and costs no
    Python object per user to build: the sealer expands it with ``events()``.
    """

    evaluation_id_prefix: str
    evaluated_at_us: int
    organization_id: str
    environment_id: str
    flag_key: str
    sdk: str | None
    api_key_id: str
    source: str
    user_identifiers: list[str]
    outcomes: bytes
    rules: bytes
    """Per user, the deciding rule's index (``NO_RULE``: none matched; ``NOT_EVALUATED``: an
    error outcome). Empty in batches written by version 1, whose arms are unknown."""
    split_rule: int
    """The index of the flag's first percentage rule when evaluated, -1 if it had none."""
    split_percentage: float | None
    """That rule's percentage when evaluated (the expected share of treatment)."""

    def events(self) -> list[EvaluationEvent]:
        from flagsight_core.ids import bulk_ids

        shared_head = (
            self.evaluated_at_us,
            self.organization_id,
            self.environment_id,
            self.flag_key,
        )
        shared_tail = (self.sdk, self.api_key_id, self.source)
        ids = bulk_ids(self.evaluation_id_prefix, len(self.user_identifiers))
        rules = self.rules or bytes((NOT_EVALUATED,)) * len(self.user_identifiers)
        events = []
        for evaluation_id, user, code, rule in zip(
            ids, self.user_identifiers, self.outcomes, rules, strict=True
        ):
            arm = arm_of(rule, self.split_rule) if self.rules else None
            events.append(
                EvaluationEvent(
                    evaluation_id,
                    *shared_head,
                    user,
                    *OUTCOMES[code],
                    *shared_tail,
                    rule if rule < NOT_EVALUATED else None,
                    arm,
                    self.split_percentage if arm is not None else None,
                )
            )
        return events


class EvaluationBatchV1(NamedTuple):
    """A batch as version 1 wrote it (frame code 3): no rule bytes, so no arms."""

    evaluation_id_prefix: str
    evaluated_at_us: int
    organization_id: str
    environment_id: str
    flag_key: str
    sdk: str | None
    api_key_id: str
    source: str
    user_identifiers: list[str]
    outcomes: bytes

    def upgraded(self) -> EvaluationBatch:
        return EvaluationBatch(*self, *V1_BATCH_DEFAULTS)


V1_BATCH_DEFAULTS = (b"", -1, None)
"""What a version-1 batch lacks (rules, split rule, split percentage), appended to read it as
a version-2 one."""


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


class TrackEvent(NamedTuple):
    """One tracked event (``POST /v1/track``): something a user did that a metric counts.

    ``occurred_at_us`` is the event's ``at`` (checked to be within the last 24 hours), or its
    arrival when it has none; it comes first, so it decides the ``date`` partition: a metric
    reads events by when they happened. Times in microseconds UTC.
    """

    occurred_at_us: int
    received_at_us: int
    organization_id: str
    environment_id: str
    event_name: str
    user_identifier: str
    value: float | None
    source: str
    api_key_id: str


class LocalRow(NamedTuple):
    """One evaluation a local SDK decided and reported, as it sent it (``docs/api.md``,
    "Local evaluation"), its time already checked: ``evaluated_at_ms`` is the SDK's clock
    if it was within the report window, else the time the report arrived
    (``api.serving.local``)."""

    evaluation_id: str
    evaluated_at_ms: int
    flag_key: str
    user_identifier: str
    value: bool
    matched_rule_type: str | None
    error_type: str | None
    rule_index: int | None
    arm: str | None
    rollout_percentage: float | None


class LocalReport(NamedTuple):
    """The evaluations of one local report (``POST /v1/local/report``), as sent.

    What the report's evaluations share is kept once; each row stays the tuple the request
    decoded to, so a worker builds no event per evaluation: the sealer turns the rows into
    columns (``api.eventlog.sealing``), and ``events()`` gives the rows they stand for.
    """

    organization_id: str
    environment_id: str
    sdk: str | None
    api_key_id: str
    rows: list[LocalRow]

    def events(self) -> list[EvaluationEvent]:
        shared = (self.organization_id, self.environment_id)
        tail = (self.sdk, self.api_key_id, SOURCE_LOCAL)
        return [
            EvaluationEvent(
                evaluation_id,
                at_ms * 1000,
                *shared,
                flag_key,
                user,
                value,
                rule_type,
                error_type,
                *tail,
                rule_index,
                arm,
                percentage if arm is not None else None,
            )
            for (
                evaluation_id, at_ms, flag_key, user, value, rule_type, error_type, rule_index,
                arm, percentage,
            ) in self.rows
        ]  # fmt: skip


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
            pa.field("rule_index", pa.int16()),
            pa.field("arm", pa.string()),
            pa.field("rollout_percentage", pa.float64()),
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
    track = pa.schema(
        [
            pa.field("schema_version", pa.int16(), nullable=False),
            pa.field("occurred_at", ts, nullable=False),
            pa.field("received_at", ts, nullable=False),
            pa.field("organization_id", pa.string(), nullable=False),
            pa.field("environment_id", pa.string(), nullable=False),
            pa.field("event_name", pa.string(), nullable=False),
            pa.field("user_identifier", pa.string(), nullable=False),
            pa.field("value", pa.float64()),
            pa.field("source", pa.string(), nullable=False),
            pa.field("api_key_id", pa.string(), nullable=False),
        ]
    )
    return {EVALUATION: evaluation, FEEDBACK: feedback, TRACK: track}


def __getattr__(name: str) -> object:
    """``EVALUATION_SCHEMA``, ``FEEDBACK_SCHEMA``, ``TRACK_SCHEMA`` and ``SCHEMAS``, importing
    pyarrow lazily."""
    if name == "SCHEMAS":
        return _arrow_schemas()
    if name == "EVALUATION_SCHEMA":
        return _arrow_schemas()[EVALUATION]
    if name == "FEEDBACK_SCHEMA":
        return _arrow_schemas()[FEEDBACK]
    if name == "TRACK_SCHEMA":
        return _arrow_schemas()[TRACK]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
