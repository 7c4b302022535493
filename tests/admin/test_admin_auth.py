"""Admin authentication: Bearer token by hash, checked before the body, on every route."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from api.settings import Settings
from api.web.admin.auth import AdminAuth, bearer_token, ensure_admin_token, rotate_admin_token
from api.web.admin.routes import PREFIX, ROUTES
from api.web.openapi.admin import ADMIN_PATHS

UNAUTHORIZED = {
    "status": 401,
    "error": "Unauthorized",
    "message": "Missing or invalid Authorization header",
}
TOKEN = "admin-test-token-0123456789"

_CONCRETE = {
    "{org_id}": "org_0000000000000000",
    "{env_id}": "env_0000000000000000",
    "{key_id}": "key_0000000000000000",
    "{segment_key}": "beta",
    "{flag_key}": "checkout",
    "{schedule_id}": "sch_0000000000000000",
    "{audit_id}": "aud_0000000000000000",
    "{webhook_id}": "whk_0000000000000000",
    "{metric_key}": "checkout",
}


def _concrete(path: str) -> str:
    for placeholder, value in _CONCRETE.items():
        path = path.replace(placeholder, value)
    return path


def _operations() -> list[tuple[str, str]]:
    """Every (method, concrete path) the admin API serves."""
    calls = []
    for path, resource in ROUTES.items():
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if hasattr(resource, f"on_{method.lower()}"):
                calls.append((method, _concrete(path)))
    return calls


OPERATIONS = _operations()
BAD_HEADERS = {
    "missing": {},
    "empty": {"Authorization": ""},
    "wrong-scheme": {"Authorization": f"ApiKey {TOKEN}"},
    "basic": {"Authorization": f"Basic {TOKEN}"},
    "no-scheme": {"Authorization": TOKEN},
    "bearer-without-token": {"Authorization": "Bearer"},
    "wrong-token": {"Authorization": "Bearer not-the-admin-token"},
    "token-prefix": {"Authorization": f"Bearer {TOKEN[:-1]}"},
}


def test_every_served_operation_is_documented_and_nothing_else() -> None:
    names = {"{org_id}": "{orgId}", "{env_id}": "{envId}", "{key_id}": "{keyId}",
             "{segment_key}": "{segmentKey}", "{flag_key}": "{flagKey}",
             "{schedule_id}": "{scheduleId}", "{audit_id}": "{auditId}",
             "{webhook_id}": "{webhookId}", "{metric_key}": "{metricKey}"}  # fmt: skip
    served = set()
    for path, resource in ROUTES.items():
        for placeholder, name in names.items():
            path = path.replace(placeholder, name)
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(resource, f"on_{method}"):
                served.add((method, PREFIX + path))
    documented = {
        (method, path)
        for path, item in ADMIN_PATHS.items()
        for method in item
        if method != "parameters"
    }
    assert served == documented
    assert len(served) == len(OPERATIONS) == 41  # 33, PUT .../code-refs (contract 14),
    # POST .../flags/{flagKey}/explain (contract 12), and contract 13's metrics: GET, PUT and
    # DELETE .../metrics/{metricKey}, GET .../metrics, PUT .../flags/{flagKey}/metrics (beside
    # its GET) and GET .../flags/{flagKey}/followed-metrics


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
@pytest.mark.parametrize("headers", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_every_route_refuses_a_missing_or_wrong_token(admin_api, method, path, headers) -> None:
    answer = admin_api.call(method, path, token=None, headers=headers, body="{not json")
    assert (answer.status, answer.body) == (401, UNAUTHORIZED)


@pytest.mark.parametrize(
    ("method", "path"), [op for op in OPERATIONS if op[0] in ("POST", "PUT", "PATCH")]
)
def test_authentication_comes_before_the_body(admin_api, method, path) -> None:
    answer = admin_api.call(
        method, path, token=None, headers={"Content-Type": "text/plain"}, body="x" * 10
    )
    assert (answer.status, answer.body) == (401, UNAUTHORIZED)


def test_scheme_is_case_insensitive_and_token_exact(admin_api) -> None:
    assert (
        admin_api.get(
            "/organizations", token=None, headers={"Authorization": f"bearer {TOKEN}"}
        ).status
        == 200
    )
    assert admin_api.get("/organizations", token=TOKEN.upper()).status == 401


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bearer   abc  ", "abc"),
        ("BEARER abc", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("ApiKey abc", None),
        ("abc", None),
    ],
)
def test_bearer_token_parsing(header, token) -> None:
    assert bearer_token(header) == token


def test_stored_token_hash_is_used_without_the_environment_variable(make_admin) -> None:
    admin_api = make_admin(admin_token=None)
    store, settings = admin_api.services.store, admin_api.services.settings
    assert admin_api.get("/organizations", token="anything").status == 401  # no token at all yet

    token = ensure_admin_token(store, settings)
    assert token is not None and token.startswith("fsa_")
    assert ensure_admin_token(store, settings) is None  # made once
    assert admin_api.get("/organizations", token=token).status == 200

    rows = (
        sqlite3.connect(settings.control_plane_path)
        .execute("SELECT value FROM settings")
        .fetchall()
    )
    assert (hashlib.sha256(token.encode()).hexdigest().encode(),) in rows
    assert all(token not in str(value) for (value,) in rows)

    rotated = rotate_admin_token(store)
    assert admin_api.get("/organizations", token=token).status == 401
    assert admin_api.get("/organizations", token=rotated).status == 200


def test_environment_token_wins_and_nothing_is_stored(make_admin) -> None:
    admin_api = make_admin()
    store, settings = admin_api.services.store, admin_api.services.settings
    assert ensure_admin_token(store, settings) is None
    assert store.admin_token_hash() is None
    store.set_admin_token_hash(hashlib.sha256(b"other").hexdigest())
    assert admin_api.get("/organizations", token="other").status == 401
    assert admin_api.get("/organizations").status == 200


def test_admin_auth_answers_false_when_no_token_exists(tmp_path) -> None:
    class NoToken:
        def admin_token_hash(self) -> None:
            return None

    auth = AdminAuth(Settings(data_dir=tmp_path), NoToken())  # type: ignore[arg-type]
    assert not auth.is_admin("Bearer ")
    assert not auth.is_admin(f"Bearer {hashlib.sha256(b'').hexdigest()}")


def test_unknown_admin_path_is_404_with_contract_body(admin_api) -> None:
    answer = admin_api.get("/nothing-here")
    assert answer.status == 404
    assert answer.body == {
        "status": 404,
        "error": "Not Found",
        "message": "No resource at this path",
    }


def test_unsupported_method_is_405(admin_api) -> None:
    answer = admin_api.call("DELETE", "/organizations")
    assert answer.status == 405
    assert answer.body["status"] == 405 and answer.body["error"] == "Method Not Allowed"


def test_prefix() -> None:
    assert PREFIX == "/admin/v1"
