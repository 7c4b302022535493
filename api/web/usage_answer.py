"""The usage answer (contract section 4): one shape for the admin API's
``GET /admin/v1/organizations/{id}/usage``, the public ``GET /v1/usage`` and the dashboard's
usage page, so that the three cannot tell different stories."""

from __future__ import annotations

from typing import Any

from api.controlplane.model import Organization
from api.metering.meter import month_label


def usage(org: Organization, month: int, evaluations: int) -> dict[str, Any]:
    return {
        "month": month_label(month),
        "evaluations": evaluations,
        "limit": org.monthly_evaluation_limit,
        "hardLimit": org.hard_limit,
        "overage": evaluations > org.monthly_evaluation_limit,
        "blocked": evaluations >= org.hard_limit,
    }
