"""The flag editor's lifecycle fields, the flags list's stage badge and the cleanup view, through
Falcon's test client (contract section 14). The editor refuses what the admin API's ``PUT``
refuses, with the API's words next to the field; the list's badge is the stage decided with the
flag as it is now, over evidence the real pipeline computed from events in the lake."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.controlplane.changes import Actor
from api.controlplane.documents import iso_time
from api.controlplane.resources.code_references import CodeReference
from api.serving.services import Services
from api.web.dashboard.lifecycle_view import in_days, reason_words
from tests.dashboard.conftest import DashClient
from tests.dashboard.test_flag_activity import write_evaluations
from tests.pipelines.support import materialize_all
from tests.support.admin import Admin, Tenant
from warehouse.lifecycle import REASONS, LifecycleThresholds

DAY = 86_400.0


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    tenant = dash_admin.tenant()
    dash_admin.flag(tenant.environment_id, "checkout", [{"type": "STATIC"}])
    return tenant


def editor_path(tenant: Tenant, key: str = "checkout") -> str:
    return f"/dashboard/environments/{tenant.environment_id}/flags/{key}"


def text_of(page_html: str) -> str:
    """The page's text as a person reads it: tags dropped, entities decoded, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page_html)).split())


def save(person: DashClient, tenant: Tenant, **meta: str):  # noqa: ANN201 - a test Result
    """Save the editor's form as a browser sends it: on, no rules, and ``meta``'s fields."""
    fields = {"enabled": "on", "op": "save", "kind": "temporary", "owner": "", "expires_at": ""}
    return person.post(editor_path(tenant), {**fields, **meta})


def flag_of(admin: Admin, tenant: Tenant, key: str = "checkout") -> dict:
    return admin.request("GET", f"/environments/{tenant.environment_id}/flags/{key}", expect=200)


@pytest.mark.parametrize(
    ("field", "value", "body"),
    [
        ("kind", "forever", {"kind": "forever"}),
        ("owner", "o" * 129, {"owner": "o" * 129}),
        ("expires_at", "2026-02-30T09:00", {"expiresAt": "2026-02-30T09:00Z"}),
        ("expires_at", "0999-12-31T23:59", {"expiresAt": "0999-12-31T23:59Z"}),
        ("expires_at", "next tuesday", {"expiresAt": "next tuesdayZ"}),
    ],
)
def test_a_value_the_api_refuses_is_refused_with_its_words(
    person: DashClient, tenant: Tenant, dash_admin: Admin, services: Services,
    field: str, value: str, body: dict[str, str],
) -> None:  # fmt: skip
    api = dash_admin.request(
        "PUT", f"/environments/{tenant.environment_id}/flags/checkout",
        {"enabled": True, "rules": [], **body}, expect=400,
    )  # fmt: skip
    audited = len(services.store.list_audit(tenant.organization_id))
    page = save(person, tenant, **{field: value})
    assert page.status_code == 400
    assert api["message"] in text_of(page.text)  # the API's words, on the page
    input_id = {"kind": "flag-kind", "owner": "flag-owner", "expires_at": "flag-expires"}[field]
    assert f'id="{input_id}-error"' in page.text
    tag = re.search(rf'<(?:input|select) [^>]*id="{input_id}"[^>]*>', page.text)[0]
    assert 'aria-invalid="true"' in tag
    if field != "kind":
        assert f'value="{html.escape(value)}"' in tag  # what was typed is kept
    assert "Not saved." in page.text
    assert len(services.store.list_audit(tenant.organization_id)) == audited  # nothing written
    assert flag_of(dash_admin, tenant)["rules"] == [{"type": "STATIC", "value": True}]


def test_kind_owner_and_expiry_are_saved_and_shown_in_utc(
    person: DashClient, tenant: Tenant, dash_admin: Admin, services: Services
) -> None:
    page = save(person, tenant, kind="permanent", owner="  team-checkout ",
                expires_at="2030-01-31T09:30")  # fmt: skip
    assert page.status_code == 303, page.text
    stored = flag_of(dash_admin, tenant)
    assert (stored["kind"], stored["owner"], stored["expiresAt"]) == (
        "permanent", "team-checkout", "2030-01-31T09:30:00.000Z",
    )  # fmt: skip
    assert services.store.list_audit(tenant.organization_id)[0].actor == Actor.DASHBOARD

    editor = person.get(editor_path(tenant))
    expiry = re.search(r'<input type="datetime-local"[^>]*>', editor.text)[0]
    assert 'value="2030-01-31T09:30"' in expiry and "step=" not in expiry  # minutes: the default
    words = text_of(editor.text)
    assert "Expires at (UTC)" in words and "Read and stored in UTC" in words
    assert "Lifecycle: Permanent" in words
    assert "Its kind is permanent: it never becomes stale." in words
    assert re.search(r'<option value="permanent" selected>', editor.text)

    assert save(person, tenant).status_code == 303  # emptied: no owner, no expiry
    stored = flag_of(dash_admin, tenant)
    assert (stored["kind"], stored["owner"], stored["expiresAt"]) == ("temporary", None, None)


