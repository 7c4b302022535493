"""Which URLs a webhook may be delivered to (contract section 10's URL rule): at creation
through the admin API, and at delivery, against every address the host resolves to then."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import pytest

from api.controlplane.webhook_targets import ForbiddenTarget, check_delivery, check_url

REFUSED_ALWAYS = [
    ("http://user:s3cr3t@hooks.example.com/", "user information"),
    ("http://user@hooks.example.com/", "user information"),
    (" https://hooks.example.com/", "white space"),
    ("https://hooks.example.com/\n", "white space"),
    ("https://hooks.exa\x00mple.com/", "control characters"),
    ("https://hooks.exa\x7fmple.com/", "control characters"),
    ("https://hooks example.com/", "white space"),
    ("https://hooks.example.com:0/", "port 0"),
    ("https://hooks.example.com:99999/", "valid port"),
    ("ftp://hooks.example.com/", "http:// or https://"),
    ("https:///path", "with a host"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
]
REFUSED_UNLESS_ALLOWED = [
    ("http://127.0.0.1:8080/hook", "loopback"),
    ("http://[::1]/hook", "loopback"),
    ("http://localhost/hook", "loopback"),
    ("http://api.localhost/hook", "loopback"),
    ("http://10.1.2.3/hook", "private"),
    ("http://192.168.0.10/hook", "private"),
    ("http://172.16.5.4/hook", "private"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://100.64.0.1/hook", "private or reserved"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED_ALWAYS + REFUSED_UNLESS_ALLOWED)
def test_refused_urls_say_why(url: str, why: str) -> None:
    with pytest.raises(ForbiddenTarget, match=why):
        check_url(url, allow_private=False)


@pytest.mark.parametrize(("url", "why"), REFUSED_ALWAYS)
def test_allowing_private_targets_still_refuses_the_rest(url: str, why: str) -> None:
    with pytest.raises(ForbiddenTarget, match=why):
        check_url(url, allow_private=True)


@pytest.mark.parametrize(("url", "why"), REFUSED_UNLESS_ALLOWED)
def test_private_targets_are_allowed_when_the_operator_says_so(url: str, why: str) -> None:
    check_url(url, allow_private=True)


@pytest.mark.parametrize(
    "url", ["https://hooks.example.com/x?y=1", "http://hooks.example.com:8080/", "https://1.2.3.4/"]
)
def test_public_urls_are_accepted(url: str) -> None:
    check_url(url, allow_private=False)


def resolving_to(*addresses: str) -> Callable[[str], list[str]]:
    """A stand-in for DNS (not ours to run in a test): the host resolves to ``addresses``."""
    return lambda host: list(addresses)


@pytest.mark.parametrize(
    ("addresses", "why"),
    [
        (("127.0.0.1",), "loopback"),
        (("93.184.216.34", "10.0.0.7"), "private"),
        (("169.254.169.254",), "link-local"),
        (("fe80::1%eth0",), "link-local"),
    ],
)
def test_a_name_resolving_to_a_forbidden_address_is_refused_at_delivery(
    addresses: tuple[str, ...], why: str
) -> None:
    with pytest.raises(ForbiddenTarget, match=f"hooks.example.com resolves to .*{why}"):
        check_delivery("https://hooks.example.com/", False, resolving_to(*addresses))


def test_a_name_resolving_to_public_addresses_is_delivered_to() -> None:
    check_delivery("https://hooks.example.com/", False, resolving_to("93.184.216.34"))
    check_delivery("https://hooks.example.com/", True, resolving_to("127.0.0.1"))


def test_the_admin_api_refuses_them_with_400_naming_the_field(
    make_admin: Callable[..., Any],
) -> None:
    admin = make_admin(webhook_allow_private=False)
    org = admin.organization()
    for url, _ in [*REFUSED_ALWAYS[:3], REFUSED_UNLESS_ALLOWED[0]]:
        answer = admin.post(
            f"/organizations/{org['id']}/webhooks", {"url": url, "events": ["flag.changed"]}
        )
        assert answer.status == 400, url
        assert answer.body["message"].startswith("Field 'url' must not"), answer.body
        assert "s3cr3t" not in answer.body["message"]
    assert admin.get(f"/organizations/{org['id']}/webhooks").body["items"] == []
    assert all(
        "s3cr3t" not in str(r) for r in admin.get(f"/organizations/{org['id']}/audit").body["items"]
    )


def test_the_deliverer_refuses_a_name_that_now_resolves_to_loopback(
    make_admin: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepted at creation (a public-looking name), refused at delivery: the attempt is a
    failure with the reason, retried like an unreachable receiver, and nothing is sent."""
    from api.controlplane import webhook_targets
    from api.jobs.webhooks import WebhookDeliverer

    admin = make_admin(webhook_allow_private=False)
    org = admin.organization()
    environment = admin.environment(org["id"])
    made = admin.post(
        f"/organizations/{org['id']}/webhooks",
        {"url": "http://hooks.example.com:9/hook", "events": ["flag.changed"]},
    )
    assert made.status == 201
    path = f"/environments/{environment['id']}/flags/f"
    assert admin.put(path, {"enabled": True, "rules": []}).status == 201
    monkeypatch.setattr(webhook_targets, "system_resolver", resolving_to("127.0.0.1"))
    database = sqlite3.connect(admin.services.settings.control_plane_path)
    query = "SELECT attempts, delivered_at, failed_at, last_error FROM webhook_outbox"
    assert database.execute(query).fetchall() == [(0, None, None, None)]  # queued
    services = dataclasses.replace(admin.services, clock=time.time)  # make_admin's is fixed
    assert WebhookDeliverer(services).deliver_due() == 1
    reason = "refused: the URL its host hooks.example.com resolves to a loopback address"
    # Retried later, like an unreachable receiver; nothing was sent.
    assert database.execute(query).fetchall() == [(1, None, None, reason)]
