"""The SDK imports nothing of ``api``: the few contract names it needs are copies, held equal
to ``flagsight_core.contract`` here."""

from __future__ import annotations

from flagsight_core import contract
from flagsight_sdk import batcher, client, model, tracking

from api.eventlog import schema


def test_the_sdks_limits_are_the_contracts() -> None:
    assert client.BULK_MAX_USERS == contract.BULK_MAX_USERS
    assert client.ERROR_TYPE_MAX == contract.ERROR_TYPE_MAX
    assert batcher.MAX_BATCH == contract.BULK_MAX_FEEDBACKS


def test_the_sdks_error_types_are_the_contracts() -> None:
    assert {str(error) for error in contract.ErrorType} == model.ERROR_TYPES


def test_the_sdks_tracking_names_are_the_contracts() -> None:
    assert tracking.EVENT_NAME.pattern == contract.KEY_PATTERN.pattern
    assert tracking.USER_IDENTIFIER_MAX == contract.USER_IDENTIFIER_MAX
    assert tracking.TRACK_SOURCE_HEADER == contract.TRACK_SOURCE_HEADER
    assert batcher.TrackBatcher.batch_limit == contract.TRACK_MAX_EVENTS
    assert (tracking.SOURCE_SDK, tracking.SOURCE_PROVIDER) == (
        schema.TRACK_SOURCE_SDK,
        schema.TRACK_SOURCE_PROVIDER,
    )