def test_an_expiry_with_seconds_keeps_them(
    person: DashClient, tenant: Tenant, dash_admin: Admin
) -> None:
    dash_admin.request(
        "PUT", f"/environments/{tenant.environment_id}/flags/checkout",
        {"enabled": True, "rules": [], "expiresAt": "2031-05-01T12:00:07+02:00"}, expect=200,
    )  # fmt: skip
    editor = person.get(editor_path(tenant))
    field = re.search(r'<input type="datetime-local"[^>]*>', editor.text)[0]
    assert 'value="2031-05-01T10:00:07"' in field and 'step="1"' in field
    assert save(person, tenant, expires_at="2031-05-01T10:00:07").status_code == 303
    assert flag_of(dash_admin, tenant)["expiresAt"] == "2031-05-01T10:00:07.000Z"


def test_a_draft_step_keeps_the_fields_and_other_writes_keep_the_meta(
    person: DashClient, tenant: Tenant, dash_admin: Admin
) -> None:
    draft = save(person, tenant, op="add:STATIC", kind="permanent", owner="payments")
    assert draft.status_code == 200
    assert 'value="payments"' in draft.text and '<option value="permanent" selected>' in draft.text
    assert flag_of(dash_admin, tenant)["owner"] is None  # a draft step writes nothing

    assert save(person, tenant, kind="permanent", owner="payments").status_code == 303
    toggle = f"/dashboard/environments/{tenant.environment_id}/flags/checkout/toggle"
    assert person.post(toggle, {"enabled": "false"}).status_code == 303
    old_form = person.post(editor_path(tenant), {"enabled": "on", "op": "save"})  # no meta fields
    assert old_form.status_code == 303
    stored = flag_of(dash_admin, tenant)
    assert (stored["kind"], stored["owner"], stored["enabled"]) == ("permanent", "payments", True)


def badge(page_html: str, key: str) -> str:
    """The stage badge in the flags list's row of ``key``."""
    row = re.search(rf'<tr id="flag-{re.escape(key)}".*?</tr>', page_html, re.S)[0]
    return re.search(r'<td class="lifecycle"[^>]*>.*?data-stage="([a-z]+)"', row, re.S)[1]


def test_the_list_shows_each_flags_stage(
    person: DashClient, tenant: Tenant, dash_admin: Admin, services: Services
) -> None:
    env = tenant.environment_id
    past = iso_time(services.clock() - DAY)
    for key, body in {
        "expired": {"expiresAt": past},
        "forever": {"kind": "permanent", "expiresAt": past},
        "gone": {"archived": True},
        "quiet": {},
        "busy": {},
    }.items():
        dash_admin.request("PUT", f"/environments/{env}/flags/{key}",
                           {"enabled": True, "rules": [], **body}, expect=201)  # fmt: skip
    flags = f"/dashboard/environments/{env}/flags"
    before = person.get(flags).text  # no pipeline run yet: the flags' own fields decide
    assert {k: badge(before, k) for k in ("checkout", "expired", "forever", "gone")} == {
        "checkout": "new", "expired": "stale", "forever": "permanent", "gone": "archived",
    }  # fmt: skip
    link = re.search(r'<tr id="flag-expired".*?</tr>', before, re.S)[0]
    assert f'href="/dashboard/environments/{env}/cleanup#flag-expired"' in link
    assert "Past its expiry date." in text_of(link)

    today = datetime.fromtimestamp(services.clock(), UTC).date()
    events = Path(services.settings.events_location)
    write_evaluations(events, tenant, "busy", today, 3)
    write_evaluations(events, tenant, "quiet", today - timedelta(45), 2)
    assert materialize_all(services.settings).success
    after = person.get(flags).text
    assert badge(after, "busy") == "active" and badge(after, "quiet") == "stale"
    assert "Not evaluated for 30 days or more." in text_of(
        re.search(r'<tr id="flag-quiet".*?</tr>', after, re.S)[0]
    )
    assert badge(after, "checkout") == "new"
    assert re.search(r"data-evaluations>3<", after)  # the 30-day figure beside it, as before


def test_the_cleanup_view_without_stale_flags_says_what_stale_means(
    person: DashClient, tenant: Tenant
) -> None:
    page = person.get(f"/dashboard/environments/{tenant.environment_id}/cleanup")
    assert page.status_code == 200
    words = text_of(page.text)
    assert "Stale flags (0)" in words
    assert "No stale flag in production." in words
    assert "not for 30 days, or when it has been launched" in words
    assert "FLAGSIGHT_LIFECYCLE_STALE_DAYS 30 days" in words
    assert "FLAGSIGHT_LIFECYCLE_LAUNCHED_DAYS 14 days" in words
    assert "FLAGSIGHT_LIFECYCLE_ARCHIVED_EVALUATED_HOURS 24 hours" in words
    assert "No evidence yet" in words  # no pipeline run yet
    tab = f'<a href="/dashboard/environments/{tenant.environment_id}/cleanup" aria-current="page">'
    assert tab + "Cleanup</a>" in page.text  # a tab of the environment


