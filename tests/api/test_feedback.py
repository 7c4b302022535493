"""POST /v1/feedback/report and /v1/feedback/bulk: spec 4.3, 4.4 and contract section 3."""

from __future__ import annotations

import string

import pytest

from api.eventlog import EventLogUnavailable
from tests.support.admin import Tenant


def auth(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"ApiKey {tenant.api_key}"}


def evaluation_id(client, tenant: Tenant, flag: str = "f", user: str = "user-1") -> str:
    result = client.simulate_post(
        "/v1/evaluate", json={"flagKey": flag, "userIdentifier": user}, headers=auth(tenant)
    )
    return result.json["evaluationId"]


def report(client, tenant, body):
    return client.simulate_post("/v1/feedback/report", json=body, headers=auth(tenant))


def bulk(client, tenant, items):
    return client.simulate_post(
        "/v1/feedback/bulk", json={"feedbacks": items}, headers=auth(tenant)
    )


def bad_request(message: str) -> tuple[int, dict]:
    return 400, {"status": 400, "error": "Bad Request", "message": message}


def test_report_is_204_without_body(client, tenant) -> None:
    result = report(
        client,
        tenant,
        {
            "evaluationId": evaluation_id(client, tenant),
            "result": True,
            "latencyMs": 120.5,
            "errorType": None,
        },
    )
    assert (result.status_code, result.content) == (204, b"")


def test_bulk_is_204_and_zero_items_too(client, tenant) -> None:
    items = [
        {"evaluationId": evaluation_id(client, tenant, user=f"u{i}"), "result": i % 2 == 0}
        for i in range(3)
    ]
    assert (bulk(client, tenant, items).status_code, bulk(client, tenant, items).content) == (
        204,
        b"",
    )
    assert bulk(client, tenant, []).status_code == 204


def test_feedback_is_refused_while_insights_is_off(client, admin) -> None:
    tenant = admin.tenant(insights=False)
    body = {"evaluationId": evaluation_id(client, tenant), "result": True}
    expected = {
        "status": 403,
        "error": "Forbidden",
        "message": "Insights feature is not enabled for this environment",
    }
    assert (report(client, tenant, body).status_code, report(client, tenant, body).json) == (
        403,
        expected,
    )
    assert (bulk(client, tenant, [body]).status_code, bulk(client, tenant, [body]).json) == (
        403,
        expected,
    )


def test_switching_insights_on_lets_feedback_in(client, admin) -> None:
    tenant = admin.tenant(insights=False)
    admin.request(
        "PATCH", f"/environments/{tenant.environment_id}", {"insightsEnabled": True}, expect=200
    )
    assert (
        report(
            client, tenant, {"evaluationId": evaluation_id(client, tenant), "result": False}
        ).status_code
        == 204
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"evaluationId": None}, "Field 'evaluationId' is required and must be a string"),
        ({"evaluationId": "made-up-id"}, "Field 'evaluationId' was not issued by this service"),
        ({"result": None}, "Field 'result' is required and must be a boolean"),
        ({"result": "true"}, "Field 'result' is required and must be a boolean"),
        ({"result": 1}, "Field 'result' is required and must be a boolean"),
        ({"latencyMs": -1}, "Field 'latencyMs' must be a finite number >= 0 or null"),
        ({"latencyMs": "12"}, "Field 'latencyMs' must be a finite number >= 0 or null"),
        ({"latencyMs": True}, "Field 'latencyMs' must be a finite number >= 0 or null"),
        ({"errorType": 5}, "Field 'errorType' must be a string of at most 256 characters or null"),
        (
            {"errorType": "e" * 257},
            "Field 'errorType' must be a string of at most 256 characters or null",
        ),
    ],
)
def test_invalid_feedback_is_400_naming_the_field(client, tenant, change, message) -> None:
    body = {"evaluationId": evaluation_id(client, tenant), "result": True, **change}
    assert (
        report(client, tenant, body).status_code,
        report(client, tenant, body).json,
    ) == bad_request(message)


