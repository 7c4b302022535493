"""The control plane: organizations, environments, API keys, segments and flags.

``store`` defines the backend interface, ``sqlite_store`` the embedded backend, ``cache`` the
per-worker in-memory copy evaluation reads, ``segments`` the compact membership sets, and
``demo`` the seeded demo. Import those modules directly; this package imports nothing so that
importing ``api.controlplane.model`` stays cheap.
"""
