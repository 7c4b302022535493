"""usage.threshold (contract section 10): at 80 %, 100 % and 110 % of the plan, once each per
organization and month, queued for the organization's subscribed webhooks."""

from __future__ import annotations

import json
import time

from api.jobs.webhooks import WebhookDeliverer
from api.metering.meter import month_of


def announced(services) -> list[dict]:
    deliveries = services.store.due_deliveries(time.time() + 1)
    events = [json.loads(d.body) for d in deliveries]
    return [e["data"] for e in events if e["type"] == "usage.threshold"]


def subscribe(admin, organization_id: str) -> None:
    """A webhook of the organization for usage.threshold (its deliveries are only queued)."""
    admin.request(
        "POST",
        f"/organizations/{organization_id}/webhooks",
        {"url": "http://127.0.0.1:9/hook", "events": ["usage.threshold"]},
        expect=201,
    )


def test_each_threshold_is_announced_once_a_month(admin, services) -> None:
    free = admin.tenant(plan="free")  # 10,000 evaluations a month
    subscribe(admin, free.organization_id)
    deliverer = WebhookDeliverer(services)
    month = month_of(services.clock())
    hard = 11_000

    def use(evaluations: int) -> None:
        services.meter.consume(free.organization_id, month, evaluations, hard)
        deliverer.announce_usage(force=True)

    use(7_999)
    assert announced(services) == []
    use(1)  # 8,000: 80 %
    use(100)
    assert [a["percent"] for a in announced(services)] == [80]
    use(1_900)  # 10,000: 100 %
    use(1_000)  # 11,000: 110 %
    use(0)
    data = announced(services)
    assert [a["percent"] for a in data] == [80, 100, 110]
    assert {a["organizationId"] for a in data} == {free.organization_id}
    assert data[0]["limit"] == 10_000 and data[2]["evaluations"] == 11_000

    # Another deliverer (a restarted worker) announces nothing twice.
    WebhookDeliverer(services).announce_usage(force=True)
    assert [a["percent"] for a in announced(services)] == [80, 100, 110]


def test_110_percent_is_announced_at_the_hard_threshold_of_any_limit(admin, services) -> None:
    """1.1 x 1,234,567 is 1,358,023.7: usage stops at the hard threshold, 1,358,023."""
    org = admin.tenant(plan="enterprise", limit=1_234_567)
    subscribe(admin, org.organization_id)
    deliverer = WebhookDeliverer(services)
    month = month_of(services.clock())
    hard = 1_358_023
    assert services.meter.consume(org.organization_id, month, hard + 5, hard) == hard
    deliverer.announce_usage(force=True)
    data = announced(services)
    assert [a["percent"] for a in data] == [80, 100, 110]
    assert data[2]["evaluations"] == hard
