"""POST /v1/track (contract 13): validation naming each field, the 500-event limit, the 24-hour
window, the insights switch, and what a 204 leaves in the lake (real event log, real Parquet)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from api.eventlog import EventLogUnavailable
from api.eventlog.reading import read_events
from api.eventlog.schema import TRACK
from tests.support.admin import Tenant

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
"""The service's clock in these tests (exact in a float, to the microsecond)."""
NOW_US = int(NOW.timestamp()) * 1_000_000


@pytest.fixture
def fixed_clock(services) -> None:
    services.clock = NOW.timestamp


def post(client, tenant: Tenant, body, source: str | None = None):
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    if source is not None:
        headers["Flagsight-Source"] = source
    return client.simulate_post("/v1/track", json=body, headers=headers)


def track(client, tenant: Tenant, events: list, source: str | None = None):
    return post(client, tenant, {"events": events}, source)


def stored(services) -> list[dict]:
    """Every tracked event in the lake, sealed now, by user then name."""
    services.event_log.seal_now()
    table = read_events(services.settings.events_location, TRACK)
    rows = table.drop_columns(["date", "schema_version"]).to_pylist()
    return sorted(rows, key=lambda row: (row["user_identifier"], row["event_name"]))


def refused(message: str) -> tuple[int, dict]:
    return 400, {"status": 400, "error": "Bad Request", "message": message}


def answer(result) -> tuple[int, dict | None]:
    return result.status_code, result.json if result.content else None


def test_a_204_means_every_event_is_in_the_lake_as_sent(
    client, services, tenant, fixed_clock
) -> None:
    events = [
        {"name": "checkout", "userIdentifier": "ü-1"},
        {"name": "revenue", "userIdentifier": "ü-1", "value": 12, "at": "2026-11-28T11:00:00Z"},
        {"name": "revenue", "userIdentifier": "ü-2", "value": -0.5, "at": "2026-11-28T13:04:59+01:00"},
        {"name": "error.payment-v2_x", "userIdentifier": "ü-3", "value": None, "at": None},
    ]  # fmt: skip
    result = track(client, tenant, events)
    assert (result.status_code, result.content) == (204, b"")

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text)

    shared = {
        "received_at": NOW,
        "organization_id": tenant.organization_id,
        "environment_id": tenant.environment_id,
        "source": "http",
    }
    rows = stored(services)
    assert [{k: v for k, v in row.items() if k != "api_key_id"} for row in rows] == [
        {**shared, "event_name": "checkout", "user_identifier": "ü-1", "value": None,
         "occurred_at": NOW},
        {**shared, "event_name": "revenue", "user_identifier": "ü-1", "value": 12.0,
         "occurred_at": at("2026-11-28T11:00:00+00:00")},
        {**shared, "event_name": "revenue", "user_identifier": "ü-2", "value": -0.5,
         "occurred_at": at("2026-11-28T12:04:59+00:00")},
        {**shared, "event_name": "error.payment-v2_x", "user_identifier": "ü-3", "value": None,
         "occurred_at": NOW},
    ]  # fmt: skip
    assert {row["api_key_id"] for row in rows} == {
        services.config.authenticate(tenant.api_key).key_id
    }


@pytest.mark.parametrize(
    ("header", "source"),
    [(None, "http"), ("http", "http"), ("sdk", "sdk"), ("provider", "provider")],
)
def test_the_source_is_what_the_client_says_in_its_header(
    client, services, tenant, header, source
) -> None:
    assert track(client, tenant, [{"name": "e", "userIdentifier": "u"}], header).status_code == 204
    assert [row["source"] for row in stored(services)] == [source]


def test_an_unknown_source_is_400_naming_the_header(client, services, tenant) -> None:
    result = track(client, tenant, [{"name": "e", "userIdentifier": "u"}], "browser")
    assert answer(result) == refused("Header 'Flagsight-Source' must be sdk, provider or http")
    assert stored(services) == []


