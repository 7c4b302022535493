"""Webhooks stored before user information was refused (``user:pass@`` in the URL, still in an
existing database, SQLite or PostgreSQL): no answer of the admin API shows the password, or
the user name, which may be the credential itself (``webhook_targets.shown_url``); they stay
recognisable, and nothing is ever delivered to them."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon.testing
import pytest
import requests

from api.controlplane.postgres_store import PostgresControlPlaneStore
from api.controlplane.sql_store import SqlControlPlaneStore
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.controlplane.webhook_targets import check_url, shown_url
from api.jobs.webhooks import WebhookDeliverer
from api.settings import Settings
from tests.admin.conftest import ADMIN_TOKEN, AdminClient, build_app, build_services
from tests.support.legacy_webhook import (
    LEGACY_URL,
    PASSWORD,
    SHOWN_URL,
    USER,
    insert_legacy_webhook,
)


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (LEGACY_URL, SHOWN_URL),
        ("http://user:pass@hooks.example.com/", "http://***@hooks.example.com/"),
        ("http://tok_123@hooks.example.com/x", "http://***@hooks.example.com/x"),
        ("http://:pass@hooks.example.com", "http://***@hooks.example.com"),
        ("https://u:p@ss@hooks.example.com/", "https://***@hooks.example.com/"),  # raw '@'
        ("https://u:p%40ss@[2001:db8::1]:9/a#f", "https://***@[2001:db8::1]:9/a#f"),
        ("HTTPS://u:p@hooks.example.com?x=a@b", "HTTPS://***@hooks.example.com?x=a@b"),
        # what URL parsers drop (the rule before abc0114 parsed, it did not refuse)
        ("http://u:pa\tss@hooks.example.com/", "http://***@hooks.example.com/"),
        ("http:/\n/u:p@hooks.example.com/", "http://***@hooks.example.com/"),
        (" http://u:p@hooks.example.com/", "http://***@hooks.example.com/"),
    ],
)
def test_user_information_is_masked_as_a_whole(stored: str, shown: str) -> None:
    assert shown_url(stored) == shown


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/x?y=1",
        "http://hooks.example.com:8080/",
        "https://1.2.3.4/",
        "https://hooks.example.com/p@th?to=a@b#c@d",  # '@' after the host is no user information
        "not a url",
        "",
    ],
)
def test_a_url_without_user_information_is_shown_as_stored(url: str) -> None:
    assert shown_url(url) == url


def test_every_url_the_rule_accepts_is_shown_as_stored() -> None:
    for url in ["https://hooks.example.com/flagsight", "http://[2606:4700::1111]:8080/a?b=c#d"]:
        check_url(url, allow_private=False)
        assert shown_url(url) == url


# --- the admin API, on both backends ----------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def admin(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AdminClient]:
    """The admin API over an existing control plane in SQLite or PostgreSQL, with the URL rule
    as an operator has it by default (private targets refused)."""
    settings = Settings(data_dir=tmp_path / "data", admin_token=ADMIN_TOKEN)
    settings.data_dir.mkdir(parents=True)
    store: SqlControlPlaneStore
    if request.param == "sqlite":
        store = SqliteControlPlaneStore(settings.control_plane_path)
    else:
        store = PostgresControlPlaneStore(request.getfixturevalue("postgres_url"))
    services = build_services(settings, store)
    yield AdminClient(falcon.testing.TestClient(build_app(services)), services)
    services.config.stop()
    services.meter.close()
    store.close()


@pytest.fixture
def legacy(admin: AdminClient) -> tuple[str, str]:
    """An organization and its legacy webhook: (organization id, webhook id)."""
    org = admin.organization()
    return org["id"], insert_legacy_webhook(admin.services.store, org["id"])


def assert_not_shown(answer: Any) -> None:
    text = str(answer)
    assert PASSWORD not in text and USER not in text, text


def audit_of(admin: AdminClient, org_id: str) -> list[dict[str, Any]]:
    answer = admin.get(f"/organizations/{org_id}/audit")
    assert answer.status == 200
    return answer.body["items"]


def test_get_webhooks_masks_the_user_information(
    admin: AdminClient, legacy: tuple[str, str]
) -> None:
    org_id, hook_id = legacy
    answer = admin.get(f"/organizations/{org_id}/webhooks")
    assert answer.status == 200
    assert_not_shown(answer.body)
    assert answer.body["items"] == [
        {"id": hook_id, "url": SHOWN_URL, "events": ["flag.changed"],
         "createdAt": "2026-11-01T09:00:00.000Z"},
    ]  # fmt: skip


def test_the_audit_log_masks_it_in_records_written_before_and_after(
    admin: AdminClient, legacy: tuple[str, str]
) -> None:
    """The creation's record (written before the rule) is masked where it is shown; the
    deletion's record is written masked, so the database gets no new copy of the password."""
    org_id, hook_id = legacy
    created = audit_of(admin, org_id)[0]
    assert created["action"] == "webhook.created" and created["target"] == f"webhook:{hook_id}"
    assert created["after"]["url"] == SHOWN_URL
    assert_not_shown(created)

    assert admin.delete(f"/webhooks/{hook_id}").status == 204
    deleted = audit_of(admin, org_id)[0]
    assert deleted["action"] == "webhook.deleted" and deleted["before"]["url"] == SHOWN_URL
    assert_not_shown(audit_of(admin, org_id))
    stored = admin.services.store._fetchall(
        "SELECT action FROM audit_log WHERE before LIKE ? OR after LIKE ?",
        (f"%{PASSWORD}%", f"%{PASSWORD}%"),
    )
    assert [row["action"] for row in stored] == ["webhook.created"]  # history is not rewritten


