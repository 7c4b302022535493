"""OFREP over the in-process app: every rule of contract 7 as a client sees it."""

from __future__ import annotations

import calendar
import time
from collections.abc import Sequence

import jsonschema
import pytest

from api.eventlog.frames import decode_evaluation_frame
from api.eventlog.schema import SOURCE_OFREP, SOURCE_OFREP_BULK, EvaluationBatch, EvaluationEvent
from api.web.openapi.document import openapi_document
from tests.support.admin import Admin, Tenant

UNAUTHORIZED = {
    "status": 401,
    "error": "Unauthorized",
    "message": "Missing or invalid Authorization header",
}
BULK = "/ofrep/v1/evaluate/flags"
PLAN_LIMIT = "Plan limit exceeded. Upgrade your plan to continue."


def schema(name: str) -> dict:
    document = openapi_document()
    return {**document["components"]["schemas"][name], "components": document["components"]}


def single(client, tenant: Tenant, flag: str, context: object = None, **kwargs):
    body = {"context": {"targetingKey": "user-1"} if context is None else context}
    headers = {"Authorization": f"ApiKey {tenant.api_key}", **kwargs.pop("headers", {})}
    return client.simulate_post(f"{BULK}/{flag}", json=body, headers=headers, **kwargs)


def bulk(client, tenant: Tenant, context: object = None, etag: str | None = None):
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    if etag is not None:
        headers["If-None-Match"] = etag
    body = {"context": {"targetingKey": "user-1"} if context is None else context}
    return client.simulate_post(BULK, json=body, headers=headers)


def answer(body: dict) -> tuple:
    """The success answer without its (checked) evaluation id."""
    jsonschema.validate(body, schema("OfrepEvaluationSuccess"))
    return body["key"], body["value"], body["reason"], body["variant"]


def usage(admin: Admin, tenant: Tenant) -> int:
    return admin.request("GET", f"/organizations/{tenant.organization_id}/usage", expect=200)[
        "evaluations"
    ]


class RecordingLog:
    """Passes appends through to the real log and keeps the evaluation events it saw."""

    def __init__(self, inner):
        self._inner = inner
        self.evaluations: list[EvaluationEvent] = []

    def append_evaluations(self, events: Sequence[EvaluationEvent]) -> None:
        self._inner.append_evaluations(events)
        self.evaluations.extend(events)

    def append_evaluation_batch(self, batch: EvaluationBatch) -> None:
        self._inner.append_evaluation_batch(batch)
        self.evaluations.extend(batch.events())

    def append_evaluation_frame(self, frame: bytearray, count: int) -> None:
        self._inner.append_evaluation_frame(frame, count)
        self.evaluations.extend(decode_evaluation_frame(frame).events())

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


@pytest.fixture
def tenant(admin: Admin) -> Tenant:
    return admin.tenant()


@pytest.fixture
def events(services) -> RecordingLog:
    services.event_log = RecordingLog(services.event_log)
    return services.event_log


@pytest.fixture
def flags(admin: Admin, tenant: Tenant) -> None:
    admin.segment(tenant.organization_id, "beta", ["user-1"])
    env = tenant.environment_id
    admin.flag(env, "static-on", [{"type": "STATIC"}])
    admin.flag(env, "static-off", [{"type": "STATIC", "value": False}])
    admin.flag(env, "segment", [{"type": "SEGMENT", "segment": "beta"}])
    admin.flag(env, "everyone", [{"type": "PERCENTAGE", "percentage": 100}])
    admin.flag(env, "no-rules", [])
    admin.flag(env, "disabled", [{"type": "STATIC"}], enabled=False)
    admin.flag(env, "archived", [{"type": "STATIC"}], archived=True)


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("static-on", ("static-on", True, "STATIC", "on")),
        ("static-off", ("static-off", False, "STATIC", "off")),
        ("segment", ("segment", True, "TARGETING_MATCH", "on")),
        ("everyone", ("everyone", True, "SPLIT", "on")),
        ("no-rules", ("no-rules", False, "DEFAULT", "off")),
        ("disabled", ("disabled", False, "DISABLED", "off")),
        ("archived", ("archived", False, "DISABLED", "off")),
    ],
)
def test_single_maps_reasons_and_variants(client, tenant, flags, flag, expected) -> None:
    result = single(client, tenant, flag)
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json"
    assert answer(result.json) == expected


