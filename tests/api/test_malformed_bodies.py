"""Bodies that used to make 500 (issue 12): invalid UTF-8 inside a JSON string, nesting 2,000+
levels deep, a 400-digit number where a float is expected. Each is a 400 with the contract's
body on every endpoint that reads JSON: the public API, OFREP and the admin API."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Tenant

DEEP = 2_500
BODIES = {
    "invalid UTF-8 in a string value": b'{"flagKey":"f\xff\xfe","userIdentifier":"u"}',
    "invalid UTF-8 in a field name": b'{"fl\xffagKey":"f","userIdentifier":"u"}',
    "arrays nested 2,500 deep": b"[" * DEEP + b"]" * DEEP,
    "objects nested 2,500 deep": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
}


def endpoints(tenant: Tenant) -> list[tuple[str, str, dict[str, str]]]:
    key = {"Authorization": f"ApiKey {tenant.api_key}"}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    org, env = tenant.organization_id, tenant.environment_id
    return [
        ("POST", "/v1/evaluate", key),
        ("POST", "/v1/evaluate/bulk", key),
        ("POST", "/v1/feedback/report", key),
        ("POST", "/v1/feedback/bulk", key),
        ("POST", "/v1/track", key),
        ("POST", "/ofrep/v1/evaluate/flags/f", key),
        ("POST", "/ofrep/v1/evaluate/flags", key),
        ("POST", "/admin/v1/organizations", admin),
        ("PATCH", f"/admin/v1/organizations/{org}", admin),
        ("POST", f"/admin/v1/organizations/{org}/environments", admin),
        ("PATCH", f"/admin/v1/environments/{env}", admin),
        ("POST", f"/admin/v1/environments/{env}/api-keys", admin),
        ("PUT", f"/admin/v1/organizations/{org}/segments/s", admin),
        ("PUT", f"/admin/v1/environments/{env}/flags/f", admin),
    ]


@pytest.mark.parametrize("name", BODIES)
def test_a_malformed_body_is_400_with_the_contract_body_everywhere(
    client, tenant: Tenant, name: str
) -> None:
    for method, path, auth in endpoints(tenant):
        headers = {**auth, "Content-Type": "application/json"}
        answer = client.simulate_request(method, path, body=BODIES[name], headers=headers)
        assert answer.status_code == 400, (name, method, path, answer.status_code, answer.text)
        assert answer.json["status"] == 400 and answer.json["error"] == "Bad Request"
        assert answer.json["message"], (name, path)


@pytest.mark.parametrize("digits", [b"9" * 400, b"-" + b"9" * 400])
def test_a_400_digit_latency_is_400_naming_the_field(client, tenant: Tenant, digits) -> None:
    key = {"Authorization": f"ApiKey {tenant.api_key}", "Content-Type": "application/json"}
    issued = client.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=key
    ).json["evaluationId"]
    item = b'{"evaluationId":"%s","result":true,"latencyMs":%s}' % (issued.encode(), digits)
    single = client.simulate_post("/v1/feedback/report", body=item, headers=key)
    assert single.status_code == 400, single.text
    assert "latencyMs" in single.json["message"]
    bulk = client.simulate_post("/v1/feedback/bulk", body=b'{"feedbacks":[%s]}' % item, headers=key)
    assert bulk.status_code == 400, bulk.text
    assert "feedbacks[0].latencyMs" in bulk.json["message"]


@pytest.mark.parametrize(
    ("field", "body"),
    [
        (
            "rules[0].percentage",
            b'{"enabled":true,"rules":[{"type":"PERCENTAGE","percentage":%s}]}',
        ),
        ("monthlyEvaluationLimit", b'{"plan":"enterprise","monthlyEvaluationLimit":%s}'),
    ],
)
def test_a_400_digit_number_in_the_admin_api_is_400(client, tenant: Tenant, field, body) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
    path = (
        f"/admin/v1/environments/{tenant.environment_id}/flags/f"
        if field.startswith("rules")
        else f"/admin/v1/organizations/{tenant.organization_id}"
    )
    method = "PUT" if field.startswith("rules") else "PATCH"
    answer = client.simulate_request(method, path, body=body % (b"9" * 400), headers=admin)
    assert answer.status_code == 400, answer.text
    assert field in answer.json["message"]