def test_restoring_its_creation_deletes_it_and_the_answer_masks_it(
    admin: AdminClient, legacy: tuple[str, str]
) -> None:
    org_id, _ = legacy
    created = audit_of(admin, org_id)[0]
    answer = admin.post(f"/audit/{created['id']}/restore")
    assert answer.status == 201, answer
    assert answer.body["before"]["url"] == SHOWN_URL and answer.body["after"] is None
    assert_not_shown(answer.body)
    assert admin.get(f"/organizations/{org_id}/webhooks").body["items"] == []
    assert_not_shown(audit_of(admin, org_id))


def test_restoring_its_deletion_is_refused_saying_why_without_the_url(
    admin: AdminClient, legacy: tuple[str, str]
) -> None:
    """A deleted webhook never comes back (its secret is not in the log); the message says so,
    and that a new webhook is the way, which the URL rule would refuse with this URL."""
    org_id, hook_id = legacy
    assert admin.delete(f"/webhooks/{hook_id}").status == 204
    deleted = audit_of(admin, org_id)[0]
    answer = admin.post(f"/audit/{deleted['id']}/restore")
    assert answer.status == 409
    assert "cannot be restored: a webhook's secret is not kept in the log" in answer.body["message"]
    assert_not_shown(answer.body)
    again = admin.post(
        f"/organizations/{org_id}/webhooks", {"url": LEGACY_URL, "events": ["flag.changed"]}
    )
    assert again.status == 400
    assert again.body["message"] == (
        "Field 'url' must not contain user information (user:password@)"
    )


def test_nothing_is_delivered_to_it(
    admin: AdminClient,
    legacy: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Queued like any webhook's event, refused at its first attempt (``check_delivery``) and
    given up at once (no retry can succeed); no request is made, and neither the outbox's
    error nor the log names the password."""
    org_id, hook_id = legacy
    environment = admin.environment(org_id)
    flag = {"enabled": True, "rules": []}
    assert admin.put(f"/environments/{environment['id']}/flags/f", flag).status == 201
    posted: list[str] = []

    def post(self: requests.Session, url: str, **kwargs: Any) -> requests.Response:
        posted.append(url)
        answer = requests.Response()
        answer.status_code = 200
        return answer

    monkeypatch.setattr(requests.Session, "post", post)
    services = dataclasses.replace(admin.services, clock=time.time)  # the fixture's is fixed
    with caplog.at_level(logging.INFO, logger="flagsight.webhooks"):
        assert WebhookDeliverer(services).deliver_due() == 1
    assert posted == []
    rows = admin.services.store._fetchall(
        "SELECT webhook_id, attempts, delivered_at, failed_at, last_error FROM webhook_outbox"
    )
    (row,) = rows
    assert (row[0], row[1], row[2]) == (hook_id, 1, None)
    assert row[3] is not None  # given up at the first attempt, not retried for a day
    assert row[4] == "refused: the URL must not contain user information (user:password@)"
    assert "webhook failed" in caplog.text and PASSWORD not in caplog.text
    assert WebhookDeliverer(services).deliver_due() == 0  # nothing left to try
