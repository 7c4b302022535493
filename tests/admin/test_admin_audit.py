"""The audit log (contract section 10): one immutable record per change, whoever makes it,
newest first; restore puts a flag back byte for byte, a segment's members back (or its
creation undone), an API key's revocation or creation, a schedule's creation or cancellation,
a rollout's stop or hold and a webhook's creation undone, and is itself audited."""

from __future__ import annotations

import sqlite3

import pytest
from flagsight_core import evaluate

from tests.admin.conftest import AdminClient, Answer

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
    # the audit keeps the flag as configured; its lifecycle is evidence, shown only in answers
    first.pop("lifecycle"), second.pop("lifecycle")
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


def _restore(admin_api: AdminClient, org: dict, action: str) -> tuple[dict, Answer]:
    """Restore the newest record of ``action``: (that record, the answer)."""
    items = admin_api.get(f"/organizations/{org['id']}/audit").body["items"]
    record = next(item for item in items if item["action"] == action)
    return record, admin_api.post(f"/audit/{record['id']}/restore")


def _is_newest(admin_api: AdminClient, org: dict, restored: Answer, record: dict) -> None:
    assert restored.status == 201, restored
    assert (restored.body["action"], restored.body["restoredFrom"]) == ("restore", record["id"])
    assert restored.body["target"] == record["target"]
    newest = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert newest == restored.body


