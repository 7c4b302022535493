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
    # Spelled so that only the HTTP client's reading finds the address (issue 40):
    ("http://%31%36%39.254.169.254/latest/meta-data/", "link-local"),
    ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),
    ("http://[2002:a9fe:a9fe::1]/", "link-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://" + "a" * 64 + ".example.com/", "valid host name"),
    ("http://1.2.3.4.5/", "valid host name or address"),
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
    ("http://%31%32%37.0.0.1:8080/hook", "loopback"),
    ("http://[::127.0.0.1]/hook", "loopback"),
    ("http://[64:ff9b::7f00:1]/hook", "loopback"),
    ("http://[2002:7f00:1::]/hook", "loopback"),
    ("http://127.1/hook", "loopback"),
    ("http://0x7f.0.0.1/hook", "loopback"),
    ("http://2130706433/hook", "loopback"),
    ("http://LOCALHOST/hook", "loopback"),
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
    "url",
    [
        "https://hooks.example.com/x?y=1",
        "http://hooks.example.com:8080/",
        "https://1.2.3.4/",
        "http://[64:ff9b::808:808]/",  # NAT64 of a public address
        "https://bücher.example/",
        "http://123.example/",
    ],
)
def test_public_urls_are_accepted(url: str) -> None:
    check_url(url, allow_private=False)


def test_the_host_judged_is_the_one_the_client_connects_to() -> None:
    assert check_url("http://%31%32%37.0.0.1/", allow_private=True) == "127.0.0.1"
    assert check_url("http://0x7f.1/", allow_private=True) == "127.0.0.1"
    assert check_url("https://Bücher.Example/", allow_private=False) == "xn--bcher-kva.example"


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


def test_one_malformed_webhook_fails_alone_and_the_others_are_delivered(
    make_admin: Callable[..., Any],
) -> None:
    """Issue 40: a host label over 63 characters, stored before the rule, made every delivery
    pass fail. Now its delivery is given up at its first attempt, and another organization's
    webhook, to a real receiver over a real socket, gets its event in the same pass."""
    from api.jobs.webhooks import WebhookDeliverer
    from devtools.engines.ports import free_ports
    from tests.support.legacy_webhook import insert_legacy_webhook
    from tests.support.receiver import Receiver

    admin = make_admin(webhook_allow_private=True)  # the receiver is on this machine
    broken, healthy = admin.organization(), admin.organization()
    bad_url = "https://" + "x" * 64 + ".example.com/hook"
    insert_legacy_webhook(admin.services.store, broken["id"], bad_url)
    (port,) = free_ports(1)
    receiver = Receiver(port)
    receiver.start()
    try:
        url = f"http://127.0.0.1:{port}/hook"
        made = admin.post(
            f"/organizations/{healthy['id']}/webhooks", {"url": url, "events": ["flag.changed"]}
        )
        assert made.status == 201
        receiver.secret = made.body["secret"]
        for org in (broken, healthy):
            environment = admin.environment(org["id"])
            flag = f"/environments/{environment['id']}/flags/f"
            assert admin.put(flag, {"enabled": True, "rules": []}).status == 201
        services = dataclasses.replace(admin.services, clock=time.time)
        assert WebhookDeliverer(services).deliver_due() == 2
    finally:
        receiver.stop()
    assert [e["type"] for events in receiver.events.values() for e in events] == ["flag.changed"]
    assert receiver.bad_signatures == 0
    database = sqlite3.connect(admin.services.settings.control_plane_path)
    rows = database.execute(
        "SELECT url, delivered_at IS NOT NULL, failed_at IS NOT NULL, last_error"
        " FROM webhook_outbox JOIN webhooks ON webhooks.id = webhook_outbox.webhook_id"
        " ORDER BY url"
    ).fetchall()
    assert sorted(rows) == sorted([
        (bad_url, 0, 1, "refused: the URL must have a valid host name (labels of at most 63"
                        " characters)"),
        (url, 1, 0, None),
    ])  # fmt: skip