def test_tracking_is_refused_while_insights_is_off_as_feedback_is(client, services, admin) -> None:
    tenant = admin.tenant(insights=False)
    result = track(client, tenant, [{"name": "e", "userIdentifier": "u"}])
    feedback = client.simulate_post(
        "/v1/feedback/bulk",
        json={"feedbacks": []},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )
    assert (
        answer(result)
        == answer(feedback)
        == (
            403,
            {
                "status": 403,
                "error": "Forbidden",
                "message": "Insights feature is not enabled for this environment",
            },
        )
    )
    assert stored(services) == []


def test_without_a_valid_key_it_is_401(client) -> None:
    result = client.simulate_post(
        "/v1/track", json={"events": []}, headers={"Authorization": "ApiKey nope"}
    )
    assert result.status_code == 401


NAME = "Field 'events[0].name' is required and must be a string of 1 to 128 letters, digits, '.', '_' or '-'"
USER = "Field 'events[0].userIdentifier' is required and must be a string of 1 to 1024 characters"
VALUE = "Field 'events[0].value' must be a finite number or null"
AT = "Field 'events[0].at' must be an RFC 3339 time with its offset, e.g. 2026-01-31T09:00:00Z, or null"
WINDOW = (
    "Field 'events[0].at' must be within the 24 hours before now (or at most 5 minutes after it)"
)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": None}, NAME),
        ({"name": ""}, NAME),
        ({"name": "has space"}, NAME),
        ({"name": "é"}, NAME),
        ({"name": "n" * 129}, NAME),
        ({"name": "checkout\n"}, NAME),
        ({"name": 5}, NAME),
        ({"userIdentifier": None}, USER),
        ({"userIdentifier": ""}, USER),
        ({"userIdentifier": "u" * 1025}, USER),
        ({"userIdentifier": "é" * 1025}, USER),
        ({"userIdentifier": 7}, USER),
        ({"value": "1"}, VALUE),
        ({"value": True}, VALUE),
        ({"value": False}, VALUE),
        ({"value": [1]}, VALUE),
        ({"value": 10**400}, VALUE),
        ({"at": "yesterday"}, AT),
        ({"at": "2026-11-28"}, AT),
        ({"at": "2026-11-28T11:00:00"}, AT),  # no offset
        ({"at": "2026-11-28T11:00Z"}, AT),
        ({"at": "2026-11-28T11:00:00.Z"}, AT),
        ({"at": "2026-11-28T24:00:00Z"}, AT),
        ({"at": "2026-02-30T11:00:00Z"}, AT),
        ({"at": "2026-11-28T11:59:60Z"}, AT),  # a leap second
        ({"at": "2026-11-28T11:00:00+24:00"}, AT),
        ({"at": 1_795_867_200}, AT),
        ({"at": "2026-11-27T11:59:59.999999Z"}, WINDOW),  # 24 h and 1 µs ago
        ({"at": "2026-11-28T12:05:00.000001Z"}, WINDOW),  # 5 min and 1 µs ahead
        ({"at": "0001-01-01T00:00:00+01:00"}, WINDOW),
        ({"at": "9999-12-31T23:59:59-01:00"}, WINDOW),
    ],
)
def test_an_invalid_event_is_400_naming_its_field(
    client, services, tenant, fixed_clock, change, message
) -> None:
    event = {"name": "checkout", "userIdentifier": "u", **change}
    assert answer(track(client, tenant, [event])) == refused(
        f"Invalid items at indexes 0; nothing was stored: {message}"
    )


def test_the_limits_themselves_are_taken(client, services, tenant) -> None:
    events = [
        {"name": "n" * 128, "userIdentifier": "é" * 1024, "value": 0},
        {"name": "N.9_-", "userIdentifier": "😀", "value": 2**64, "extra": "ignored"},
    ]
    assert track(client, tenant, events).status_code == 204
    assert [(row["event_name"], row["value"]) for row in stored(services)] == [
        ("n" * 128, 0.0),
        ("N.9_-", float(2**64)),
    ]


