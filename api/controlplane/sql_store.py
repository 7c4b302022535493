"""The names this module held before the store was sliced, where their importers (the tests
among them) still find them: ``SqlControlPlaneStore`` is composed in ``store``, and
``sha256_hex`` belongs to the API keys slice."""

from api.controlplane.resources.api_keys import sha256_hex
from api.controlplane.store import SqlControlPlaneStore

__all__ = ["SqlControlPlaneStore", "sha256_hex"]
