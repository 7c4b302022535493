"""The control plane: organizations, environments, API keys, segments and flags.

``store`` defines the backend interface; ``sql_store`` implements it once in SQL over a small
``sql_backend`` interface, with ``sqlite_store`` the embedded backend and ``postgres_store``
the shared one of a cluster; ``cache`` is the per-worker in-memory copy evaluation reads, ``segments`` the compact membership sets, and
``demo`` the seeded demo. Import those modules directly; this package imports nothing so that
importing ``api.controlplane.model`` stays cheap.
"""