def test_archiving_from_the_cleanup_view_keeps_rules_and_meta(
    person: DashClient, tenant: Tenant, dash_admin: Admin, services: Services
) -> None:
    env = tenant.environment_id
    rules = [{"type": "PERCENTAGE", "percentage": 25, "value": True}]
    meta = {"kind": "temporary", "owner": "growth", "expiresAt": "2020-01-01T00:00:00.000Z"}
    dash_admin.request("PUT", f"/environments/{env}/flags/old-banner",
                       {"enabled": True, "rules": rules, **meta}, expect=201)  # fmt: skip
    cleanup = f"/dashboard/environments/{env}/cleanup"
    listed = text_of(person.get(cleanup).text)
    assert "Stale flags (1)" in listed and "old-banner Stale" in listed
    assert "Owner growth" in listed and "Expires 2020-01-01 00:00:00 UTC" in listed

    archived = person.post(f"/dashboard/environments/{env}/flags/old-banner/archive", {})
    assert archived.status_code == 303
    assert archived.headers["location"] == f"{cleanup}?archived=old-banner"
    stored = flag_of(dash_admin, tenant, "old-banner")
    assert stored["archived"] is True and stored["enabled"] is True
    assert stored["rules"] == rules
    assert {k: stored[k] for k in meta} == meta
    record = services.store.list_audit(tenant.organization_id)[0]
    assert (record.action, record.actor) == ("flag.updated", Actor.DASHBOARD)

    after = text_of(person.get(f"{cleanup}?archived=old-banner").text)
    assert "Archived old-banner" in after and "Stale flags (0)" in after
    audited = len(services.store.list_audit(tenant.organization_id))
    again = person.post(f"/dashboard/environments/{env}/flags/old-banner/archive", {})
    assert again.status_code == 303  # already archived: nothing written
    assert len(services.store.list_audit(tenant.organization_id)) == audited


@pytest.mark.parametrize("reason", REASONS)
def test_every_reason_is_said_in_words(reason: str) -> None:
    words = reason_words(reason, LifecycleThresholds(launched_days=1, stale_days=0.5))
    assert words != reason and words.endswith(".")
    assert "30" not in words and "14" not in words  # the thresholds configured, not the names'


@pytest.mark.parametrize(
    ("days", "said"),
    [(30.0, "30 days"), (1.0, "1 day"), (0.5, "0.5 days"), (0.0001, "0.0001 days")],
)
def test_thresholds_read_as_configured(days: float, said: str) -> None:
    assert in_days(days) == said


def test_the_cleanup_view_lists_code_references_by_repository_and_file(
    person: DashClient, tenant: Tenant, dash_admin: Admin, services: Services
) -> None:
    env = tenant.environment_id
    for key in ("old-banner", "old-footer"):
        dash_admin.request("PUT", f"/environments/{env}/flags/{key}",
                           {"enabled": True, "rules": [], "expiresAt": "2020-01-01T00:00:00Z"},
                           expect=201)  # fmt: skip
    found = [("src/banner.py", 12), ("src/app.py", 40), ("src/app.py", 3)]
    services.store.put_code_references(
        env, "github.com/acme/web", "9f2c1ab",
        [CodeReference("old-banner", path, line) for path, line in found],
    )  # fmt: skip
    services.store.put_code_references(
        env, "github.com/acme/ios", None, [CodeReference("old-banner", "Banner.swift", 8)]
    )
    page = person.get(f"/dashboard/environments/{env}/cleanup").text
    article = re.search(r'<article [^>]*data-flag="old-banner".*?</article>', page, re.S)[0]
    places = {
        repo: re.findall(r"<li><code>([^<]*)</code></li>", items)
        for repo, items in re.findall(r'data-repository="([^"]*)">(.*?)</ul>', article, re.S)
    }
    assert places == {
        "github.com/acme/ios": ["Banner.swift:8"],
        "github.com/acme/web": ["src/app.py:3", "src/app.py:40", "src/banner.py:12"],
    }
    words = text_of(article)
    assert "github.com/acme/web at 9f2c1ab" in words and "UTC: 3 references" in words
    assert "github.com/acme/ios scanned" in words and "UTC: 1 reference " in words
    footer = re.search(r'<article [^>]*data-flag="old-footer".*?</article>', page, re.S)[0]
    assert "Not found in the latest scan of github.com/acme/ios" in text_of(footer)