def test_restoring_a_revocation_makes_the_key_authenticate_again(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    created = admin_api.post(f"/environments/{env['id']}/api-keys", {"name": "ci"}).body
    admin_api.delete(f"/api-keys/{created['id']}")
    config = admin_api.services.config
    assert config.authenticate(created["key"]) is None
    revocation, restored = _restore(admin_api, org, "apiKey.revoked")
    _is_newest(admin_api, org, restored, revocation)
    assert (restored.body["before"], restored.body["after"]) == (
        revocation["after"], revocation["before"],
    )  # fmt: skip
    assert config.authenticate(created["key"]).key_id == created["id"]  # same worker, at once
    listed = admin_api.get(f"/environments/{env['id']}/api-keys").body["items"]
    assert [key["id"] for key in listed] == [created["id"]]
    again = admin_api.post(f"/audit/{revocation['id']}/restore")
    assert (again.status, again.body["message"]) == (
        409, f"API key '{created['id']}' is not revoked",
    )  # fmt: skip


def test_restoring_a_key_creation_revokes_it(admin_api: AdminClient, org: dict, env: dict) -> None:
    created = admin_api.post(f"/environments/{env['id']}/api-keys", {"name": "ci"}).body
    creation, restored = _restore(admin_api, org, "apiKey.created")
    _is_newest(admin_api, org, restored, creation)
    assert admin_api.services.config.authenticate(created["key"]) is None
    assert admin_api.get(f"/environments/{env['id']}/api-keys").body == {"items": []}
    again = admin_api.post(f"/audit/{creation['id']}/restore")
    assert (again.status, again.body["message"]) == (
        409, f"API key '{created['id']}' is already revoked",
    )  # fmt: skip


def test_restoring_a_schedule_cancels_it_and_restoring_that_makes_it_pending(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/checkout/schedules"
    body = {"at": "2099-01-01T00:00:00Z", "flag": {"enabled": True, "rules": []}}
    made = admin_api.post(path, body).body
    creation, cancelled = _restore(admin_api, org, "schedule.created")
    _is_newest(admin_api, org, cancelled, creation)
    [listed] = admin_api.get(path).body["items"]
    assert listed == {**made, "state": "cancelled"} == cancelled.body["after"]
    assert admin_api.post(f"/audit/{creation['id']}/restore").status == 409
    admin_api.post(f"/audit/{cancelled.body['id']}/restore")
    assert admin_api.get(path).body["items"] == [made]


def test_restoring_a_schedule_cancellation_makes_it_pending_again(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/checkout/schedules"
    body = {"at": "2099-01-01T00:00:00Z", "flag": {"enabled": True, "rules": []}}
    made = admin_api.post(path, body).body
    admin_api.delete(f"{path}/{made['id']}")
    cancellation, restored = _restore(admin_api, org, "schedule.cancelled")
    _is_newest(admin_api, org, restored, cancellation)
    assert admin_api.get(path).body["items"] == [made] == [restored.body["after"]]


def test_a_cancelled_schedule_whose_time_has_passed_stays_cancelled(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/environments/{env['id']}/flags/checkout/schedules"
    body = {"at": "2001-01-01T00:00:00Z", "flag": {"enabled": True, "rules": []}}
    made = admin_api.post(path, body).body
    admin_api.delete(f"{path}/{made['id']}")
    _, refused = _restore(admin_api, org, "schedule.cancelled")
    assert (refused.status, refused.body["message"]) == (
        409,
        f"Schedule '{made['id']}' was due at 2001-01-01T00:00:00.000Z, which has passed:"
        " it cannot be pending again; create a new schedule instead",
    )
    assert admin_api.get(path).body["items"] == [{**made, "state": "cancelled"}]


def test_restoring_a_webhook_creation_deletes_it(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    path = f"/organizations/{org['id']}/webhooks"
    hook = admin_api.post(path, {"url": "http://x.test/", "events": ["flag.changed"]}).body
    creation, restored = _restore(admin_api, org, "webhook.created")
    _is_newest(admin_api, org, restored, creation)
    assert (restored.body["before"]["id"], restored.body["after"]) == (hook["id"], None)
    assert admin_api.get(path).body == {"items": []}
    again = admin_api.post(f"/audit/{creation['id']}/restore")
    assert (again.status, again.body["message"]) == (
        409, f"Webhook '{hook['id']}' did not exist before that change and does not now",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("action", "why"),
    [
        ("webhook.deleted", "a webhook's secret is not kept in the log"),
        ("organization.created", "organizations are never deleted"),
    ],
)
def test_targets_that_cannot_be_restored_answer_409_saying_why(
    admin_api: AdminClient, org: dict, env: dict, action: str, why: str
) -> None:
    hook = admin_api.post(f"/organizations/{org['id']}/webhooks", {"url": "http://x.test/", "events": ["flag.changed"]})  # fmt: skip
    admin_api.delete(f"/webhooks/{hook.body['id']}")
    admin_api.put(f"/organizations/{org['id']}/segments/beta", {"userIdentifiers": ["u1"]})
    record, answer = _restore(admin_api, org, action)
    assert answer.status == 409
    assert answer.body["message"].startswith(
        f"Audit record '{record['id']}' ({action} of {record['target']}) cannot be restored: {why}"
    )
    assert answer.body["message"].endswith(
        "What can be restored: flags, an organization's plan and limit, an environment's"
        " settings, an API key's creation or revocation, a segment's members or creation, a"
        " schedule's creation or cancellation, a rollout's stop or hold, a webhook's creation,"
        " a metric (created, changed or deleted), and the metrics a flag follows"
    )


def test_restoring_a_rollout_stop_brings_it_back_and_restoring_that_stops_it(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    flag_path = f"/environments/{env['id']}/flags/checkout"
    admin_api.put(flag_path, {"enabled": True, "rules": PERCENTAGE})
    plan = {"steps": [5, 50, 100], "stepMinutes": 10, "guardrails": ["failureRate"]}
    assert admin_api.put(f"{flag_path}/rollout", plan).status == 200
    running = admin_api.get(f"{flag_path}/rollout").body
    assert admin_api.delete(f"{flag_path}/rollout").status == 204

    stop, restored = _restore(admin_api, org, "rollout.stopped")
    _is_newest(admin_api, org, restored, stop)
    back = admin_api.get(f"{flag_path}/rollout").body
    # As it was, but its step starts again from the restore (docs/rollouts.md).
    assert _but_its_start(back) == _but_its_start(running)
    assert back["stepStartedAt"] >= running["stepStartedAt"]
    assert (restored.body["before"], restored.body["after"]) == (None, back)
    again = admin_api.post(f"/audit/{restored.body['id']}/restore")
    assert again.status == 201 and again.body["after"] is None
    assert admin_api.get(f"{flag_path}/rollout").status == 404


def _but_its_start(rollout: dict) -> dict:
    return {k: v for k, v in rollout.items() if k != "stepStartedAt"}


def _segment_answer(admin_api: AdminClient, env: dict, user: str) -> str | None:
    """The rule type flag ``banner`` matches for ``user`` on this worker, None if none."""
    config = admin_api.services.config.environment(env["id"])
    return evaluate(config.flags["banner"], user, config.segments).matched_rule_type


def test_restoring_a_segment_put_serves_its_old_members_again(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    segment = f"/organizations/{org['id']}/segments/beta"
    admin_api.put(segment, {"userIdentifiers": ["alice", "bob"]})
    before = admin_api.get(segment).body
    rules = [{"type": "SEGMENT", "segment": "beta"}]
    admin_api.put(f"/environments/{env['id']}/flags/banner", {"enabled": True, "rules": rules})
    admin_api.put(segment, {"userIdentifiers": ["bob", "carol"]})
    assert _segment_answer(admin_api, env, "alice") is None
    overwrite, restored = _restore(admin_api, org, "segment.put")
    _is_newest(admin_api, org, restored, overwrite)
    assert (restored.body["before"], restored.body["after"]) == (
        overwrite["after"], overwrite["before"],
    )  # fmt: skip
    assert admin_api.get(segment).body == before
    assert before["userIdentifiers"] == ["alice", "bob"]
    assert _segment_answer(admin_api, env, "alice") == "SEGMENT"  # this worker, at once
    assert _segment_answer(admin_api, env, "carol") is None
    again = admin_api.post(f"/audit/{restored.body['id']}/restore")  # the restore, restored
    _is_newest(admin_api, org, again, restored.body)
    assert admin_api.get(segment).body["userIdentifiers"] == ["bob", "carol"]


def test_restoring_a_segment_deletion_brings_it_back_with_its_members(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    segment = f"/organizations/{org['id']}/segments/beta"
    admin_api.put(segment, {"userIdentifiers": ["alice", "bob"]})
    before = admin_api.get(segment).body
    assert admin_api.delete(segment).status == 204
    deletion, restored = _restore(admin_api, org, "segment.deleted")
    _is_newest(admin_api, org, restored, deletion)
    assert admin_api.get(segment).body == before
    assert "alice" in admin_api.services.config.environment(env["id"]).segments["beta"]


def test_restoring_a_segment_creation_deletes_it_unless_a_rule_names_it(
    admin_api: AdminClient, org: dict, env: dict
) -> None:
    segment = f"/organizations/{org['id']}/segments/beta"
    flag = f"/environments/{env['id']}/flags/banner"
    admin_api.put(segment, {"userIdentifiers": ["alice"]})
    admin_api.put(flag, {"enabled": True, "rules": [{"type": "SEGMENT", "segment": "beta"}]})
    creation, refused = _restore(admin_api, org, "segment.put")
    assert (refused.status, refused.body["message"]) == (
        409,
        "Segment 'beta' is used by flag 'banner' in environment 'production';"
        " remove that rule first",
    )
    assert admin_api.get(segment).body["userIdentifiers"] == ["alice"]
    admin_api.put(flag, {"enabled": True, "rules": []})
    restored = admin_api.post(f"/audit/{creation['id']}/restore")
    _is_newest(admin_api, org, restored, creation)
    assert (restored.body["before"], restored.body["after"]) == (creation["after"], None)
    assert admin_api.get(segment).status == 404
    assert "beta" not in admin_api.services.config.environment(env["id"]).segments
    again = admin_api.post(f"/audit/{creation['id']}/restore")
    assert (again.status, again.body["message"]) == (
        409, "Segment 'beta' did not exist before that change and does not now",
    )  # fmt: skip


def test_a_segment_change_from_before_its_members_were_kept_answers_409(
    admin_api: AdminClient, org: dict
) -> None:
    segment = f"/organizations/{org['id']}/segments/beta"
    admin_api.put(segment, {"userIdentifiers": ["alice"]})
    admin_api.put(segment, {"userIdentifiers": ["bob"]})
    change = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    with sqlite3.connect(admin_api.services.settings.control_plane_path) as conn:
        conn.execute("DELETE FROM segment_history")  # as a version before 3 recorded it
    answer = admin_api.post(f"/audit/{change['id']}/restore")
    assert answer.status == 409
    assert answer.body["message"].startswith(
        f"Audit record '{change['id']}' (segment.put of segment:{org['id']}/beta) cannot be"
        " restored: the members of segment changes made before this version were not kept;"
        " upload the segment again."
    )
    assert admin_api.get(segment).body["userIdentifiers"] == ["bob"]


def test_unknown_record_is_404(admin_api: AdminClient) -> None:
    assert admin_api.post("/audit/aud_0000000000000000/restore").status == 404


def test_audit_records_cannot_be_changed_or_deleted(admin_api: AdminClient, org: dict) -> None:
    conn = sqlite3.connect(admin_api.services.settings.control_plane_path)
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        conn.execute("UPDATE audit_log SET actor = 'someone else'")
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        conn.execute("DELETE FROM audit_log")
