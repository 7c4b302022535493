"""A dashboard page that scans a large segment does it off the event loop: the worker goes on
answering evaluations meanwhile."""

from __future__ import annotations

import asyncio
import threading

import falcon.testing
import pytest

from api.web.dashboard import segments
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin


def test_searching_a_segments_members_does_not_stall_other_requests(
    person: DashClient, dash_admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = dash_admin.tenant()
    dash_admin.segment(tenant.organization_id, "beta", [f"user-{n}" for n in range(1000)])
    dash_admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    scanning, finish = threading.Event(), threading.Event()
    real_sample = segments.member_sample

    def slow_sample(members: list[str], query: str) -> tuple[list[str], int]:
        """The scan of a million members, made to last until the evaluation has answered."""
        scanning.set()
        assert finish.wait(10), "the evaluation never answered while the scan ran"
        return real_sample(members, query)

    monkeypatch.setattr(segments, "member_sample", slow_sample)
    cookie = "; ".join(f"{k}={v}" for k, v in person.cookies.items() if v)
    page_path = f"/dashboard/organizations/{tenant.organization_id}/segments/beta"

    async def scenario() -> tuple[int, int, str]:
        async with falcon.testing.ASGIConductor(person.client.app) as conductor:
            page = asyncio.ensure_future(
                conductor.simulate_get(
                    page_path, params={"q": "user-99"}, headers={"Cookie": cookie}
                )
            )
            assert await asyncio.to_thread(scanning.wait, 10)
            answer = await conductor.simulate_post(
                "/v1/evaluate",
                json={"flagKey": "f", "userIdentifier": "u"},
                headers={"Authorization": f"ApiKey {tenant.api_key}"},
            )
            finish.set()
            shown = await page
            return answer.status_code, shown.status_code, shown.text

    evaluated, shown, text = asyncio.run(scenario())
    assert (evaluated, shown) == (200, 200)
    assert "user-999" in text and "1,000" in text
