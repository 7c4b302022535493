"""A flag's lifecycle metadata (contract 14): ``kind``, ``owner``, ``expiresAt`` in its PUT body.

They never change evaluation; a PUT replaces them (left out, each takes its default), and the
writes that change only ``enabled``, ``archived`` or ``rules`` (a due schedule, a rollout's
step, the dashboard's switch) keep them. A restore puts them back with the rest of the flag."""

from __future__ import annotations

import pytest
from flagsight_core import StaticRule

from api.controlplane.changes import FlagBody
from api.controlplane.model import FlagKind


def _path(env: dict) -> str:
    return f"/environments/{env['id']}/flags/checkout"


META = {"kind": "permanent", "owner": "payments team", "expiresAt": "2027-01-01T09:00:00+02:00"}


def test_put_sets_the_metadata_and_answers_expiry_in_utc(admin_api, env) -> None:
    created = admin_api.put(_path(env), {"enabled": True, "rules": [], **META})
    assert created.status == 201
    shown = {name: created.body[name] for name in ("kind", "owner", "expiresAt")}
    assert shown == {
        "kind": "permanent",
        "owner": "payments team",
        "expiresAt": "2027-01-01T07:00:00.000Z",
    }
    assert admin_api.get(_path(env)).body == created.body


def test_a_put_without_them_resets_them_to_their_defaults(admin_api, env) -> None:
    admin_api.put(_path(env), {"enabled": True, "rules": [], **META})
    replaced = admin_api.put(_path(env), {"enabled": True, "rules": []})
    assert (replaced.body["kind"], replaced.body["owner"], replaced.body["expiresAt"]) == (
        "temporary",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("kind", "forever", "Field 'kind' must be one of temporary, permanent"),
        ("kind", 1, "Field 'kind' must be one of temporary, permanent"),
        ("owner", "x" * 129, "Field 'owner' must be at most 128 characters long"),
        ("owner", 7, "Field 'owner' must be a string or null"),
        ("expiresAt", "2027-01-01T09:00:00", "Field 'expiresAt' must give its offset from UTC"),
        ("expiresAt", "next week", "Field 'expiresAt' must be an ISO-8601 time"),
    ],
)
def test_bad_metadata_is_a_400_naming_the_field(admin_api, env, field, value, words) -> None:
    answer = admin_api.put(_path(env), {"enabled": True, "rules": [], field: value})
    assert answer.status == 400
    assert answer.body["message"].startswith(words)
    assert admin_api.get(_path(env)).status == 404


def test_schedules_and_other_partial_writes_keep_the_metadata(admin_api, env) -> None:
    admin_api.put(_path(env), {"enabled": True, "rules": [], **META})
    store = admin_api.services.store
    store.put_flag(env["id"], "checkout", False, False, [StaticRule(True)])
    store.create_schedule(env["id"], "checkout", 1_000.0, FlagBody(True, True, ()))
    [applied] = store.apply_due_schedules(1_000.0)
    flag = store.get_flag(env["id"], "checkout")
    assert (flag.enabled, flag.archived) == (True, True)
    assert (flag.kind, flag.owner, flag.expires_at) == (
        FlagKind.PERMANENT,
        "payments team",
        "2027-01-01T07:00:00.000Z",
    )


def test_a_restore_puts_the_metadata_back(admin_api, org, env) -> None:
    admin_api.put(_path(env), {"enabled": True, "rules": [], **META})
    admin_api.put(_path(env), {"enabled": True, "rules": []})
    change = admin_api.get(f"/organizations/{org['id']}/audit").body["items"][0]
    assert admin_api.post(f"/audit/{change['id']}/restore").status == 201
    assert admin_api.get(_path(env)).body["owner"] == "payments team"
    assert admin_api.get(_path(env)).body["kind"] == "permanent"
