"""Runtime settings, read once from the environment and passed down explicitly.

Nothing below this module reads ``os.environ``: every component takes what it needs from a
``Settings`` instance, so tests and embedded uses can build one by hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class BodyLimits:
    """Largest request body each kind of endpoint accepts (larger: 413)."""

    single: int = 64 * KIB
    bulk_evaluate: int = 16 * MIB
    bulk_feedback: int = 2 * MIB
    admin: int = 64 * MIB


@dataclass(frozen=True)
class S3Options:
    """How to reach S3-compatible storage, from the standard ``AWS_*`` variables.

    Unset credentials and region leave pyarrow to the AWS SDK's own chain (instance profile,
    ``~/.aws``). ``endpoint_url`` (``AWS_ENDPOINT_URL``) points at a non-AWS store; its scheme
    (``http://`` or ``https://``) is the transport.
    """

    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str | None = None
    endpoint_url: str | None = None
    connect_timeout_s: float = 2.0
    request_timeout_s: float = 10.0
    secret_variable: str | None = None
    """The variable the secret was read from, so that Dagster can be handed the variable's
    name (``EnvVar``) instead of the secret."""


@dataclass(frozen=True)
class Settings:
    """Everything configurable about one flagsight deployment."""

    data_dir: Path
    admin_token: str | None = None
    fsync_interval_s: float = 1.0
    seal_interval_s: float = 10.0
    config_poll_interval_s: float = 0.25
    schedule_cron: str = "*/5 * * * *"
    body_limits: BodyLimits = field(default_factory=BodyLimits)
    events_uri: str | None = None
    s3: S3Options = field(default_factory=S3Options)
    """Used when ``events_uri`` is ``s3://bucket/prefix`` (contract section 8)."""
    seal_retry_cap_s: float = 30.0
    """Longest wait between two sealing attempts while the lake's store is unreachable."""
    database_url: str | None = None
    """PostgreSQL for the control plane, the meter and Dagster's storage (contract section 8)."""
    header_timeout_s: float = 10.0
    """A new connection whose first request head is not complete by then is closed."""
    send_timeout_s: float = 30.0
    """A connection whose client reads none of its answer for this long (the transport's
    write buffer full and not draining) is closed, its buffered answers dropped."""
    keepalive_s: int = 30
    """A kept-alive connection waiting this long for its next request head is closed."""
    body_timeout_s: int = 30
    """How long gunicorn waits for each piece of a request body (its ``timeout``, which is
    also how long a worker may go without a heartbeat before the master replaces it)."""
    webhook_retry_base_s: float = 5.0
    """First retry after this long; each later one waits twice as long, up to the cap."""
    webhook_retry_cap_s: float = 600.0
    webhook_retry_for_s: float = 24 * 3600.0
    """How long a delivery is retried before it is given up (contract: 24 hours)."""
    webhook_timeout_s: float = 10.0
    webhook_allow_private: bool = False
    """``FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE=1``: webhooks may go to loopback and private addresses
    (receivers on the same network); link-local stays refused (``api.controlplane.webhook_targets``)."""
    streams_per_key: int = 500
    """Event streams (``/v1/stream`` and OFREP's together) one API key may hold open on a host;
    past it a new one is refused with 429 and ``Retry-After`` (contract 11)."""
    warehouse_poll_interval_s: float = 10.0
    """With the lake in a bucket: how often a host looks for a newer warehouse snapshot."""
    lifecycle_launched_days: float = 14.0
    """A flag serving one value (or whose guarded rollout completed) this long, with no change
    of ``enabled`` or rules, is ``launched`` (contract 14, docs/lifecycle.md); fractions allowed."""
    lifecycle_stale_days: float = 30.0
    """A temporary flag launched this long, or not evaluated this long, is ``stale``; also the
    window of its ``evaluations30d``, ``servedTruePercent30d`` and ``applications``."""
    lifecycle_archived_evaluated_hours: float = 24.0
    """An archived flag evaluated within this many hours is ``archivedButEvaluated``."""

    @property
    def control_plane_path(self) -> Path:
        return self.data_dir / "controlplane.sqlite3"

    @property
    def wal_dir(self) -> Path:
        """Per-worker append-only logs; local disk, because they are fsynced."""
        return self.data_dir / "wal"

    @property
    def events_location(self) -> str:
        """Where sealed Parquet events go: a local path or a pyarrow filesystem URI."""
        return self.events_uri or str(self.data_dir / "events")

    @property
    def host_id_path(self) -> Path:
        """This host's stable identity in the shared lake (``api.infra.host_identity``)."""
        return self.data_dir / "host-id"

    @property
    def stream_slots_dir(self) -> Path:
        """Where each API key's event streams are counted across workers (``api.infra.host_slots``)."""
        return self.data_dir / "run" / "streams"

    @property
    def meter_path(self) -> Path:
        return self.data_dir / "run" / "meter.bin"

    @property
    def metrics_dir(self) -> Path:
        return self.data_dir / "run" / "prometheus"

    @property
    def demo_key_path(self) -> Path:
        """The demo API key's plaintext (mode 0600), kept so that restarts keep the key."""
        return self.data_dir / "demo-api-key"

    @property
    def warehouse_path(self) -> Path:
        return self.data_dir / "warehouse.duckdb"

    @property
    def webhook_lock_path(self) -> Path:
        """The file whose ``flock`` makes one process of the server deliver webhooks."""
        return self.data_dir / "run" / "webhooks.lock"

    @property
    def dagster_home(self) -> Path:
        return self.data_dir / "dagster"

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        return cls(
            data_dir=Path(env.get("FLAGSIGHT_DATA_DIR", "./var")).resolve(),
            admin_token=env.get("FLAGSIGHT_ADMIN_TOKEN") or None,
            fsync_interval_s=float(env.get("FLAGSIGHT_FSYNC_INTERVAL", "1.0")),
            seal_interval_s=float(env.get("FLAGSIGHT_SEAL_INTERVAL", "10")),
            config_poll_interval_s=float(env.get("FLAGSIGHT_CONFIG_POLL_INTERVAL", "0.25")),
            schedule_cron=env.get("FLAGSIGHT_PIPELINE_CRON", "*/5 * * * *"),
            events_uri=env.get("FLAGSIGHT_EVENTS_URI") or None,
            seal_retry_cap_s=float(env.get("FLAGSIGHT_SEAL_RETRY_CAP", "30")),
            s3=S3Options(
                access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
                secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
                session_token=env.get("AWS_SESSION_TOKEN") or None,
                region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
                endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
                connect_timeout_s=float(env.get("FLAGSIGHT_S3_CONNECT_TIMEOUT", "2")),
                request_timeout_s=float(env.get("FLAGSIGHT_S3_REQUEST_TIMEOUT", "10")),
                secret_variable="AWS_SECRET_ACCESS_KEY"
                if env.get("AWS_SECRET_ACCESS_KEY")
                else None,
            ),
            database_url=env.get("FLAGSIGHT_DATABASE_URL") or None,
            header_timeout_s=float(env.get("FLAGSIGHT_HEADER_TIMEOUT", "10")),
            send_timeout_s=float(env.get("FLAGSIGHT_SEND_TIMEOUT", "30")),
            keepalive_s=int(env.get("FLAGSIGHT_KEEPALIVE_TIMEOUT", "30")),
            body_timeout_s=int(env.get("FLAGSIGHT_BODY_TIMEOUT", "30")),
            webhook_retry_base_s=float(env.get("FLAGSIGHT_WEBHOOK_RETRY_BASE", "5")),
            webhook_retry_cap_s=float(env.get("FLAGSIGHT_WEBHOOK_RETRY_CAP", "600")),
            webhook_timeout_s=float(env.get("FLAGSIGHT_WEBHOOK_TIMEOUT", "10")),
            webhook_allow_private=env.get("FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE") == "1",
            warehouse_poll_interval_s=float(env.get("FLAGSIGHT_WAREHOUSE_POLL_INTERVAL", "10")),
            streams_per_key=int(env.get("FLAGSIGHT_STREAMS_PER_KEY", "500")),
            lifecycle_launched_days=float(env.get("FLAGSIGHT_LIFECYCLE_LAUNCHED_DAYS", "14")),
            lifecycle_stale_days=float(env.get("FLAGSIGHT_LIFECYCLE_STALE_DAYS", "30")),
            lifecycle_archived_evaluated_hours=float(
                env.get("FLAGSIGHT_LIFECYCLE_ARCHIVED_EVALUATED_HOURS", "24")
            ),
        )
