"""Security: secrets stored only as hashes and compared in constant time; every admin route and
dashboard page refuses without credentials (routes enumerated from the app's router); keys of
one environment cannot reach another; dashboard headers, CSRF and cookies; no secret in logs;
request body and header size limits."""

from __future__ import annotations

import hashlib
import hmac
import re
import socket
from pathlib import Path
from typing import Any

import falcon.inspect
import falcon.testing
import pytest
import requests

from api.serving.services import Services
from api.web.admin.auth import rotate_admin_token
from api.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant
from tests.support.admin import testclient_caller as in_process
from tests.support.server import GunicornServer

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@pytest.fixture
def app_client(services: Services) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(services))


def routes(app: Any, prefix: str) -> list[tuple[str, str]]:
    """(method, path) of every responder under ``prefix``, from the app's own router."""
    found = []
    for route in falcon.inspect.inspect_routes(app):
        if route.path.startswith(prefix):
            for method in route.methods:
                if method.method in METHODS and not method.internal:
                    found.append((method.method, route.path))
    return sorted(found)


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def file_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data_dir.rglob("*") if p.is_file())


# -- secrets at rest ------------------------------------------------------------------------


def test_api_keys_and_the_admin_token_are_stored_only_as_hashes(
    services: Services, app_client: falcon.testing.TestClient
) -> None:
    admin = Admin(in_process(app_client), ADMIN_TOKEN)
    tenant = admin.tenant()
    token = rotate_admin_token(services.store)
    services.store.close()
    stored = file_bytes(services.settings.data_dir)
    for secret in (tenant.api_key, token):
        assert secret.encode() not in stored
        assert hashlib.sha256(secret.encode()).hexdigest().encode() in stored
    listed = admin.request("GET", f"/environments/{tenant.environment_id}/api-keys", expect=200)
    assert "key" not in listed["items"][0]  # shown once, at creation only


