"""The organization's monthly quota on every evaluate answer, as ``RateLimit`` header fields
(``GET /v1/usage``, in ``api.web.public.usage``, gives the same figures as a body).

The fields follow the IETF draft "RateLimit header fields for HTTP"
(draft-ietf-httpapi-ratelimit-headers-11): one policy named ``monthly`` whose quota ``q`` is
what the organization can be served this UTC month (the plan's hard threshold), and the
service limit: ``r`` evaluations left before that threshold, ``t`` seconds until the next UTC
month, when the count starts again::

    RateLimit-Policy: "monthly";q=1100000
    RateLimit: "monthly";r=1099958;t=604800

The unit is one evaluation (a bulk answer's entry is one); the window is a calendar month, of
varying length, so the policy has no fixed ``w``.

Evaluate is the hot path: reading the shared meter's usage takes its file lock, so each
worker reads it at most once a second per organization and keeps both fields encoded until
the second changes. ``r`` can thus lag this worker's and others' evaluations by a second; the
draft asks clients not to take it as a promise either way.
"""

from __future__ import annotations

from typing import NamedTuple

import falcon.asgi

from api.metering.meter import month_of, seconds_until_next_month
from api.serving.services import Services

POLICY = "monthly"


class QuotaFields(NamedTuple):
    """One organization's fields for one second, as Falcon sets them and as ASGI sends them."""

    second: int
    policy: str
    limit: str
    remaining: int
    hard_limit: int
    reset_s: int
    policy_header: tuple[bytes, bytes]
    """``RateLimit-Policy`` as an ASGI answer carries it (``api.web.front``'s answers)."""
    limit_header: tuple[bytes, bytes]


def quota_fields(second: int, hard_limit: int, remaining: int, reset_s: int) -> QuotaFields:
    policy = f'"{POLICY}";q={hard_limit}'
    limit = f'"{POLICY}";r={remaining};t={reset_s}'
    return QuotaFields(
        second,
        policy,
        limit,
        remaining,
        hard_limit,
        reset_s,
        (b"ratelimit-policy", policy.encode("ascii")),
        (b"ratelimit", limit.encode("ascii")),
    )


class QuotaHeaders:
    """Sets ``RateLimit-Policy`` and ``RateLimit`` on an answer, from a per-second cache."""

    def __init__(self, services: Services):
        self._services = services
        self._cache: dict[str, QuotaFields] = {}

    def apply(self, resp: falcon.asgi.Response, organization_id: str) -> None:
        fields = self.fields(organization_id)
        resp.set_header("RateLimit-Policy", fields.policy)
        resp.set_header("RateLimit", fields.limit)

    def fields(self, organization_id: str) -> QuotaFields:
        """The organization's fields as of at most a second ago (for answers not made by
        ``apply``); on every evaluate answer, so cached per second."""
        now = self._services.clock()
        entry = self._cache.get(organization_id)
        if entry is None or entry[0] != int(now):
            entry = self._cache[organization_id] = self._fields(organization_id, now)
        return entry

    def remaining(self, organization_id: str) -> int:
        """Evaluations left before the hard threshold, as of at most a second ago: cheap
        enough for every request (a meter in PostgreSQL pays a round trip per read)."""
        return self.fields(organization_id).remaining

    def spent(self, organization_id: str, evaluations: int) -> None:
        """Take this worker's own evaluations off the cached ``remaining`` at once, so that
        what this worker itself served is never missed; others' show within a second."""
        entry = self._cache.get(organization_id)
        if entry is not None and evaluations:
            remaining = max(0, entry.remaining - evaluations)
            self._cache[organization_id] = quota_fields(
                entry.second, entry.hard_limit, remaining, entry.reset_s
            )

    def _fields(self, organization_id: str, now: float) -> QuotaFields:
        organization = self._services.config.organization(organization_id)
        hard_limit = organization.hard_limit if organization is not None else 0
        used = self._services.meter.usage(organization_id, month_of(now))
        remaining = max(0, hard_limit - used)
        return quota_fields(int(now), hard_limit, remaining, seconds_until_next_month(now))