def test_single_is_one_metered_evaluation_event(client, admin, tenant, flags, events) -> None:
    first = single(client, tenant, "segment").json
    second = single(client, tenant, "segment").json
    assert first["metadata"]["evaluationId"] != second["metadata"]["evaluationId"]
    assert usage(admin, tenant) == 2
    assert [
        (e.evaluation_id, e.flag_key, e.user_identifier, e.value, e.matched_rule_type, e.source)
        for e in events.evaluations
    ] == [
        (first["metadata"]["evaluationId"], "segment", "user-1", True, "SEGMENT", SOURCE_OFREP),
        (second["metadata"]["evaluationId"], "segment", "user-1", True, "SEGMENT", SOURCE_OFREP),
    ]


def test_the_evaluation_id_is_accepted_by_feedback(client, tenant, flags) -> None:
    evaluation_id = single(client, tenant, "static-on").json["metadata"]["evaluationId"]
    result = client.simulate_post(
        "/v1/feedback/report",
        json={"evaluationId": evaluation_id, "result": True, "latencyMs": 12},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
    )
    assert result.status_code == 204


def test_flag_not_found_is_404_and_still_an_event(client, admin, tenant, events) -> None:
    result = single(client, tenant, "Missing")
    assert result.status_code == 404
    body = result.json
    jsonschema.validate(body, schema("OfrepEvaluationFailure"))
    assert (body["key"], body["errorCode"], body["errorDetails"]) == (
        "Missing",
        "FLAG_NOT_FOUND",
        "Flag not found",
    )
    assert [(e.evaluation_id, e.error_type) for e in events.evaluations] == [
        (body["metadata"]["evaluationId"], "FLAG_NOT_FOUND")
    ]
    assert usage(admin, tenant) == 1


@pytest.mark.parametrize(
    ("body", "code", "details"),
    [
        (
            {},
            "TARGETING_KEY_MISSING",
            "Field 'context.targetingKey' is required (the user identifier)",
        ),
        (
            {"context": {}},
            "TARGETING_KEY_MISSING",
            "Field 'context.targetingKey' is required (the user identifier)",
        ),
        (
            {"context": {"targetingKey": ""}},
            "TARGETING_KEY_MISSING",
            "Field 'context.targetingKey' is required (the user identifier)",
        ),
        (
            {"context": {"targetingKey": 7}},
            "INVALID_CONTEXT",
            "Field 'context.targetingKey' must be a string of 1 to 1024 characters",
        ),
        (
            {"context": {"targetingKey": "u" * 1025}},
            "INVALID_CONTEXT",
            "Field 'context.targetingKey' must be a string of 1 to 1024 characters",
        ),
        ({"context": ["user-1"]}, "INVALID_CONTEXT", "Field 'context' must be a JSON object"),
        ([], "PARSE_ERROR", "The body must be a JSON object"),
    ],
)
@pytest.mark.parametrize("path", [f"{BULK}/static-on", BULK])
def test_invalid_requests_are_400_with_error_details(
    client, admin, tenant, flags, events, path, body, code, details
) -> None:
    result = client.simulate_post(
        path, json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
    )
    assert result.status_code == 400
    expected = {
        "errorCode": code,
        "errorDetails": details,
        "status": 400,
        "error": "Bad Request",
        "message": details,
    }
    if path != BULK:
        expected["key"] = "static-on"
    assert result.json == expected
    jsonschema.validate(result.json, schema("OfrepEvaluationFailure"))
    assert events.evaluations == [] and usage(admin, tenant) == 0


