"""The third-party OFREP providers against a real server: OpenFeature's Python
``openfeature-provider-ofrep`` and the npm ``@openfeature/ofrep-web-provider`` (under Node)."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from datetime import UTC, datetime

import pytest
from openfeature import api
from openfeature.contrib.provider.ofrep import OFREPProvider
from openfeature.evaluation_context import EvaluationContext
from openfeature.exception import ErrorCode
from openfeature.flag_evaluation import Reason

from tests.support.admin import Admin, Tenant
from tests.support.server import REPO

JS_PROJECT = REPO / "tests" / "ofrep" / "js"
PLAN_LIMIT = "Plan limit exceeded. Upgrade your plan to continue."
EXPECTED = {  # flag -> (value, reason, variant) for user-1
    "static-on": (True, "STATIC", "on"),
    "segment": (True, "TARGETING_MATCH", "on"),
    "everyone": (True, "SPLIT", "on"),
    "no-rules": (False, "DEFAULT", "off"),
    "disabled": (False, "DISABLED", "off"),
}


@pytest.fixture
def tenant(module_server, module_server_admin: Admin) -> Tenant:
    admin = module_server_admin
    tenant = admin.tenant()
    admin.segment(tenant.organization_id, "beta", ["user-1"])
    env = tenant.environment_id
    admin.flag(env, "static-on", [{"type": "STATIC"}])
    admin.flag(env, "segment", [{"type": "SEGMENT", "segment": "beta"}])
    admin.flag(env, "everyone", [{"type": "PERCENTAGE", "percentage": 100}])
    admin.flag(env, "no-rules", [])
    admin.flag(env, "disabled", [{"type": "STATIC"}], enabled=False)
    admin.flag(env, "archived", [{"type": "STATIC"}], archived=True)
    module_server.wait_config_everywhere()
    return tenant


def python_client(url: str, api_key: str):  # noqa: ANN201 - openfeature.client.OpenFeatureClient
    """An OpenFeature client on its own domain, the API key set through ``headers_factory``."""
    domain = f"ofrep-{uuid.uuid4().hex}"
    provider = OFREPProvider(
        url, headers_factory=lambda: {"Authorization": f"ApiKey {api_key}"}, timeout=5
    )
    api.set_provider(provider, domain)
    return api.get_client(domain), provider


# -- Python: openfeature-provider-ofrep ---------------------------------------------------------


def test_python_provider_values_reasons_variants(module_server, tenant) -> None:
    client, _ = python_client(module_server.url, tenant.api_key)
    context = EvaluationContext("user-1")
    for flag, expected in EXPECTED.items():
        details = client.get_boolean_details(flag, not expected[0], context)
        assert (details.value, details.reason, details.variant) == expected, flag
        assert details.error_code is None
        assert len(details.flag_metadata["evaluationId"]) == 46
    archived = client.get_boolean_details("archived", True, context)
    assert (archived.value, archived.reason, archived.variant) == (False, Reason.DISABLED, "off")


def test_python_provider_error_codes(module_server, tenant) -> None:
    client, _ = python_client(module_server.url, tenant.api_key)
    missing = client.get_boolean_details("missing", True, EvaluationContext("user-1"))
    assert (missing.value, missing.reason, missing.error_code, missing.error_message) == (
        True, Reason.ERROR, ErrorCode.FLAG_NOT_FOUND, "Flag not found",
    )  # fmt: skip
    no_key = client.get_boolean_details(
        "static-on", False, EvaluationContext(attributes={"country": "FR"})
    )
    assert (no_key.value, no_key.error_code, no_key.error_message) == (
        False, ErrorCode.TARGETING_KEY_MISSING, "Field 'context.targetingKey' is required (the user identifier)",
    )  # fmt: skip
    bad_key = client.get_boolean_details("static-on", False, EvaluationContext("u" * 1025))
    assert bad_key.error_code == ErrorCode.INVALID_CONTEXT

    wrong_api_key, _ = python_client(module_server.url, "fsk_wrong")
    refused = wrong_api_key.get_boolean_details("static-on", False, EvaluationContext("user-1"))
    assert (refused.value, refused.error_code, refused.error_message) == (
        False,
        ErrorCode.GENERAL,
        "unauthorized",
    )


def test_python_provider_plan_limit_honours_retry_after(module_server, module_server_admin) -> None:
    tenant = module_server_admin.tenant(plan="enterprise", limit=1)
    module_server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    module_server.wait_config_everywhere()
    client, provider = python_client(module_server.url, tenant.api_key)
    context = EvaluationContext("user-1")
    assert client.get_boolean_value("f", False, context) is True
    limited = client.get_boolean_details("f", False, context)
    assert (limited.value, limited.error_code) == (False, ErrorCode.GENERAL)
    assert limited.error_message.startswith("Rate limited, retry after: ")
    now = datetime.now(UTC)
    next_month = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1, tzinfo=UTC)
    assert abs((provider.retry_after - next_month).total_seconds()) <= 2
    usage = module_server_admin.request(
        "GET", f"/organizations/{tenant.organization_id}/usage", expect=200
    )
    assert (usage["evaluations"], usage["blocked"]) == (1, True)


# -- JavaScript: @openfeature/ofrep-web-provider under Node -------------------------------------


def run_web_provider(url: str, api_key: str, context: dict, flags: list[str]) -> dict:
    if shutil.which("node") is None or not (JS_PROJECT / "node_modules" / "@openfeature").is_dir():
        pytest.fail("node and tests/ofrep/js/node_modules are required: run `make node-deps`")
    config = {"baseUrl": url, "apiKey": api_key, "context": context, "flags": flags}
    done = subprocess.run(
        ["node", "ofrep-web.mjs", json.dumps(config)],
        cwd=JS_PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_web_provider_values_reasons_and_304_on_unchanged_bulk(module_server, tenant) -> None:
    flags = [*EXPECTED, "archived", "missing"]
    out = run_web_provider(module_server.url, tenant.api_key, {"targetingKey": "user-1"}, flags)
    assert out["initError"] is None
    for flag, expected in EXPECTED.items():
        got = out["first"][flag]
        assert (got["value"], got["reason"], got["variant"], got["errorCode"]) == (
            *expected,
            None,
        ), flag
        assert len(got["evaluationId"]) == 46
    # an archived flag answers as through the server provider; a missing one is not found
    archived = out["first"]["archived"]
    assert (archived["value"], archived["reason"], archived["variant"], archived["errorCode"]) == (
        False,
        "DISABLED",
        "off",
        None,
    )
    missing = out["first"]["missing"]
    assert (missing["value"], missing["reason"], missing["errorCode"]) == (
        True,
        "ERROR",
        "FLAG_NOT_FOUND",
    )

    first, revalidation = out["exchanges"]
    assert (first["method"], first["path"], first["status"]) == (
        "POST",
        "/ofrep/v1/evaluate/flags",
        200,
    )
    assert first["authorization"] == f"ApiKey {tenant.api_key}"
    assert first["etag"] and first["ifNoneMatch"] is None
    assert (revalidation["ifNoneMatch"], revalidation["status"], revalidation["etag"]) == (
        first["etag"],
        304,
        first["etag"],
    )
    assert out["afterRefresh"] == out["first"]


def test_web_provider_sees_a_new_answer_for_another_user(module_server, tenant) -> None:
    out = run_web_provider(
        module_server.url, tenant.api_key, {"targetingKey": "user-2"}, ["segment", "static-on"]
    )
    assert (out["first"]["segment"]["value"], out["first"]["segment"]["reason"]) == (
        False,
        "DEFAULT",
    )
    assert (out["first"]["static-on"]["value"], out["first"]["static-on"]["reason"]) == (
        True,
        "STATIC",
    )


def test_web_provider_missing_targeting_key(module_server, tenant) -> None:
    out = run_web_provider(module_server.url, tenant.api_key, {"country": "FR"}, ["static-on"])
    assert out["initError"] is not None
    assert out["exchanges"][0]["status"] == 400
    assert out["first"]["static-on"]["value"] is True  # the caller's default
    assert out["first"]["static-on"]["errorCode"] is not None


def test_web_provider_plan_limit_is_429_with_retry_after(
    module_server, module_server_admin
) -> None:
    tenant = module_server_admin.tenant(plan="enterprise", limit=1)
    module_server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    module_server_admin.flag(tenant.environment_id, "g", [{"type": "STATIC"}])
    module_server.wait_config_everywhere()
    out = run_web_provider(
        module_server.url, tenant.api_key, {"targetingKey": "user-1"}, ["f", "g"]
    )
    assert out["initError"] is None
    assert (out["first"]["f"]["value"], out["first"]["f"]["reason"]) == (True, "STATIC")
    assert (out["first"]["g"]["value"], out["first"]["g"]["errorCode"]) == (
        True,
        "GENERAL",
    )  # the default
    assert out["first"]["g"]["errorMessage"] == PLAN_LIMIT
    first, second = out["exchanges"]
    assert first["status"] == 200 and first["etag"] is None  # partly refused: not cacheable
    assert (
        second["status"] == 429 and second["retryAfter"].isdigit() and int(second["retryAfter"]) > 0
    )
