"""No page shows data without a session, and no form acts without its session's CSRF token.

The cases walk ``api.web.dashboard.routes.ROUTES``, so a route added later is covered (or fails
here until it has a case).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from api.serving.services import Services
from api.web.dashboard.routes import ROUTES
from api.web.dashboard.sessions import SESSION_COOKIE, SESSION_TTL_S
from tests.support.admin import Admin

FORM_FIELDS: dict[str, dict[str, str]] = {
    "/sign-out": {},
    "/organizations": {"name": "Intruder Inc", "plan": "free"},
    "/organizations/{org_id}": {"key": "staging"},
    "/organizations/{org_id}/segments": {"key": "more-users", "identifiers": "u1\nu2"},
    "/organizations/{org_id}/segments/{segment_key}": {
        "identifiers": "alice",
        "condition_attribute": "plan",
        "condition_operator": "EXISTS",
    },
    "/organizations/{org_id}/segments/{segment_key}/delete": {},
    "/organizations/{org_id}/metrics": {
        "key": "sneaky-metric",
        "name": "Sneaky",
        "event": "sneak",
        "kind": "count",
        "window_hours": "24",
        "better": "lower",
    },
    "/organizations/{org_id}/metrics/{metric_key}": {
        "name": "Renamed",
        "event": "purchase",
        "kind": "conversion",
        "window_hours": "24",
        "better": "higher",
    },
    "/organizations/{org_id}/metrics/{metric_key}/delete": {},
    "/environments/{env_id}/insights": {"enabled": "false"},
    "/environments/{env_id}/api-keys": {"name": "sneaky"},
    "/api-keys/{key_id}/revoke": {},
    "/environments/{env_id}/flags": {"key": "sneaky-flag"},
    "/environments/{env_id}/flags/{flag_key}": {  # removes the split its rollout moves
        "enabled": "on",
        "op": "save",
        "confirm_percentage_change": "yes",
    },
    "/environments/{env_id}/flags/{flag_key}/toggle": {"enabled": "false"},
    "/environments/{env_id}/flags/{flag_key}/explain": {"try_user": "alice"},
    "/environments/{env_id}/flags/{flag_key}/metrics": {"metric": "secret-purchases"},
    "/environments/{env_id}/flags/{flag_key}/archive": {},
    "/environments/{env_id}/flags/{flag_key}/rollout": {"steps": "1, 100", "step_minutes": "1"},
    "/environments/{env_id}/flags/{flag_key}/rollout/stop": {},
    "/organizations/{org_id}/audit/{audit_id}/restore": {},
    "/environments/{env_id}/flags/{flag_key}/schedules": {"at": "2099-01-01T00:00", "rules": "[]"},
    "/environments/{env_id}/flags/{flag_key}/schedules/{schedule_id}/cancel": {},
    "/organizations/{org_id}/webhooks": {
        "url": "https://hooks.example.com/",
        "events": "flag.changed",
    },
    "/organizations/{org_id}/webhooks/{webhook_id}/delete": {},
}

AUDITED_ONLY = {
    "/organizations/{org_id}/metrics",
    "/organizations/{org_id}/metrics/{metric_key}",
    "/organizations/{org_id}/metrics/{metric_key}/delete",
    "/environments/{env_id}/flags/{flag_key}/metrics",
    "/environments/{env_id}/flags/{flag_key}/schedules",
    "/environments/{env_id}/flags/{flag_key}/schedules/{schedule_id}/cancel",
    "/organizations/{org_id}/webhooks",
    "/organizations/{org_id}/webhooks/{webhook_id}/delete",
}
"""Forms whose change serves nothing new (no config version): the audit log shows them (a
metric and what a flag follows change no evaluation)."""

READ_ONLY = {"/environments/{env_id}/flags/{flag_key}/explain"}
"""Forms that change nothing: they answer on the page (the flag page's "try a user")."""

GET_ROUTES = sorted(path for path, page in ROUTES.items() if hasattr(page, "on_get"))
POST_ROUTES = sorted(path for path, page in ROUTES.items() if hasattr(page, "on_post"))


@pytest.fixture
def world(dash_admin: Admin) -> dict[str, str]:
    """One organization with everything a route can address; names that must not leak."""
    tenant = dash_admin.tenant(insights=True)
    dash_admin.request("PATCH", f"/organizations/{tenant.organization_id}", {"plan": "team"})
    dash_admin.segment(tenant.organization_id, "beta-users", ["alice", "bob"])
    dash_admin.request(
        "PUT", f"/organizations/{tenant.organization_id}/metrics/secret-purchases",
        {"name": "Secret purchases", "event": "purchase", "kind": "conversion",
         "windowHours": 72, "better": "higher"},
    )  # fmt: skip
    dash_admin.flag(
        tenant.environment_id,
        "secret-checkout",
        [{"type": "PERCENTAGE", "percentage": 50}, {"type": "STATIC", "value": True}],
    )
    dash_admin.request(
        "PUT", f"/environments/{tenant.environment_id}/flags/secret-checkout/rollout", {}
    )
    audit = dash_admin.request("GET", f"/organizations/{tenant.organization_id}/audit")
    schedule = dash_admin.request(
        "POST",
        f"/environments/{tenant.environment_id}/flags/secret-checkout/schedules",
        {"at": "2099-01-01T00:00:00Z", "flag": {"enabled": False, "rules": []}},
    )
    webhook = dash_admin.request(
        "POST",
        f"/organizations/{tenant.organization_id}/webhooks",
        {"url": "https://hooks.example.com/secret", "events": ["flag.changed"]},
    )
    return {
        "schedule_id": schedule["id"],
        "webhook_id": webhook["id"],
        "audit_id": audit["items"][0]["id"],
        "org_id": tenant.organization_id,
        "env_id": tenant.environment_id,
        "key_id": tenant.api_key_id,
        "flag_key": "secret-checkout",
        "segment_key": "beta-users",
        "metric_key": "secret-purchases",
    }


def url(path: str, world: dict[str, str]) -> str:
    return "/dashboard" + path.format(**world)


def test_the_cases_cover_every_form() -> None:
    assert set(POST_ROUTES) == set(FORM_FIELDS)


@pytest.mark.parametrize("path", GET_ROUTES)
def test_every_page_redirects_to_sign_in_without_a_session(
    path: str, world: dict[str, str], visitor: Any
) -> None:
    result = visitor.get(url(path, world))
    assert result.status_code == 303
    assert result.headers["location"].startswith("/dashboard/sign-in")
    assert not result.content
    assert "secret-checkout" not in result.text and "beta-users" not in result.text


@pytest.mark.parametrize("path", POST_ROUTES)
def test_every_form_is_refused_without_a_session(
    path: str, world: dict[str, str], visitor: Any, services: Services
) -> None:
    before = services.store.config_version()
    audited = len(services.store.list_audit(world["org_id"]))
    result = visitor.post(url(path, world), FORM_FIELDS[path], csrf=False)
    assert result.status_code == 303
    assert result.headers["location"] == "/dashboard/sign-in"
    assert services.store.config_version() == before
    assert len(services.store.list_audit(world["org_id"])) == audited


@pytest.mark.parametrize("path", POST_ROUTES)
def test_every_form_is_refused_without_the_csrf_token(
    path: str, world: dict[str, str], person: Any, services: Services
) -> None:
    before = services.store.config_version()
    audited = len(services.store.list_audit(world["org_id"]))
    result = person.post(url(path, world), FORM_FIELDS[path], csrf=False)
    assert result.status_code == 403
    assert "The form was refused" in result.text
    assert services.store.config_version() == before
    assert len(services.store.list_audit(world["org_id"])) == audited
    assert person.get("/dashboard/organizations").status_code == 200  # still signed in


@pytest.mark.parametrize("path", POST_ROUTES)
def test_every_form_is_refused_with_another_sessions_token(
    path: str, world: dict[str, str], person: Any, dash_app: Any, services: Services
) -> None:
    from tests.dashboard.conftest import DashClient

    other = DashClient(dash_app)
    other.sign_in()
    other.get("/dashboard/organizations")
    assert other.csrf and other.csrf != person.csrf
    before = services.store.config_version()
    result = person.post(
        url(path, world), [*FORM_FIELDS[path].items(), ("csrf_token", other.csrf)], csrf=False
    )
    assert result.status_code == 403
    assert services.store.config_version() == before


@pytest.mark.parametrize("path", sorted(set(POST_ROUTES) - {"/sign-out"}))
def test_the_same_forms_are_accepted_with_the_token(
    path: str, world: dict[str, str], person: Any, services: Services
) -> None:
    """The refusals above are for the missing token alone: with it, each form acts (or, for
    a read-only one, answers)."""
    before = services.store.config_version()
    audited = len(services.store.list_audit(world["org_id"]))
    result = person.post(url(path, world), FORM_FIELDS[path])
    if path in READ_ONLY:
        assert result.status_code == 200, result.text
        assert services.store.config_version() == before
        assert len(services.store.list_audit(world["org_id"])) == audited
        return
    assert result.status_code in (201, 303), result.text
    if path.endswith("/rollout/stop"):  # serves the same flag: the rollout is what goes
        assert services.store.get_rollout(world["env_id"], world["flag_key"]) is None
    elif path in AUDITED_ONLY:
        assert len(services.store.list_audit(world["org_id"])) > audited
    else:
        assert services.store.config_version() > before


def test_sign_in_refuses_a_wrong_token(visitor: Any) -> None:
    result = visitor.sign_in("not-the-token")
    assert result.status_code == 401
    assert "That is not the admin token." in result.text
    assert SESSION_COOKIE not in visitor.cookies
    assert visitor.get("/dashboard/organizations").status_code == 303


def test_sign_in_refuses_a_form_without_its_csrf_token(visitor: Any) -> None:
    visitor.get("/dashboard/sign-in")
    result = visitor.post(
        "/dashboard/sign-in", {"admin_token": "test-admin-token-0123456789"}, csrf=False
    )
    assert result.status_code == 403
    assert SESSION_COOKIE not in visitor.cookies


def test_session_cookie_is_http_only_strict_and_scoped(visitor: Any) -> None:
    result = visitor.sign_in()
    assert result.status_code == 303 and result.headers["location"] == "/dashboard/organizations"
    cookie = result.cookies[SESSION_COOKIE]
    assert cookie.http_only and cookie.same_site == "Strict" and cookie.path == "/dashboard"
    assert cookie.max_age == SESSION_TTL_S


def test_https_requests_get_secure_cookies(visitor: Any) -> None:
    result = visitor.client.simulate_get("/dashboard/sign-in", protocol="https")
    assert "Secure" in result.headers["set-cookie"]


def test_sign_in_returns_to_the_page_asked_for_but_never_off_site(visitor: Any) -> None:
    first = visitor.get("/dashboard/organizations")
    assert first.headers["location"] == "/dashboard/sign-in?next=%2Fdashboard%2Forganizations"
    visitor.get("/dashboard/sign-in?next=//evil.example/x")
    assert (
        'value="/dashboard/organizations"'
        in visitor.get("/dashboard/sign-in?next=//evil.example/x").text
    )


def test_a_tampered_or_expired_session_is_refused(person: Any, services: Services) -> None:
    issued, nonce, mac = person.cookies[SESSION_COOKIE].split(".")
    person.cookies[SESSION_COOKIE] = f"{int(issued) + 3600}.{nonce}.{mac}"
    assert person.get("/dashboard/organizations").status_code == 303
    person.cookies[SESSION_COOKIE] = f"{issued}.{nonce}.{mac}"
    assert person.get("/dashboard/organizations").status_code == 200
    real_clock = services.clock
    services.clock = lambda: real_clock() + SESSION_TTL_S + 1
    try:
        assert person.get("/dashboard/organizations").status_code == 303
    finally:
        services.clock = real_clock


def test_sign_out_ends_the_session_in_the_browser(person: Any) -> None:
    result = person.post("/dashboard/sign-out", {})
    assert result.status_code == 303
    assert result.headers["location"] == "/dashboard/sign-in?signed_out=1"
    assert person.cookies[SESSION_COOKIE] == ""
    assert person.get("/dashboard/organizations").status_code == 303
    assert "You are signed out." in person.get("/dashboard/sign-in?signed_out=1").text


@pytest.mark.parametrize("path", [*GET_ROUTES, "/sign-in"])
def test_pages_carry_security_headers_and_no_inline_script(
    path: str, world: dict[str, str], person: Any
) -> None:
    result = person.get(url(path, world)) if path else person.get("/dashboard/organizations")
    if result.status_code == 303:  # "" and sign-in redirect a signed-in person onwards
        result = person.get(result.headers["location"])
    assert result.status_code == 200
    csp = result.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert result.headers["x-frame-options"] == "DENY"
    assert result.headers["x-content-type-options"] == "nosniff"
    assert not re.search(r"<script(?![^>]*\bsrc=)", result.text)
    assert not re.search(r"\son[a-z]+\s*=", result.text)
    assert not re.search(r"\sstyle\s*=", result.text)


def test_static_files_are_served_without_a_session(visitor: Any) -> None:
    css = visitor.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert visitor.get("/dashboard/static/dashboard.js").status_code == 200
    assert visitor.get("/dashboard/static/..%2Fsessions.py").status_code == 404
    icon = visitor.get("/favicon.ico")  # asked by browsers on pages without an icon link
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.content == visitor.get("/dashboard/static/favicon.svg").content