def test_malformed_json_is_a_parse_error(client, tenant) -> None:
    result = client.simulate_post(
        f"{BULK}/f",
        body="{nope",
        headers={"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"},
    )
    assert result.status_code == 400
    assert (result.json["key"], result.json["errorCode"]) == ("f", "PARSE_ERROR")
    assert result.json["errorDetails"].startswith("Malformed JSON body")


def test_an_empty_body_means_no_targeting_key(client, tenant) -> None:
    result = client.simulate_post(
        BULK,
        body="",
        headers={"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"},
    )
    assert (result.status_code, result.json["errorCode"]) == (400, "TARGETING_KEY_MISSING")


def test_non_json_body_is_415_and_oversized_413(client, tenant) -> None:
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    result = client.simulate_post(
        f"{BULK}/f", body="x", headers={**auth, "Content-Type": "text/plain"}
    )
    assert (result.status_code, result.json["errorCode"], result.json["status"]) == (
        415,
        "GENERAL",
        415,
    )
    big = {"context": {"targetingKey": "u", "pad": "x" * 70_000}}
    result = client.simulate_post(BULK, json=big, headers=auth)
    assert (result.status_code, result.json["errorCode"], result.json["error"]) == (
        413,
        "GENERAL",
        "Payload Too Large",
    )


def test_flag_key_over_128_characters_is_400(client, tenant) -> None:
    result = single(client, tenant, "k" * 129)
    assert (result.status_code, result.json["errorCode"]) == (400, "GENERAL")
    assert result.json["errorDetails"] == "Flag key (path) must be 1 to 128 characters long"


@pytest.mark.parametrize("path", [f"{BULK}/f", BULK])
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer {key}"},
        {"X-API-Key": "{key}"},
        {"Authorization": "ApiKey nope"},
    ],
    ids=["missing", "bearer", "x-api-key", "unknown"],
)
def test_only_the_apikey_header_authenticates_before_the_body(
    client, tenant, path, headers
) -> None:
    headers = {k: v.format(key=tenant.api_key) for k, v in headers.items()}
    result = client.simulate_post(
        path, body="{not json", headers={**headers, "Content-Type": "application/json"}
    )
    assert (result.status_code, result.json) == (401, UNAUTHORIZED)


def test_bulk_answers_every_flag_each_an_event(client, admin, tenant, flags, events) -> None:
    result = bulk(client, tenant)
    assert result.status_code == 200
    jsonschema.validate(result.json, schema("OfrepBulkEvaluationSuccess"))
    assert [answer(entry) for entry in result.json["flags"]] == [
        ("archived", False, "DISABLED", "off"),  # as the single call answers it
        ("disabled", False, "DISABLED", "off"),
        ("everyone", True, "SPLIT", "on"),
        ("no-rules", False, "DEFAULT", "off"),
        ("segment", True, "TARGETING_MATCH", "on"),
        ("static-off", False, "STATIC", "off"),
        ("static-on", True, "STATIC", "on"),
    ]
    ids = [entry["metadata"]["evaluationId"] for entry in result.json["flags"]]
    assert len(set(ids)) == 7
    assert [(e.evaluation_id, e.flag_key, e.source) for e in events.evaluations] == [
        (i, entry["key"], SOURCE_OFREP_BULK)
        for i, entry in zip(ids, result.json["flags"], strict=True)
    ]
    assert usage(admin, tenant) == 7


def test_bulk_etag_and_304_which_records_and_meters_nothing(
    client, admin, tenant, flags, events
) -> None:
    first = bulk(client, tenant)
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    again = bulk(client, tenant, etag=etag)
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    weak = bulk(client, tenant, etag=f'"other", W/{etag}')
    assert weak.status_code == 304
    assert len(events.evaluations) == 7 and usage(admin, tenant) == 7


