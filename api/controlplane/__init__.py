"""The control plane: organizations, environments, API keys, segments and flags.

``store`` composes the store of its slices (``resources``: one module per resource, each with
its codes, its part of the interface, its SQL and its restore): ``ControlPlaneStore``, the
interface, and ``SqlControlPlaneStore``, its SQL on the shared ``sql_slice`` over a small
``sql_backend`` interface, with ``sqlite_store`` the embedded backend and ``postgres_store``
the shared one of a cluster; ``cache`` is the per-worker in-memory copy evaluation reads. Import those modules directly; this package imports nothing so that
importing ``api.controlplane.model`` stays cheap.
"""
