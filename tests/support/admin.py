"""Setting up organizations, environments, keys and flags through the admin API itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Caller = Callable[..., tuple[int, Any]]


@dataclass
class Tenant:
    organization_id: str
    environment_id: str
    api_key: str
    api_key_id: str


class Admin:
    """``call(method, path, json=..., headers=...) -> (status, body)`` over any transport."""

    def __init__(self, call: Caller, token: str):
        self._call = call
        self._headers = {"Authorization": f"Bearer {token}"}

    def request(self, method: str, path: str, body: Any = None, expect: int | None = None) -> Any:
        status, answer = self._call(method, f"/admin/v1{path}", json=body, headers=self._headers)
        if expect is not None:
            assert status == expect, (method, path, status, answer)
        return answer

    def tenant(
        self,
        *,
        plan: str = "pro",
        limit: int | None = None,
        environment: str = "production",
        insights: bool = True,
        organization_id: str | None = None,
    ) -> Tenant:
        if organization_id is None:
            body: dict[str, Any] = {"name": "Test org", "plan": plan}
            if limit is not None:
                body["monthlyEvaluationLimit"] = limit
            organization_id = self.request("POST", "/organizations", body, expect=201)["id"]
        env = self.request(
            "POST", f"/organizations/{organization_id}/environments",
            {"key": environment, "name": environment.title(), "insightsEnabled": insights}, expect=201,
        )  # fmt: skip
        key = self.request(
            "POST", f"/environments/{env['id']}/api-keys", {"name": "test"}, expect=201
        )
        return Tenant(organization_id, env["id"], key["key"], key["id"])

    def flag(
        self,
        environment_id: str,
        key: str,
        rules: list[dict[str, Any]],
        *,
        enabled: bool = True,
        archived: bool = False,
    ) -> Any:
        return self.request(
            "PUT", f"/environments/{environment_id}/flags/{key}",
            {"enabled": enabled, "archived": archived, "rules": rules},
        )  # fmt: skip

    def split_tenant(self, flag: str) -> Tenant:
        """A tenant with insights on whose ``flag`` serves true to 10 % of users and false to the
        rest: the two arms release health compares, where a guarded rollout starts from."""
        tenant = self.tenant(insights=True)
        self.flag(
            tenant.environment_id, flag,
            [{"type": "PERCENTAGE", "percentage": 10}, {"type": "STATIC", "value": False}],
        )  # fmt: skip
        return tenant

    def segment(self, organization_id: str, key: str, users: list[str]) -> Any:
        return self.request(
            "PUT",
            f"/organizations/{organization_id}/segments/{key}",
            {"userIdentifiers": users},
            expect=200,
        )


def requests_caller(base_url: str) -> Caller:
    import requests

    session = requests.Session()

    def call(
        method: str, path: str, json: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        resp = session.request(method, base_url + path, json=json, headers=headers, timeout=30)
        return resp.status_code, (resp.json() if resp.content else None)

    return call


def testclient_caller(client: Any) -> Caller:
    def call(
        method: str, path: str, json: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        result = client.simulate_request(method, path, json=json, headers=headers)
        return result.status_code, (result.json if result.content else None)

    return call