def test_bulk_etag_changes_with_the_context_and_the_configuration(
    client, admin, tenant, flags
) -> None:
    etag = bulk(client, tenant).headers["etag"]
    assert bulk(client, tenant, {"targetingKey": "user-1"}).headers["etag"] == etag
    other_user = bulk(client, tenant, {"targetingKey": "user-2"}, etag=etag)
    assert other_user.status_code == 200 and other_user.headers["etag"] != etag
    other_attribute = bulk(client, tenant, {"targetingKey": "user-1", "country": "FR"}, etag=etag)
    assert other_attribute.status_code == 200 and other_attribute.headers["etag"] != etag

    admin.flag(tenant.environment_id, "static-on", [{"type": "STATIC", "value": False}])
    changed = bulk(client, tenant, etag=etag)
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert ("static-on", False, "STATIC", "off") in [answer(e) for e in changed.json["flags"]]

    etag = changed.headers["etag"]
    admin.segment(tenant.organization_id, "beta", ["someone-else"])
    after_segment = bulk(client, tenant, etag=etag)
    assert after_segment.status_code == 200 and after_segment.headers["etag"] != etag
    assert ("segment", False, "DEFAULT", "off") in [answer(e) for e in after_segment.json["flags"]]


def test_bulk_of_an_environment_without_flags(client, tenant) -> None:
    result = bulk(client, tenant)
    assert (result.status_code, result.json["flags"]) == (200, [])
    # ADR-0008: the stream that asks for a re-fetch after a change, on the host asked
    assert result.json["eventStreams"] == [
        {"type": "sse", "url": "http://falconframework.org/ofrep/v1/stream"}
    ]
    assert bulk(client, tenant, etag=result.headers["etag"]).status_code == 304


def expected_retry_after(now: float) -> int:
    tm = time.gmtime(now)
    year, month = (tm.tm_year + 1, 1) if tm.tm_mon == 12 else (tm.tm_year, tm.tm_mon + 1)
    return int(calendar.timegm((year, month, 1, 0, 0, 0)) - now)


def test_plan_hard_threshold_is_429_with_retry_after(client, admin, events) -> None:
    tenant = admin.tenant(plan="enterprise", limit=2)  # hard threshold 2
    admin.flag(tenant.environment_id, "a", [{"type": "STATIC"}])
    admin.flag(tenant.environment_id, "b", [{"type": "STATIC"}])
    admin.flag(tenant.environment_id, "c", [{"type": "STATIC"}])

    partial = bulk(client, tenant)
    assert partial.status_code == 200 and "etag" not in partial.headers
    entries = partial.json["flags"]
    assert [answer(e)[:3] for e in entries[:2]] == [("a", True, "STATIC"), ("b", True, "STATIC")]
    assert {k: entries[2][k] for k in ("key", "errorCode", "errorDetails")} == {
        "key": "c",
        "errorCode": "GENERAL",
        "errorDetails": PLAN_LIMIT,
    }

    for result in (
        single(client, tenant, "a"),
        single(client, tenant, "missing"),
        bulk(client, tenant),
    ):
        now = time.time()
        assert result.status_code == 429
        assert result.json["errorCode"] == "GENERAL" and result.json["errorDetails"] == PLAN_LIMIT
        retry = result.headers["retry-after"]
        assert retry.isdigit() and abs(int(retry) - expected_retry_after(now)) <= 2
    assert usage(admin, tenant) == 2


def test_a_blocked_organization_gets_429_not_304(client, admin) -> None:
    tenant = admin.tenant(plan="enterprise", limit=1)
    admin.flag(tenant.environment_id, "a", [{"type": "STATIC"}])
    etag = bulk(client, tenant).headers["etag"]
    assert bulk(client, tenant, etag=etag).status_code == 429


def test_openapi_describes_ofrep(client) -> None:
    paths = client.simulate_get("/openapi.json").json["paths"]
    assert set(paths[BULK]["post"]["responses"]) >= {"200", "304", "400", "401", "429"}
    assert set(paths[f"{BULK}/{{key}}"]["post"]["responses"]) >= {"200", "400", "401", "404", "429"}
