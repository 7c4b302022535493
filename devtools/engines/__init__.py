"""Private, throw-away instances of the real engines the cluster mode runs on (PostgreSQL,
SeaweedFS), started on loopback for ``make cluster`` and the tests. Production points
``FLAGSIGHT_DATABASE_URL`` and ``FLAGSIGHT_EVENTS_URI`` at engines an operator runs."""
