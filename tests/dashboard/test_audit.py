"""The audit page's restore button, in process: a restore redirects to the log with its record
named, and a record that cannot be restored shows the log again with the reason, as a 409."""

from __future__ import annotations

import html

from api.serving.services import Services
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin


def _evaluate(person: DashClient, api_key: str) -> int:
    answer = person.client.simulate_post(
        "/v1/evaluate",
        json={"flagKey": "checkout", "userIdentifier": "u1"},
        headers={"Authorization": f"ApiKey {api_key}"},
    )
    return answer.status_code


def _restore(person: DashClient, org_id: str, audit_id: str):
    return person.post(f"/dashboard/organizations/{org_id}/audit/{audit_id}/restore", {})


def test_restoring_a_revocation_from_the_audit_page_lets_the_key_evaluate_again(
    person: DashClient, dash_admin: Admin, services: Services
) -> None:
    tenant = dash_admin.tenant()
    dash_admin.flag(tenant.environment_id, "checkout", [{"type": "STATIC", "value": True}])
    person.post(f"/dashboard/api-keys/{tenant.api_key_id}/revoke", {})
    assert _evaluate(person, tenant.api_key) == 401
    audit = f"/dashboard/organizations/{tenant.organization_id}/audit"
    [revocation] = [r for r in services.store.list_audit(tenant.organization_id)
                    if r.action == "apiKey.revoked"]  # fmt: skip
    answer = _restore(person, tenant.organization_id, revocation.id)
    restored = services.store.list_audit(tenant.organization_id)[0]
    assert (restored.action, restored.actor, restored.restored_from) == (
        "restore", "dashboard", revocation.id,
    )  # fmt: skip
    assert (answer.status_code, answer.headers["location"]) == (
        303, f"{audit}?restored={restored.id}",
    )  # fmt: skip
    assert "data-restored" in person.get(answer.headers["location"]).text
    assert _evaluate(person, tenant.api_key) == 200


def _create_and_delete_a_webhook(dash_admin: Admin, org: str) -> None:
    hook = dash_admin.request(
        "POST", f"/organizations/{org}/webhooks",
        {"url": "http://127.0.0.1:9/hook", "events": ["flag.changed"]}, expect=201,
    )  # fmt: skip
    dash_admin.request("DELETE", f"/webhooks/{hook['id']}", expect=204)


def test_a_deleted_webhook_is_not_restored_and_the_page_says_why(
    person: DashClient, dash_admin: Admin, services: Services
) -> None:
    tenant = dash_admin.tenant()
    org = tenant.organization_id
    _create_and_delete_a_webhook(dash_admin, org)
    deletion = services.store.list_audit(org)[0]
    answer = _restore(person, org, deletion.id)
    assert answer.status_code == 409
    shown = html.unescape(answer.text)
    assert "data-restore-error" in shown
    assert "a webhook's secret is not kept in the log" in shown
    assert services.store.list_audit(org)[0] == deletion  # nothing was recorded


def _rows(person: DashClient, services: Services, org: str) -> dict[str, str]:
    """Each action's newest row on the audit page, as HTML."""
    page = person.get(f"/dashboard/organizations/{org}/audit").text
    rows = {}
    for record in reversed(services.store.list_audit(org)):
        start = page.index(f'data-audit-id="{record.id}"')
        rows[record.action] = html.unescape(page[start : page.index("</tr>", start)])
    return rows


def test_the_page_offers_restore_only_where_it_can_and_warns_that_undoing_a_key_revokes_it(
    person: DashClient, dash_admin: Admin, services: Services
) -> None:
    tenant = dash_admin.tenant()
    org = tenant.organization_id
    _create_and_delete_a_webhook(dash_admin, org)
    dash_admin.request(
        "POST", f"/organizations/{org}/webhooks",
        {"url": "http://127.0.0.1:9/kept", "events": ["flag.changed"]}, expect=201,
    )  # fmt: skip
    row = _rows(person, services, org)

    for unrestorable in ("organization.created", "environment.created", "webhook.deleted"):
        assert "data-not-restorable" in row[unrestorable] and "<form" not in row[unrestorable]
    assert "a webhook's secret is not kept in the log" in row["webhook.deleted"]
    created_key = row["apiKey.created"]
    assert "This revokes the key: applications using it get 401" in created_key
    assert "Revoke (undo)" in created_key
    assert "Restore</button>" in row["webhook.created"]  # the newest: that webhook is kept


def test_a_key_already_revoked_offers_no_undo_of_its_creation_and_says_why(
    person: DashClient, dash_admin: Admin, services: Services
) -> None:
    tenant = dash_admin.tenant()
    org = tenant.organization_id
    person.post(f"/dashboard/api-keys/{tenant.api_key_id}/revoke", {})
    row = _rows(person, services, org)

    assert "Revoke (undo)" not in row["apiKey.created"] and "<form" not in row["apiKey.created"]
    assert (
        f"cannot be restored: API key '{tenant.api_key_id}' is already revoked"
        in (row["apiKey.created"])
    )
    assert "Restore</button>" in row["apiKey.revoked"]  # taking the revocation back can work


def test_the_creation_of_a_webhook_deleted_since_is_not_offered(
    person: DashClient, dash_admin: Admin, services: Services
) -> None:
    org = dash_admin.tenant().organization_id
    _create_and_delete_a_webhook(dash_admin, org)
    created = _rows(person, services, org)["webhook.created"]

    assert "<form" not in created
    assert "did not exist before that change and does not now" in created


def test_a_flag_change_naming_a_segment_deleted_since_is_not_offered_nor_restored(
    person: DashClient, dash_admin: Admin, services: Services
) -> None:
    tenant = dash_admin.tenant()
    org, env = tenant.organization_id, tenant.environment_id
    dash_admin.segment(org, "gone", ["bob"])
    dash_admin.flag(env, "checkout", [{"type": "SEGMENT", "segment": "gone"}])
    dash_admin.flag(env, "checkout", [{"type": "STATIC", "value": True}])
    dash_admin.request("DELETE", f"/organizations/{org}/segments/gone", expect=204)
    why = "names segment 'gone', which does not exist in this organization"
    [change] = [r for r in services.store.list_audit(org) if r.action == "flag.updated"]
    row = _rows(person, services, org)["flag.updated"]
    assert "<form" not in row and why in row

    answer = _restore(person, org, change.id)  # from a page shown before the deletion
    assert answer.status_code == 409
    assert why in html.unescape(answer.text) and "data-restore-error" in answer.text
