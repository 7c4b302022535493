"""``tests/cases/conditions.json`` as segments: each case's condition the one condition of a
segment, named by a flag's SEGMENT rule, so that a runner asks whether the case's user is in
the segment through whatever it runs (the service, the native path, the SDK's local mode):
the case holds exactly when the flag answers ``true`` with ``matchedRuleType`` ``SEGMENT``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.admin import Admin, Tenant

CASES: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "cases" / "conditions.json").read_text()
)
HOLDS: list[dict[str, Any]] = CASES["cases"]
"""The cases whose attributes every door takes (``oddAttributes`` are OFREP's)."""


def key(index: int) -> str:
    """The segment's and the flag's key of case ``index``."""
    return f"case-{index}"


def answer(case: dict[str, Any]) -> tuple[bool, str | None]:
    """``(value, matchedRuleType)`` the case's flag must answer."""
    return (True, "SEGMENT") if case["holds"] else (False, None)


def put_cases(admin: Admin, tenant: Tenant, cases: list[dict[str, Any]] = HOLDS) -> None:
    """Each case's segment (its one condition) and flag, through the admin API."""
    for index, case in enumerate(cases):
        admin.request(
            "PUT", f"/organizations/{tenant.organization_id}/segments/{key(index)}",
            {"conditions": [case["condition"]]}, expect=200,
        )  # fmt: skip
        admin.flag(tenant.environment_id, key(index), [{"type": "SEGMENT", "segment": key(index)}])
