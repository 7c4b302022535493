"""The usage answer (contract section 4): one shape for the admin API's
``GET /admin/v1/organizations/{id}/usage``, the public ``GET /v1/usage`` and the dashboard's
usage page, so that the three cannot tell different stories."""

from __future__ import annotations

from typing import Any

from api.controlplane.model import Organization
from api.metering.meter import Meter, MeterUnavailable, month_label
from api.web.errors import ServiceUnavailable

UNKNOWN_WHILE_CUT_OFF = (
    "The evaluation count cannot be read now: the meter's database is unreachable; retry later"
)


def counted(meter: Meter, organization_id: str, month: int) -> int:
    """The month's count as the three usage reads answer it: exact, or a 503 while the meter
    cannot read it (never an older figure passed off as the count: docs/metering.md)."""
    try:
        return meter.usage(organization_id, month, exact=True)
    except MeterUnavailable:
        raise ServiceUnavailable(UNKNOWN_WHILE_CUT_OFF) from None


def usage(org: Organization, month: int, evaluations: int) -> dict[str, Any]:
    return {
        "month": month_label(month),
        "evaluations": evaluations,
        "limit": org.monthly_evaluation_limit,
        "hardLimit": org.hard_limit,
        "overage": evaluations > org.monthly_evaluation_limit,
        "blocked": evaluations >= org.hard_limit,
    }
