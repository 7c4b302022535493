"""``flagsight metrics`` and ``flagsight flags metrics`` as a user runs them against a real
gunicorn server (contract 13): what each prints, and its exit status."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_admin_commands import flagsight, ok
from tests.support.admin import Admin, Tenant
from tests.support.server import GunicornServer

CHECKOUT = ["--name", "Checkout", "--event", "checkout", "--kind", "conversion",
            "--window-hours", "72", "--better", "higher"]  # fmt: skip


@pytest.fixture
def tenant(module_server_admin: Admin) -> Tenant:
    """A fresh organization with a ``production`` environment and a flag with a percentage."""
    made = module_server_admin.tenant()
    rules = [{"type": "PERCENTAGE", "percentage": 0, "value": True}]
    module_server_admin.flag(made.environment_id, "new-checkout", rules)
    return made


@pytest.fixture
def where(module_server: GunicornServer, tenant: Tenant) -> list[str]:
    return ["--url", module_server.url, "--org", tenant.organization_id]


def test_metrics_put_list_show_and_delete(
    where: list[str], tenant: Tenant, module_server_admin: Admin
) -> None:
    assert ok(flagsight("metrics", "list", *where)) == (
        f"No metrics in organization {tenant.organization_id}.\n"
    )
    created = ok(flagsight("metrics", "put", "checkout", *CHECKOUT, *where))
    assert created.startswith("Created metric 'checkout'.\nmetric   checkout\n")
    assert "window   72 hours after a user's first exposure" in created

    changed = ok(flagsight("metrics", "put", "checkout", "--window-hours", "24", *where))
    assert changed.startswith("Changed metric 'checkout'.")
    path = f"/organizations/{tenant.organization_id}/metrics/checkout"
    stored = module_server_admin.request("GET", path, expect=200)
    assert (stored["windowHours"], stored["name"], stored["kind"]) == (24, "Checkout", "conversion")

    listed = ok(flagsight("metrics", "list", *where)).splitlines()
    assert listed[0].split() == ["KEY", "NAME", "EVENT", "KIND", "WINDOW", "BETTER", "UPDATED"]
    assert listed[1].split()[:7] == ["checkout", "Checkout", "checkout", "conversion", "24", "h",
                                     "higher"]  # fmt: skip
    assert json.loads(ok(flagsight("metrics", "show", "checkout", "--json", *where))) == stored

    assert ok(flagsight("metrics", "delete", "checkout", *where)) == (
        "Deleted metric 'checkout'; no flag follows it any more.\n"
    )
    gone = flagsight("metrics", "show", "checkout", *where)
    assert (gone.returncode, gone.stderr) == (
        1, "flagsight: 404 Not Found: Metric 'checkout' does not exist in organization"
        f" '{tenant.organization_id}'\n",
    )  # fmt: skip


def test_a_new_metric_missing_a_field_is_the_apis_400(where: list[str]) -> None:
    refused = flagsight("metrics", "put", "revenue", "--name", "Revenue", *where)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "flagsight: 400 Bad Request: Field 'event' is required\n"


def test_flags_metrics_shows_and_sets_what_a_flag_follows(where: list[str], tenant: Tenant) -> None:
    ok(flagsight("metrics", "put", "checkout", *CHECKOUT, *where))
    ok(flagsight("metrics", "put", "errors", *CHECKOUT[:2], "--event", "error", "--kind",
                 "count", "--window-hours", "1", "--better", "lower", *where))  # fmt: skip
    env = f"production ({tenant.environment_id})"
    shown = ok(flagsight("flags", "metrics", "new-checkout", *where))
    assert shown == f"Flag 'new-checkout' in {env} follows no metric.\n"
    set_ = ok(flagsight("flags", "metrics", "new-checkout", "errors", "checkout", *where))
    assert set_ == f"Flag 'new-checkout' in {env} now follows errors, checkout.\n"
    as_json = json.loads(ok(flagsight("flags", "metrics", "new-checkout", "--json", *where)))
    assert as_json == {"metrics": ["errors", "checkout"]}

    unknown = flagsight("flags", "metrics", "new-checkout", "ghost", *where)
    assert (unknown.returncode, unknown.stderr) == (
        1, "flagsight: 400 Bad Request: Field 'metrics[0]' names metric 'ghost', which does not"
        " exist in this organization\n",
    )  # fmt: skip
    both = flagsight("flags", "metrics", "new-checkout", "checkout", "--clear", *where)
    assert (both.returncode, both.stderr) == (
        2, "flagsight: give metric keys or --clear, not both\n",
    )  # fmt: skip
    cleared = ok(flagsight("flags", "metrics", "new-checkout", "--clear", *where))
    assert cleared == f"Flag 'new-checkout' in {env} now follows no metric.\n"


def test_a_rollout_guards_on_a_metric_which_then_is_not_deleted(where: list[str]) -> None:
    ok(flagsight("metrics", "put", "checkout", *CHECKOUT, *where))
    started = ok(
        flagsight("rollout", "start", "new-checkout", "--guardrails", "failureRate,metric:checkout",
                  "--tolerances", "metric:checkout=0.5", *where)
    )  # fmt: skip
    assert (
        "guardrails  failureRate (tolerance 1 pp), metric:checkout (tolerance 0.5 in the"
        " metric's unit)"
    ) in started
    refused = flagsight("metrics", "delete", "checkout", *where)
    assert (refused.returncode, refused.stderr) == (
        1, "flagsight: 409 Conflict: Metric 'checkout' is guarded on by the rollout of flag"
        " 'new-checkout' in environment 'production'; stop that rollout first\n",
    )  # fmt: skip
    unknown = flagsight("rollout", "start", "new-checkout", "--guardrails", "metric:ghost", *where)
    assert unknown.stderr == (
        "flagsight: 400 Bad Request: Field 'guardrails[0]' guards on metric 'ghost', which does"
        " not exist in this organization\n"
    )
