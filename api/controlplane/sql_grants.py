"""The names this module held before the store was sliced, where their importers (the tests
among them) still find them: the grant ledger is the slice ``resources.grants``."""

from api.controlplane.resources.grants import (
    GIVE_BACK_WINDOW_S,
    GrantState,
    GrantTooOld,
    LocalGrant,
)

__all__ = ["GIVE_BACK_WINDOW_S", "GrantState", "GrantTooOld", "LocalGrant"]
