"""A webhook stored before user information was refused (``user:pass@`` in its URL), in the
dashboard, in process: the webhooks page and the audit log show it masked
(``webhook_targets.shown_url``), recognisable, never its password or user name."""

from __future__ import annotations

import html

import pytest

from api.serving.services import Services
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin, Tenant
from tests.support.legacy_webhook import PASSWORD, SHOWN_URL, USER, insert_legacy_webhook


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    return dash_admin.tenant()


@pytest.fixture
def hook_id(tenant: Tenant, services: Services) -> str:
    return insert_legacy_webhook(services.store, tenant.organization_id)


def shown(page: str) -> str:
    """The page as a browser has it (entities decoded), attributes and scripts included."""
    text = html.unescape(page)
    assert PASSWORD not in text and USER not in text
    return text


def test_the_webhooks_page_lists_it_masked(
    person: DashClient, tenant: Tenant, hook_id: str
) -> None:
    page = person.get(f"/dashboard/organizations/{tenant.organization_id}/webhooks")
    assert page.status_code == 200
    text = shown(page.text)
    row = text[text.index(f'<tr data-webhook="{hook_id}">') :]
    row = row[: row.index("</tr>")]
    assert f'<code class="url">{SHOWN_URL}</code>' in row and hook_id in row
    assert f"Delete the webhook to {SHOWN_URL}?" in row  # the confirmation names it too


def test_the_audit_page_shows_its_creation_and_deletion_masked(
    person: DashClient, tenant: Tenant, hook_id: str, services: Services
) -> None:
    org = tenant.organization_id
    audit = f"/dashboard/organizations/{org}/audit"
    assert f'"url": "{SHOWN_URL}"' in shown(person.get(audit).text)  # the record made before

    person.get(f"/dashboard/organizations/{org}/webhooks")
    deleted = person.post(f"/dashboard/organizations/{org}/webhooks/{hook_id}/delete", {})
    assert deleted.status_code == 303
    page = shown(person.get(audit).text)
    assert page.count(f'"url": "{SHOWN_URL}"') == 2  # its creation's and its deletion's

    deletion = services.store.list_audit(org)[0]
    assert deletion.action == "webhook.deleted"
    refused = person.post(f"{audit}/{deletion.id}/restore", {})
    assert refused.status_code == 409
    assert "a webhook's secret is not kept in the log" in shown(refused.text)