def test_secrets_are_compared_in_constant_time(
    services: Services, app_client: falcon.testing.TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin token's hash goes through ``hmac.compare_digest``; an API key is looked up by
    its SHA-256, so response timing can only tell about a hash nobody can invert."""
    admin = Admin(in_process(app_client), ADMIN_TOKEN)
    tenant = admin.tenant()
    compared: list[tuple[Any, Any]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    wrong = app_client.simulate_get(
        "/admin/v1/organizations", headers={"Authorization": "Bearer not-the-token"}
    )
    assert wrong.status_code == 401 and compared
    assert hashlib.sha256(b"not-the-token").hexdigest() in compared[-1]
    api_keys = services.config._snapshot.api_keys
    assert tenant.api_key not in api_keys
    assert hashlib.sha256(tenant.api_key.encode()).hexdigest() in api_keys


# -- refusals without credentials -----------------------------------------------------------


def test_every_admin_route_refuses_without_the_admin_token(
    services: Services, app_client: falcon.testing.TestClient
) -> None:
    admin = Admin(in_process(app_client), ADMIN_TOKEN)
    tenant = admin.tenant()
    found = routes(app_client.app, "/admin/")
    assert len(found) >= 20
    for method, path in found:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
            {"Authorization": f"ApiKey {tenant.api_key}"},
            {"Authorization": f"Bearer {tenant.api_key}"},
            {"Authorization": f"Basic {ADMIN_TOKEN}"},
        ):
            answer = app_client.simulate_request(
                method, concrete(path), headers=headers, json={"name": "x", "plan": "free"}
            )
            assert answer.status_code == 401, (method, path, headers, answer.status_code)
            assert answer.json["status"] == 401


def test_every_dashboard_page_refuses_without_a_session(
    app_client: falcon.testing.TestClient,
) -> None:
    found = routes(app_client.app, "/dashboard")
    public = {"/dashboard/sign-in", "/dashboard/static/{name}"}
    guarded = [(m, p) for m, p in found if p not in public]
    assert len(guarded) >= 14
    for method, path in guarded:
        answer = app_client.simulate_request(
            method,
            concrete(path),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            body="csrf_token=x&enabled=false",
        )
        assert answer.status_code in (303, 401, 403), (method, path, answer.status_code)
        if answer.status_code == 303:
            assert answer.headers["Location"].split("?")[0].endswith("/dashboard/sign-in")
        assert "org_" not in answer.text and "env_" not in answer.text


# -- one environment's key cannot reach another ---------------------------------------------


def test_a_key_of_one_environment_neither_reads_nor_writes_another(
    app_client: falcon.testing.TestClient,
) -> None:
    admin = Admin(in_process(app_client), ADMIN_TOKEN)
    a = admin.tenant(environment="production")
    b = admin.tenant(environment="staging", organization_id=a.organization_id)
    other_org = admin.tenant(environment="production")
    for tenant in (b, other_org):
        admin.flag(tenant.environment_id, "secret-flag", [{"type": "STATIC"}])

    def call(tenant: Tenant, path: str, body: Any) -> falcon.testing.Result:
        return app_client.simulate_post(
            path, json=body, headers={"Authorization": f"ApiKey {tenant.api_key}"}
        )

    for victim in (b, other_org):
        issued = call(victim, "/v1/evaluate", {"flagKey": "secret-flag", "userIdentifier": "u"})
        assert issued.json["value"] is True
        evaluation_id = issued.json["evaluationId"]
        read = call(a, "/v1/evaluate", {"flagKey": "secret-flag", "userIdentifier": "u"})
        assert read.json["error"]["type"] == "FLAG_NOT_FOUND" and read.json["value"] is False
        bulk = call(a, "/v1/evaluate/bulk", {"flagKey": "secret-flag", "userIdentifiers": ["u"]})
        assert bulk.json["u"]["error"]["type"] == "FLAG_NOT_FOUND"
        ofrep = call(a, "/ofrep/v1/evaluate/flags/secret-flag", {"context": {"targetingKey": "u"}})
        assert ofrep.status_code == 404 and ofrep.json["errorCode"] == "FLAG_NOT_FOUND"
        ofrep_bulk = call(a, "/ofrep/v1/evaluate/flags", {"context": {"targetingKey": "u"}})
        assert "secret-flag" not in ofrep_bulk.text
        wrote = call(a, "/v1/feedback/report", {"evaluationId": evaluation_id, "result": True})
        assert wrote.status_code == 400 and "another environment" in wrote.json["message"]
        wrote_bulk = call(
            a,
            "/v1/feedback/bulk",
            {"feedbacks": [{"evaluationId": evaluation_id, "result": False}]},
        )
        assert wrote_bulk.status_code == 400


# -- the dashboard's headers, CSRF and cookies ----------------------------------------------


def test_dashboard_headers_csrf_and_cookies(app_client: falcon.testing.TestClient) -> None:
    page = app_client.simulate_get("/dashboard/sign-in")
    csp = page.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";") if " " in d.strip())
    script = directives.get("script-src", directives.get("default-src", ""))
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script and script
    assert "<script>" not in page.text.replace(" ", "")  # no inline script to allow
    assert page.headers["X-Frame-Options"] == "DENY" or "frame-ancestors 'none'" in csp
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    nonce_cookie = page.headers["Set-Cookie"]
    assert "HttpOnly" in nonce_cookie and "SameSite=Strict" in nonce_cookie
    csrf = re.search(r'name="csrf_token" value="([^"]*)"', page.text).group(1)
    cookie = nonce_cookie.split(";", 1)[0]
    form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    forged = app_client.simulate_post(
        "/dashboard/sign-in", headers=form, body=f"admin_token={ADMIN_TOKEN}&csrf_token=forged"
    )
    assert (
        forged.status_code in (400, 403)
        and "Set-Cookie" not in forged.headers
        or ("session" not in forged.headers.get("Set-Cookie", ""))
    )
    signed = app_client.simulate_post(
        "/dashboard/sign-in", headers=form, body=f"admin_token={ADMIN_TOKEN}&csrf_token={csrf}"
    )
    assert signed.status_code == 303
    assert signed.cookies
    for cookie in signed.cookies.values():
        if not cookie.value:
            continue  # a deletion (the sign-in nonce, spent)
        assert cookie.http_only and cookie.same_site == "Strict", cookie.name


# -- logs, and the limits of a real server --------------------------------------------------


def raw_request(server: GunicornServer, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(payload)
        return sock.recv(4096)


def test_size_limits_on_a_real_server_and_no_secret_in_its_logs(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = module_server_admin.tenant()
    module_server_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    module_server.wait_config_everywhere()  # every worker serves the new keys and flags
    url = module_server.url
    key = {"Authorization": f"ApiKey {tenant.api_key}"}
    big = {"flagKey": "f", "userIdentifier": "u", "pad": "x" * (65 * 1024)}
    answer = requests.post(f"{url}/v1/evaluate", json=big, headers=key, timeout=10)
    assert answer.status_code == 413 and answer.json()["status"] == 413
    huge_bulk = {"feedbacks": [], "pad": "x" * (3 * 1024 * 1024)}
    answer = requests.post(f"{url}/v1/feedback/bulk", json=huge_bulk, headers=key, timeout=10)
    assert answer.status_code == 413
    lying = (
        b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey " + tenant.api_key.encode() + b"\r\n"
        b"Content-Length: 999999999\r\n\r\n{}"
    )
    assert raw_request(module_server, lying).startswith(b"HTTP/1.1 413")
    long_header = {**key, "X-Pad": "x" * 9000}
    assert requests.post(
        f"{url}/v1/evaluate", json={}, headers=long_header, timeout=10
    ).status_code in (400, 431)
    many = {**key, **{f"X-H{i}": "1" for i in range(120)}}
    assert requests.post(f"{url}/v1/evaluate", json={}, headers=many, timeout=10).status_code in (
        400,
        431,
    )
    assert requests.get(f"{url}/{'x' * 9000}", timeout=10).status_code in (400, 414)
    # the server is still fine, and has logged no secret, even ones it refused
    wrong_key, wrong_token = "fsk_" + "W" * 43, "fsa_" + "T" * 43
    requests.post(
        f"{url}/v1/evaluate", json={}, headers={"Authorization": f"ApiKey {wrong_key}"}, timeout=10
    )
    requests.get(
        f"{url}/admin/v1/organizations",
        headers={"Authorization": f"Bearer {wrong_token}"},
        timeout=10,
    )
    ok = requests.post(
        f"{url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": "u"}, headers=key, timeout=10
    )
    assert ok.status_code == 200
    log = module_server.log_path.read_text()
    for secret in (tenant.api_key, ADMIN_TOKEN, wrong_key, wrong_token):
        assert secret not in log


def test_one_reason_phrase_for_413_everywhere(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    """The status line (written by gunicorn) and the body's ``error`` agree, on the public
    API, OFREP, the admin API and the dashboard, and with a lying Content-Length."""
    tenant = module_server_admin.tenant()
    module_server.wait_config_everywhere()  # every worker serves the new keys and flags
    key = f"ApiKey {tenant.api_key}".encode()
    admin = f"Bearer {ADMIN_TOKEN}".encode()
    big = b'{"pad":"' + b"x" * (70 * 1024 * 1024) + b'"}'
    cases = [
        (b"/v1/evaluate", key, b"application/json", b'{"pad":"' + b"x" * 70_000 + b'"}'),
        (b"/ofrep/v1/evaluate/flags", key, b"application/json", b'{"x":"' + b"x" * 70_000 + b'"}'),
        (b"/admin/v1/organizations", admin, b"application/json", big),
        (
            b"/dashboard/sign-in",
            b"",
            b"application/x-www-form-urlencoded",
            b"a=" + b"x" * (65 << 20),
        ),
    ]
    phrases = set()
    for path, auth, media, body in cases:
        head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n" % (
            path,
            media,
            len(body),
        )
        if auth:
            head += b"Authorization: " + auth + b"\r\n"
        with socket.create_connection(("127.0.0.1", module_server.port), timeout=30) as sock:
            sock.sendall(head + b"\r\n" + body[:16])  # the limit is checked on Content-Length
            answer = b""
            while b"\r\n\r\n" not in answer or len(answer) < 200:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        status_line = answer.split(b"\r\n", 1)[0].decode()
        assert status_line.startswith("HTTP/1.1 413 "), (path, status_line)
        phrase = status_line.split(" ", 2)[2]
        phrases.add(phrase)
        if media == b"application/json":
            body_text = answer.split(b"\r\n\r\n", 1)[1]
            assert f'"error":"{phrase}"'.encode() in body_text, (path, body_text)
    assert phrases == {"Payload Too Large"}
