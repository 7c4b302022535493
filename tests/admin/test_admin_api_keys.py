"""API keys: shown once, stored only as a hash, listed without secrets, revoked (for good,
unless the revocation is restored from the audit log: tests/admin/test_admin_audit.py)."""

from __future__ import annotations

import hashlib
import re
import sqlite3

KEY = re.compile(r"fsk_[A-Za-z0-9_-]{43}")


def test_create_shows_the_key_once_and_stores_only_its_hash(admin_api, env) -> None:
    created = admin_api.post(f"/environments/{env['id']}/api-keys", {"name": "backend"})
    assert created.status == 201
    assert set(created.body) == {"id", "name", "key", "createdAt"}
    assert created.headers.get("cache-control") == "no-store"
    key, key_id = created.body["key"], created.body["id"]
    assert KEY.fullmatch(key) and re.fullmatch(r"key_[0-9a-f]{16}", key_id)
    assert created.body["name"] == "backend"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", created.body["createdAt"])

    listed = admin_api.get(f"/environments/{env['id']}/api-keys")
    assert listed.body == {
        "items": [{"id": key_id, "name": "backend", "createdAt": created.body["createdAt"]}]
    }

    database = admin_api.services.settings.control_plane_path
    with sqlite3.connect(database) as conn:
        row = conn.execute("SELECT * FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        dump = "\n".join(conn.iterdump())
    assert hashlib.sha256(key.encode()).hexdigest() in row
    assert key not in dump and key[4:] not in dump
    for path in database.parent.glob("controlplane.sqlite3*"):  # database, WAL and shared memory
        assert key.encode() not in path.read_bytes()


def test_key_authenticates_until_revoked(admin_api, env) -> None:
    created = admin_api.post(f"/environments/{env['id']}/api-keys", {})
    config = admin_api.services.config
    context = config.authenticate(created.body["key"])
    assert (context.key_id, context.environment_id) == (created.body["id"], env["id"])

    answer = admin_api.delete(f"/api-keys/{created.body['id']}")
    assert (answer.status, answer.body) == (204, None)
    assert config.authenticate(created.body["key"]) is None  # same worker, at once
    assert admin_api.get(f"/environments/{env['id']}/api-keys").body == {"items": []}

    again = admin_api.delete(f"/api-keys/{created.body['id']}")
    assert (again.status, again.body["message"]) == (
        404,
        f"API key '{created.body['id']}' does not exist or is already revoked",
    )


def test_name_is_optional_and_body_may_be_absent(admin_api, env) -> None:
    no_body = admin_api.post(f"/environments/{env['id']}/api-keys")
    assert (no_body.status, no_body.body["name"]) == (201, "")
    null_name = admin_api.post(f"/environments/{env['id']}/api-keys", {"name": None})
    assert null_name.body["name"] == ""
    assert no_body.body["key"] != null_name.body["key"]
    bad = admin_api.post(f"/environments/{env['id']}/api-keys", {"name": 3})
    assert (bad.status, bad.body["message"]) == (400, "Field 'name' must be a string")
    text = admin_api.post(
        f"/environments/{env['id']}/api-keys", body="name", headers={"Content-Type": "text/plain"}
    )
    assert text.status == 415


def test_missing_environment_is_404(admin_api) -> None:
    for answer in (
        admin_api.post("/environments/env_0000000000000000/api-keys", {"name": "x"}),
        admin_api.get("/environments/env_0000000000000000/api-keys"),
    ):
        assert (answer.status, answer.body["message"]) == (
            404,
            "Environment 'env_0000000000000000' does not exist",
        )
    answer = admin_api.delete("/api-keys/key_0000000000000000")
    assert answer.status == 404
