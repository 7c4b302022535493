"""/openapi.json describes every public and admin endpoint, and real answers conform to it."""

from __future__ import annotations

import re

import pytest

from tests.support.openapi import OpenApiChecker


@pytest.fixture(scope="module")
def checker() -> OpenApiChecker:
    return OpenApiChecker()


def _routes(app) -> set[str]:
    """Every URI template the app's router knows."""
    found: set[str] = set()

    def walk(nodes) -> None:
        for node in nodes:
            if node.resource is not None:
                found.add(node.uri_template)
            walk(node.children)

    walk(app._router._roots)
    return found


def test_the_served_document_is_openapi_3_1(client) -> None:
    document = client.simulate_get("/openapi.json").json
    assert document["openapi"] == "3.1.0"
    assert document == OpenApiChecker().document


def _shape(template: str) -> str:
    return re.sub(r"\{[^/]+\}", "{}", template)


def test_every_api_route_is_documented(client, checker) -> None:
    documented = {_shape(path) for path in checker.document["paths"]}
    undocumented = {
        route
        for route in _routes(client.app.app)  # the Falcon app behind api.web.front
        if not route.startswith(("/dashboard", "/favicon.ico"))  # pages for a browser
        and _shape(route) not in documented
    }
    assert undocumented == set()


def test_public_answers_conform(client, admin, tenant, checker) -> None:
    admin.flag(tenant.environment_id, "f", [{"type": "PERCENTAGE", "percentage": 50}])
    admin.flag(tenant.environment_id, "off", [], enabled=False)
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    eid = client.simulate_post(
        "/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=auth
    ).json["evaluationId"]
    calls = [
        ("POST", "/v1/evaluate", {"flagKey": "f", "userIdentifier": "u1"}, auth),
        ("POST", "/v1/evaluate", {"flagKey": "off", "userIdentifier": "u1"}, auth),
        ("POST", "/v1/evaluate", {"flagKey": "missing", "userIdentifier": "u1"}, auth),
        ("POST", "/v1/evaluate", {"flagKey": 1}, auth),
        ("POST", "/v1/evaluate", {"flagKey": "f", "userIdentifier": "u1"}, {}),
        ("POST", "/v1/evaluate/bulk", {"flagKey": "f", "userIdentifiers": ["a", "b"]}, auth),
        ("POST", "/v1/evaluate/bulk", {"flagKey": "f", "userIdentifiers": "a"}, auth),
        (
            "POST",
            "/v1/feedback/report",
            {"evaluationId": eid, "result": True, "latencyMs": 3},
            auth,
        ),
        ("POST", "/v1/feedback/report", {"evaluationId": "x", "result": True}, auth),
        (
            "POST",
            "/v1/feedback/bulk",
            {"feedbacks": [{"evaluationId": eid, "result": False}]},
            auth,
        ),
        ("POST", "/v1/feedback/bulk", {"feedbacks": []}, auth),
        ("POST", "/v1/track", {"events": [{"name": "checkout", "userIdentifier": "u"}]}, auth),
        ("POST", "/v1/track", {"events": [{"name": "checkout", "value": 1}]}, auth),
        ("GET", "/healthz", None, {}),
        ("GET", "/readyz", None, {}),
    ]
    statuses = set()
    for method, path, body, headers in calls:
        result = client.simulate_request(method, path, json=body, headers=headers)
        checker.check(
            path,
            method,
            result.status_code,
            result.json if result.content else None,
            result.content,
        )
        statuses.add(result.status_code)
    assert statuses == {200, 204, 400, 401}


def test_docs_api_md_documents_every_public_and_ofrep_operation_with_its_statuses() -> None:
    """``docs/api.md`` (linked from the README) has a section per /v1 and OFREP operation of
    the served document, naming each status the document gives it, and valid JSON examples."""
    import json
    import re
    from pathlib import Path

    from api.web.openapi.document import openapi_document

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "api.md").read_text()
    assert "docs/api.md" in (root / "README.md").read_text()
    sections = dict(re.findall(r"^## `(\w+ /\S+)`\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    for path, item in openapi_document()["paths"].items():
        if not path.startswith(("/v1/", "/ofrep/")):
            continue
        for method, operation in item.items():
            section = sections.get(f"{method.upper()} {path}")
            assert section is not None, f"{method.upper()} {path}"
            for status in operation["responses"]:
                assert status in section or status in text.split("## `")[0], (path, status)
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        json.loads(block)
