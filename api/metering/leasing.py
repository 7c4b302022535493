"""How much quota a worker leases at once: one policy for every meter.

Far from the hard threshold a worker takes a block of quota and spends it without asking the
shared counter each time; close to it (``LEASE_FLOOR``) it asks every time, so the last
evaluations are served exactly. A lease is at most ``1 / LEASE_DIVISOR`` of what remains,
so leases held by many workers cannot strand much of an organization's quota, and at most the
meter's own cap (what one trip to its counter is worth: a file lock, a database round trip).
"""

from __future__ import annotations

LEASE_FLOOR = 10_000
"""Below this much remaining quota, no lease: every evaluation goes to the shared counter."""
LEASE_DIVISOR = 100
"""A lease is at most this fraction (1 %) of the quota that remains."""


def lease_size(remaining: int, max_lease: int) -> int:
    """Quota to lease when ``remaining`` is left after the request itself is granted."""
    return 0 if remaining < LEASE_FLOOR else min(max_lease, remaining // LEASE_DIVISOR)