def test_another_spelling_of_an_issued_id_is_400(client, tenant) -> None:
    """The same bytes with the last base64 character's spare bits set, or in base64's "+/"
    alphabet, are not the id the evaluation was given: their feedback could never meet it."""
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    issued = evaluation_id(client, tenant)
    spare_bits_set = issued[:41] + alphabet[alphabet.index(issued[41]) + 1] + issued[42:]
    standard = issued[:42].replace("-", "+").replace("_", "/") + issued[42:]
    for other in {spare_bits_set, standard} - {issued}:
        answer = report(client, tenant, {"evaluationId": other, "result": True})
        assert (answer.status_code, answer.json) == bad_request(
            "Field 'evaluationId' was not issued by this service"
        )


def test_zero_latency_and_null_fields_are_valid(client, tenant) -> None:
    body = {
        "evaluationId": evaluation_id(client, tenant),
        "result": True,
        "latencyMs": 0,
        "errorType": None,
    }
    assert report(client, tenant, body).status_code == 204


def test_an_evaluation_of_another_environment_is_refused(client, admin, tenant) -> None:
    other = admin.tenant(organization_id=tenant.organization_id, environment="staging")
    body = {"evaluationId": evaluation_id(client, other), "result": True}
    assert (
        report(client, tenant, body).json
        == bad_request(
            "Field 'evaluationId' was issued for another environment than this API key's"
        )[1]
    )


def test_bulk_is_validated_whole_and_names_every_bad_index(client, tenant, services) -> None:
    good = {"evaluationId": evaluation_id(client, tenant), "result": True}
    stored_before = services.metrics.feedback_events._value.get()
    result = bulk(
        client,
        tenant,
        [good, {"evaluationId": "nope", "result": True}, good, {**good, "result": "yes"}],
    )
    assert result.status_code == 400
    assert result.json["message"] == (
        "Invalid items at indexes 1, 3; nothing was stored: "
        "Field 'feedbacks[1].evaluationId' was not issued by this service; "
        "Field 'feedbacks[3].result' is required and must be a boolean"
    )
    assert services.metrics.feedback_events._value.get() == stored_before


def test_bulk_over_500_items_is_400(client, tenant) -> None:
    item = {"evaluationId": evaluation_id(client, tenant), "result": True}
    result = bulk(client, tenant, [item] * 501)
    assert result.json == bad_request("Field 'feedbacks' has 501 items; at most 500 are allowed")[1]
    assert bulk(client, tenant, [item] * 500).status_code == 204


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Field 'feedbacks' is required"),
        ({"feedbacks": {}}, "Field 'feedbacks' must be an array"),
    ],
)
def test_bulk_shape_errors(client, tenant, body, message) -> None:
    result = client.simulate_post("/v1/feedback/bulk", json=body, headers=auth(tenant))
    assert (result.status_code, result.json) == bad_request(message)


class _RefusingLog:
    """The one boundary faked here: an event log whose disk refuses writes."""

    def __init__(self, real):
        self.real = real

    def append_evaluations(self, events):
        raise EventLogUnavailable("disk full")

    def append_evaluation_batch(self, batch):
        raise EventLogUnavailable("disk full")

    def append_evaluation_frame(self, frame, count):
        raise EventLogUnavailable("disk full")

    def append_feedback(self, events):
        raise EventLogUnavailable("disk full")

    def unready_reason(self):
        return "disk full"

    def start(self):
        pass

    def close(self):
        self.real.close()


def test_when_the_log_refuses_feedback_is_503_and_evaluate_still_answers(
    client, admin, tenant, services
) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    eid = evaluation_id(client, tenant)
    services.event_log = _RefusingLog(services.event_log)
    result = report(client, tenant, {"evaluationId": eid, "result": True})
    assert result.status_code == 503
    assert result.json["error"] == "Service Unavailable" and result.headers["Retry-After"] == "1"
    answer = client.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=auth(tenant)
    )
    assert (answer.status_code, answer.json["value"]) == (200, True)
    metrics = client.simulate_get("/metrics").text
    assert 'flagsight_events_lost_total{type="evaluation"} 1.0' in metrics
    ready = client.simulate_get("/readyz")  # readiness agrees with the 503
    assert ready.status_code == 503 and "disk full" in ready.json["checks"]["eventLog"]
