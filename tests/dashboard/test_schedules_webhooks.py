"""A flag's schedules and an organization's webhooks in the dashboard, in process: what the
admin API allows, with its refusals in its words, and what a person sees after each step."""

from __future__ import annotations

import dataclasses
import html
import json
import re
import time
from datetime import UTC, datetime

import pytest

from api.controlplane.changes import ScheduleState
from api.jobs.schedules import apply_due
from api.serving.services import Services
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin, Tenant


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    tenant = dash_admin.tenant()
    dash_admin.segment(tenant.organization_id, "beta", ["alice"])
    dash_admin.flag(tenant.environment_id, "checkout", [{"type": "STATIC", "value": True}])
    return tenant


def schedules_url(tenant: Tenant, flag: str = "checkout") -> str:
    return f"/dashboard/environments/{tenant.environment_id}/flags/{flag}/schedules"


def webhooks_url(tenant: Tenant) -> str:
    return f"/dashboard/organizations/{tenant.organization_id}/webhooks"


def text(result) -> str:  # noqa: ANN001 - falcon.testing.Result
    """The page's text as a person reads it: tags dropped, entities decoded, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", result.text)).split())


def field_error(result, field_id: str) -> str:  # noqa: ANN001
    found = re.search(rf'<p class="field-error" id="{field_id}-error">(.*?)</p>', result.text)
    assert found, f"no error under {field_id}"
    return html.unescape(re.sub(r"<[^>]+>", "", found[1])).replace("⚠ ", "").strip()


# --- schedules --------------------------------------------------------------------------------


def test_the_flag_editor_links_to_its_schedules_with_the_pending_count(
    person: DashClient, tenant: Tenant
) -> None:
    editor = person.get(f"/dashboard/environments/{tenant.environment_id}/flags/checkout")
    assert f'href="{schedules_url(tenant)}" data-schedules-link>Schedules</a>' in editor.text
    person.get(schedules_url(tenant))
    person.post(schedules_url(tenant), {"at": "2099-01-01T09:00", "rules": "[]"})
    editor = person.get(f"/dashboard/environments/{tenant.environment_id}/flags/checkout")
    assert "Schedules (1 pending)" in text(editor)
    flags = person.get(f"/dashboard/environments/{tenant.environment_id}/flags")
    assert f'href="{schedules_url(tenant)}">Schedules' in flags.text


def test_the_form_starts_from_the_flag_as_it_is_and_the_next_full_hour(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    page = person.get(schedules_url(tenant))
    assert page.status_code == 200
    assert "No schedules for this flag yet." in page.text
    assert 'id="schedule-enabled" name="enabled" checked' in page.text
    assert 'id="schedule-archived" name="archived">' in page.text
    assert '{"type":"STATIC","value":true}' in html.unescape(page.text)
    hour = time.strftime("%Y-%m-%dT%H:00", time.gmtime(services.clock() + 3600))
    assert f'name="at" type="datetime-local" value="{hour}"' in page.text


def test_scheduling_lists_the_change_and_it_is_applied_at_its_time(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(schedules_url(tenant))
    answer = person.post(
        schedules_url(tenant),
        {"at": "2099-03-01T08:30", "archived": "on",
         "rules": '[{"type": "SEGMENT", "segment": "beta", "value": false}]'},
    )  # fmt: skip
    assert answer.status_code == 303
    [made] = services.store.list_schedules(tenant.environment_id, "checkout")
    assert answer.headers["location"] == f"{schedules_url(tenant)}?created={made.id}"
    assert (made.flag.enabled, made.flag.archived, made.state) == (
        False, True, ScheduleState.PENDING,
    )  # fmt: skip
    assert made.at == datetime(2099, 3, 1, 8, 30, tzinfo=UTC).timestamp()  # no offset: UTC
    page = person.get(answer.headers["location"])
    row = re.search(rf'<tr data-schedule="{made.id}".*?</tr>', page.text, re.S)[0]
    notice = re.search(r"<p [^>]*data-created>(.*?)</p>", page.text)[1]
    assert made.id in notice and "applies it within a second of its time" in notice
    row_text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
    assert "2099-03-01 08:30:00 UTC" in row_text
    assert "Disabled Archived 1 rule" in row_text and "Pending" in row_text
    assert '{"type":"SEGMENT","segment":"beta","value":false}' in html.unescape(row)
    audit = services.store.list_audit(tenant.organization_id)[0]
    assert (audit.action, audit.actor) == ("schedule.created", "dashboard")

    person.post(schedules_url(tenant), {"at": "2000-01-01T00:00:00Z", "enabled": "on",
                                        "rules": "[]"})  # fmt: skip
    assert apply_due(services) == 1
    flag = services.store.get_flag(tenant.environment_id, "checkout")
    assert (flag.enabled, flag.archived, flag.rules) == (True, False, ())
    page = person.get(schedules_url(tenant))
    applied = re.search(r'<tr data-schedule="[^"]+" data-state="applied">.*?</tr>', page.text, re.S)
    assert applied and "Applied" in applied[0]
    assert "/cancel" not in applied[0]  # only a pending schedule offers Cancel


def test_a_failed_schedule_shows_why_in_the_admin_apis_words(
    person: DashClient, dash_admin: Admin, tenant: Tenant, services: Services
) -> None:
    person.get(schedules_url(tenant))
    rules = '[{"type": "SEGMENT", "segment": "beta"}]'
    person.post(schedules_url(tenant), {"at": "2000-01-01T00:00", "rules": rules})
    dash_admin.request("DELETE", f"/organizations/{tenant.organization_id}/segments/beta")
    assert apply_due(services) == 1  # failed: its rule names a segment no longer there
    page = person.get(schedules_url(tenant))
    shown = re.search(r'data-state="failed">.*?<span [^>]*data-schedule-error>(.*?)</span>',
                      page.text, re.S)  # fmt: skip
    why = "Field 'rules[0].segment' names segment 'beta', which does not exist in this organization"
    assert shown and html.unescape(shown[1]) == why
    path = f"/environments/{tenant.environment_id}/flags/checkout/schedules"
    assert dash_admin.request("GET", path)["items"][0]["error"] == why  # the admin API's words


REFUSED_SCHEDULES = {
    "a time that is not one": ("soon", "[]", "schedule-at",
                               "Field 'at' must be an ISO-8601 time, e.g. 2026-01-31T09:00:00Z"),
    "a percentage over 100": ("2099-01-01T00:00", '[{"type": "PERCENTAGE", "percentage": 101}]',
                              "schedule-rules", "Field 'flag.rules[0].percentage'"),
    "a segment that does not exist": ("2099-01-01T00:00",
                                      '[{"type": "SEGMENT", "segment": "nobody"}]',
                                      "schedule-rules", "'nobody'"),
    "rules that are not a list": ("2099-01-01T00:00", '{"type": "STATIC"}', "schedule-rules",
                                  "Field 'flag.rules' must be an array"),
    "rules that are not JSON": ("2099-01-01T00:00", "[{", "schedule-rules",
                                "Field 'flag.rules' is not valid JSON"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED_SCHEDULES))
def test_a_refused_schedule_shows_the_admin_apis_words_and_keeps_the_draft(
    person: DashClient, dash_admin: Admin, tenant: Tenant, services: Services, case: str
) -> None:
    at, rules, field, message = REFUSED_SCHEDULES[case]
    person.get(schedules_url(tenant))
    answer = person.post(schedules_url(tenant), {"at": at, "rules": rules})
    assert answer.status_code == 400
    shown = field_error(answer, field)
    assert message in shown
    assert "Not scheduled" in text(answer)
    assert f">{rules}</textarea>" in html.unescape(answer.text)  # the draft, to correct
    assert services.store.list_schedules(tenant.environment_id, "checkout") == []
    if case != "rules that are not JSON":  # the admin API takes JSON whole: no such case
        admin = dash_admin.request(
            "POST", f"/environments/{tenant.environment_id}/flags/checkout/schedules",
            {"at": at if at == "soon" else f"{at}Z",
             "flag": {"enabled": False, "rules": json.loads(rules)}},
        )  # fmt: skip
        assert admin["message"] == shown  # the same words as the admin API's


def test_cancelling_a_pending_schedule_and_a_second_cancel_says_why(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(schedules_url(tenant))
    person.post(schedules_url(tenant), {"at": "2099-01-01T09:00", "rules": "[]"})
    [made] = services.store.list_schedules(tenant.environment_id, "checkout")
    cancel = f"{schedules_url(tenant)}/{made.id}/cancel"
    answer = person.post(cancel, {})
    assert answer.headers["location"] == f"{schedules_url(tenant)}?cancelled={made.id}"
    page = person.get(answer.headers["location"])
    assert f"Schedule {made.id} cancelled" in text(page)
    assert re.search(rf'data-schedule="{made.id}" data-state="cancelled"', page.text)
    [after] = services.store.list_schedules(tenant.environment_id, "checkout")
    assert after.state == ScheduleState.CANCELLED
    again = person.post(cancel, {})
    assert again.status_code == 404
    assert f"No pending schedule '{made.id}' for flag 'checkout'" in text(again)


def test_a_deleted_flags_schedules_stay_listed_and_cancellable(
    person: DashClient, dash_admin: Admin, tenant: Tenant, services: Services
) -> None:
    person.get(schedules_url(tenant))
    person.post(schedules_url(tenant), {"at": "2099-01-01T09:00", "enabled": "on", "rules": "[]"})
    [made] = services.store.list_schedules(tenant.environment_id, "checkout")
    dash_admin.request("DELETE", f"/environments/{tenant.environment_id}/flags/checkout", None, 204)
    page = person.get(schedules_url(tenant))
    assert page.status_code == 200
    assert "This flag does not exist now" in text(page) and "Edit the flag" not in page.text
    assert person.post(f"{schedules_url(tenant)}/{made.id}/cancel", {}).status_code == 303
    assert services.store.list_schedules(tenant.environment_id, "checkout")[0].state == "cancelled"


def test_schedules_of_a_missing_flag_or_environment_are_404(
    person: DashClient, tenant: Tenant
) -> None:
    assert person.get(schedules_url(tenant, "no-such-flag")).status_code == 404
    answer = person.get("/dashboard/environments/env_0000000000000000/flags/checkout/schedules")
    assert answer.status_code == 404


# --- webhooks ---------------------------------------------------------------------------------


def test_the_organization_tabs_link_to_the_webhooks(person: DashClient, tenant: Tenant) -> None:
    page = person.get(f"/dashboard/organizations/{tenant.organization_id}")
    assert f'<a href="{webhooks_url(tenant)}">Webhooks</a>' in page.text
    page = person.get(webhooks_url(tenant))
    assert f'<a href="{webhooks_url(tenant)}" aria-current="page">Webhooks</a>' in page.text
    assert "No webhooks yet." in page.text
    assert page.text.count('name="events"') == 5 and page.text.count(" checked>") == 5


def test_creating_a_webhook_shows_its_secret_once_then_lists_it_without(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    person.get(webhooks_url(tenant))
    answer = person.post(
        webhooks_url(tenant),
        [("url", "https://hooks.example.com/flagsight"), ("events", "flag.changed"),
         ("events", "usage.threshold")],
    )  # fmt: skip
    assert answer.status_code == 201
    [hook] = services.store.list_webhooks(tenant.organization_id)
    assert (hook.url, hook.events) == (
        "https://hooks.example.com/flagsight", ("flag.changed", "usage.threshold"),
    )  # fmt: skip
    secret = re.search(
        r'id="new-secret" class="secret" readonly value="(whsec_[^"]+)"', answer.text
    )
    assert secret and "shown only this once" in answer.text
    assert answer.headers["cache-control"] == "no-store"
    page = person.get(webhooks_url(tenant))
    assert secret[1] not in page.text
    row = re.search(rf'<tr data-webhook="{hook.id}">.*?</tr>', page.text, re.S)[0]
    assert "https://hooks.example.com/flagsight" in row
    assert "flag.changed" in row and "usage.threshold" in row and "rollout.held" not in row
    audit = services.store.list_audit(tenant.organization_id)[0]
    assert (audit.action, audit.actor) == ("webhook.created", "dashboard")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://user:secret@hooks.example.com/", "must not contain user information"),
        ("http://169.254.169.254/latest/meta-data", "must not point to a link-local address"),
        (" https://hooks.example.com/", "must not contain white space or control characters"),
        ("ftp://hooks.example.com/", "must be an http:// or https:// URL with a host"),
        ("https://hooks.example.com:0/", "must not use port 0"),
    ],
)
def test_a_refused_url_says_why_in_the_admin_apis_words(
    person: DashClient, dash_admin: Admin, tenant: Tenant, services: Services, url: str,
    message: str,
) -> None:  # fmt: skip
    person.get(webhooks_url(tenant))
    answer = person.post(webhooks_url(tenant), [("url", url), ("events", "flag.changed")])
    assert answer.status_code == 400
    shown = field_error(answer, "webhook-url")
    assert shown.startswith("Field 'url' ") and message in shown
    assert 'aria-invalid="true"' in answer.text
    assert services.store.list_webhooks(tenant.organization_id) == []
    admin = dash_admin.request(
        "POST", f"/organizations/{tenant.organization_id}/webhooks",
        {"url": url, "events": ["flag.changed"]},
    )  # fmt: skip
    assert admin["message"] == shown


def test_private_addresses_are_refused_unless_the_operator_allows_them(
    person: DashClient, tenant: Tenant, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        services, "settings", dataclasses.replace(services.settings, webhook_allow_private=False)
    )
    person.get(webhooks_url(tenant))
    for url, why in [("http://127.0.0.1:9000/hook", "a loopback address"),
                     ("http://10.0.0.7/hook", "a private or reserved address"),
                     ("http://localhost/hook", "a loopback address")]:  # fmt: skip
        answer = person.post(webhooks_url(tenant), [("url", url), ("events", "flag.changed")])
        assert answer.status_code == 400
        assert field_error(answer, "webhook-url") == f"Field 'url' must not point to {why}"
        assert f'value="{url}"' in answer.text  # kept, to correct
    assert "are refused" in text(answer)
    monkeypatch.undo()
    answer = person.post(
        webhooks_url(tenant), [("url", "http://10.0.0.7/hook"), ("events", "flag.changed")]
    )
    assert answer.status_code == 201
    assert "allowed on this server" in text(answer)


def test_no_event_chosen_is_refused(person: DashClient, tenant: Tenant) -> None:
    person.get(webhooks_url(tenant))
    answer = person.post(webhooks_url(tenant), [("url", "https://hooks.example.com/")])
    assert answer.status_code == 400
    assert field_error(answer, "webhook-events").startswith(
        "Field 'events' must be a non-empty array of distinct flag.changed"
    )
    assert answer.text.count(" checked>") == 0  # what was posted, not the defaults


def test_deleting_a_webhook_and_another_organizations_is_404(
    person: DashClient, dash_admin: Admin, tenant: Tenant, services: Services
) -> None:
    person.get(webhooks_url(tenant))
    person.post(
        webhooks_url(tenant), [("url", "https://a.example.com/"), ("events", "flag.changed")]
    )
    [hook] = services.store.list_webhooks(tenant.organization_id)
    other = dash_admin.tenant()
    answer = person.post(f"{webhooks_url(other)}/{hook.id}/delete", {})
    assert answer.status_code == 404
    assert services.store.list_webhooks(tenant.organization_id) == [hook]
    answer = person.post(f"{webhooks_url(tenant)}/{hook.id}/delete", {})
    assert answer.headers["location"] == f"{webhooks_url(tenant)}?deleted={hook.id}"
    assert services.store.list_webhooks(tenant.organization_id) == []
    page = person.get(answer.headers["location"])
    assert f"Webhook {hook.id} deleted" in text(page) and "No webhooks yet." in page.text
    audit = services.store.list_audit(tenant.organization_id)[0]
    assert (audit.action, audit.actor) == ("webhook.deleted", "dashboard")
