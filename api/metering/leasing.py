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


def sdk_grant_size(remaining: int, wanted: int, most: int) -> int:
    """Quota to grant a local SDK that asks for ``wanted`` when ``remaining`` is left.

    The same 1 % of what remains as a worker's lease, so many SDKs cannot strand much of the
    quota, but without the floor: below it a worker asks the shared counter for each
    evaluation (a lock or a round trip), while an SDK would pay a network round trip, so it
    gets one evaluation at least. Near the threshold grants shrink to one, and the last
    evaluations are served exactly.
    """
    if remaining <= 0 or wanted <= 0:
        return 0
    return max(1, min(wanted, most, remaining // LEASE_DIVISOR))