def test_a_value_too_large_for_a_double_is_named_too(client, tenant) -> None:
    result = client.simulate_post(
        "/v1/track",
        body=b'{"events": [{"name": "e", "userIdentifier": "u", "value": 1e999}]}',
        headers={"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"},
    )
    assert answer(result) == refused(f"Invalid items at indexes 0; nothing was stored: {VALUE}")


def test_the_window_is_24_hours_back_and_5_minutes_ahead_inclusive(
    client, services, tenant, fixed_clock
) -> None:
    edges = [
        "2026-11-27T12:00:00Z",
        "2026-11-27t12:00:00.000000z",
        "2026-11-28T12:05:00Z",
        "2026-11-28T13:04:59.9999996+01:00",  # digits past the microsecond are rounded
        "2026-11-28 12:05:00Z",  # RFC 3339 lets a space stand for the T
    ]
    events = [{"name": "e", "userIdentifier": f"u{i}", "at": at} for i, at in enumerate(edges)]
    assert track(client, tenant, events).status_code == 204
    day_us, ahead_us = 86_400 * 1_000_000, 300 * 1_000_000
    assert [
        int(row["occurred_at"].timestamp() * 1_000_000) - NOW_US for row in stored(services)
    ] == [
        -day_us,
        -day_us,
        ahead_us,
        ahead_us,
        ahead_us,
    ]


def test_a_request_is_validated_whole_naming_every_bad_index(
    client, services, tenant, fixed_clock
) -> None:
    good = {"name": "e", "userIdentifier": "u"}
    result = track(
        client,
        tenant,
        [
            good,
            {**good, "value": "12"},
            good,
            "not an event",
            {**good, "at": "2026-11-20T00:00:00Z"},
        ],
    )
    assert answer(result) == refused(
        "Invalid items at indexes 1, 3, 4; nothing was stored: "
        "Field 'events[1].value' must be a finite number or null; "
        "'events[3]' must be a JSON object; "
        "Field 'events[4].at' must be within the 24 hours before now (or at most 5 minutes after it)"
    )
    assert stored(services) == []


def test_at_most_500_events_a_request(client, services, tenant) -> None:
    events = [{"name": "e", "userIdentifier": f"u{i:03d}", "value": i} for i in range(501)]
    assert answer(track(client, tenant, events)) == refused(
        "Field 'events' has 501 items; at most 500 are allowed"
    )
    assert track(client, tenant, events[:500]).status_code == 204
    assert [row["value"] for row in stored(services)] == [float(i) for i in range(500)]
    assert track(client, tenant, []).status_code == 204


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Field 'events' is required"),
        ({"events": {}}, "Field 'events' must be an array"),
        ([], "The body must be a JSON object"),
    ],
)
def test_the_body_shape_is_400(client, tenant, body, message) -> None:
    assert answer(post(client, tenant, body)) == refused(message)


def test_tracked_events_are_not_metered(client, admin, tenant) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    client.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=headers
    )
    before = client.simulate_get("/v1/usage", headers=headers).json["evaluations"]
    events = [{"name": "e", "userIdentifier": f"u{i}"} for i in range(500)]
    assert track(client, tenant, events).status_code == 204
    assert client.simulate_get("/v1/usage", headers=headers).json["evaluations"] == before == 1


class _RefusingLog:
    """The one boundary faked here: an event log whose disk refuses writes."""

    def __init__(self, real):
        self.real = real

    def append_track(self, events):
        raise EventLogUnavailable("disk full")

    def close(self):
        self.real.close()


def test_when_the_log_refuses_it_is_503_and_nothing_is_stored(client, services, tenant) -> None:
    real = services.event_log
    services.event_log = _RefusingLog(real)
    result = track(client, tenant, [{"name": "e", "userIdentifier": "u"}])
    assert result.status_code == 503 and result.headers["Retry-After"] == "1"
    assert result.json["message"] == (
        "The event log cannot take writes now; the events were not stored. Retry later."
    )
    services.event_log = real
    assert stored(services) == []
