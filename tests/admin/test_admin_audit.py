"""The audit log (contract section 10): one immutable record per change, whoever makes it,
newest first; restore puts a flag back byte for byte and is itself audited."""

from __future__ import annotations

import sqlite3

import pytest

from tests.admin.conftest import AdminClient

PERCENTAGE = [{"type": "PERCENTAGE", "percentage": 10, "value": True}]


def _actions(admin_api: AdminClient, org_id: str) -> list[tuple[str, str]]:
    answer = admin_api.get(f"/organizations/{org_id}/audit")
    assert answer.status == 200
    return [(item["action"], item["actor"]) for item in reversed(answer.body["items"])]


def test_a_scripted_session_leaves_exactly_one_record_per_change(admin_api: AdminClient) -> None:
    org = admin_api.organization()
    o = org["id"]
    env = admin_api.environment(o)
    e = env["id"]
    flag_path = f"/environments/{e}/flags/checkout"
    calls = [
        ("POST", f"/environments/{e}/api-keys", {"name": "ci"}, 201),
        ("PUT", f"/organizations/{o}/segments/beta", {"userIdentifiers": ["u1", "u2"]}, 200),
        ("PUT", flag_path, {"enabled": True, "rules": PERCENTAGE}, 201),
        ("PUT", flag_path, {"enabled": False, "rules": PERCENTAGE}, 200),
        ("PUT", f"{flag_path}/rollout", {"steps": [5, 100], "stepMinutes": 1}, 200),
        ("DELETE", f"{flag_path}/rollout", None, 204),
        ("POST", f"{flag_path}/schedules",
         {"at": "2099-01-01T00:00:00Z", "flag": {"enabled": True, "rules": []}}, 201),
        ("POST", f"/organizations/{o}/webhooks",
         {"url": "http://127.0.0.1:9/hook", "events": ["flag.changed"]}, 201),
        ("PATCH", f"/environments/{e}", {"insightsEnabled": True}, 200),
        ("PATCH", f"/organizations/{o}", {"plan": "team"}, 200),
        ("DELETE", f"/organizations/{o}/segments/beta", None, 204),
        ("DELETE", flag_path, None, 204),
    ]  # fmt: skip
    for method, path, body, status in calls:
        assert admin_api.call(method, path, body).status == status, (method, path)
        if path.endswith("/schedules"):
            schedule_id = admin_api.get(path).body["items"][0]["id"]
            assert admin_api.delete(f"{path}/{schedule_id}").status == 204
    # reads and refused calls change nothing and leave no record
    admin_api.get(flag_path)
    admin_api.put(f"/environments/{e}/flags/bad", {"enabled": "yes", "rules": []})
    admin_api.delete(flag_path)
    assert _actions(admin_api, o) == [
        ("organization.created", "admin-api"),
        ("environment.created", "admin-api"),
        ("apiKey.created", "admin-api"),
        ("segment.put", "admin-api"),
        ("flag.created", "admin-api"),
        ("flag.updated", "admin-api"),
        ("rollout.started", "admin-api"),
        ("rollout.stopped", "admin-api"),
        ("schedule.created", "admin-api"),
        ("schedule.cancelled", "admin-api"),
        ("webhook.created", "admin-api"),
        ("environment.updated", "admin-api"),
        ("organization.updated", "admin-api"),
        ("segment.deleted", "admin-api"),
        ("flag.deleted", "admin-api"),
    ]


def test_records_carry_before_and_after_and_the_newest_comes_first(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/checkout"
    first = admin_api.put(path, {"enabled": True, "rules": PERCENTAGE}).body
    second = admin_api.put(path, {"enabled": False, "rules": []}).body
    newest = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert newest["target"] == f"flag:{env['id']}/checkout"
    assert (newest["before"], newest["after"]) == (first, second)


def test_restore_puts_a_flag_back_byte_for_byte_and_is_audited(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/admin/v1/environments/{env['id']}/flags/checkout"
    admin_api.put(path.removeprefix("/admin/v1"), {"enabled": True, "rules": PERCENTAGE})
    auth = {"Authorization": "Bearer admin-test-token-0123456789"}
    before = admin_api.client.simulate_get(path, headers=auth).content
    admin_api.put(path.removeprefix("/admin/v1"), {"enabled": False, "archived": True, "rules": []})
    change = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    restored = admin_api.post(f"/audit/{change['id']}/restore")
    assert restored.status == 201
    assert admin_api.client.simulate_get(path, headers=auth).content == before
    assert restored.body["action"] == "restore"
    assert restored.body["restoredFrom"] == change["id"]
    assert restored.body["after"] == change["before"]
    newest = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert newest["id"] == restored.body["id"]
    # the worker serves the restored flag at once
    flag = admin_api.services.config.environment(env["id"]).flags["checkout"]
    assert (flag.enabled, flag.archived) == (True, False)


def test_restoring_a_creation_deletes_the_flag_and_a_deletion_brings_it_back(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/checkout"
    created = admin_api.put(path, {"enabled": True, "rules": []}).body
    creation = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert admin_api.post(f"/audit/{creation['id']}/restore").status == 201
    assert admin_api.get(path).status == 404
    deletion = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert deletion["after"] is None
    assert admin_api.post(f"/audit/{deletion['id']}/restore").status == 201
    assert admin_api.get(path).body == created


@pytest.mark.parametrize("action", ["apiKey.created", "webhook.created", "organization.created"])
def test_targets_that_cannot_be_restored_answer_409(
    admin_api: AdminClient, org: dict, env: dict, action: str
) -> None:
    admin_api.post(f"/environments/{env['id']}/api-keys", {})
    admin_api.post(f"/organizations/{org['id']}/webhooks", {"url": "http://x.test/", "events": ["flag.changed"]})  # fmt: skip
    items = admin_api.get(f"/organizations/{org['id']}/audit").body["items"]
    record = next(item for item in items if item["action"] == action)
    answer = admin_api.post(f"/audit/{record['id']}/restore")
    assert answer.status == 409
    assert record["target"] in answer.body["message"]


def test_unknown_record_is_404(admin_api: AdminClient) -> None:
    assert admin_api.post("/audit/aud_0000000000000000/restore").status == 404


def test_audit_records_cannot_be_changed_or_deleted(admin_api: AdminClient, org: dict) -> None:
    conn = sqlite3.connect(admin_api.services.settings.control_plane_path)
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        conn.execute("UPDATE audit_log SET actor = 'someone else'")
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        conn.execute("DELETE FROM audit_log")
