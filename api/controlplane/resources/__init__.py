"""The control plane's slices, one module per resource (and per part of the store that is no
admin resource: the audit log, local grants, the snapshot workers load, deployment secrets).

A slice holds its own error codes (a ``StrEnum``, gathered into ``store.ErrorCode``), its
part of the store's interface (a ``Protocol``), its SQL (a mixin of ``sql_slice.SqlSlice``)
and the restore of its audit target kind (a method marked ``@audit.restores("kind")``, found by
the audit slice). ``api.controlplane.store`` composes them, the one place that lists them. The
records evaluation and serving read stay in ``model``, the history's in ``changes``, and every
record's JSON shape in ``documents``; a new resource's records may live in its slice.

This package imports nothing, so that importing one slice loads only what it needs.
"""
