"""The metrics slice (contract 13): its codes, its part of the store, its SQL and its restores.

A metric is an organization's, by key: what release health makes of each exposed user's
tracked events named ``event`` within ``window_hours`` of its first exposure (``kind``), and
which direction is better. A flag environment follows metrics (``metric_follows``), and a
guarded rollout may guard on one (a ``metric:<key>`` guardrail): the pipeline compares both
(``metric_follows()``). Metrics and follows change no evaluation, so no write here moves the
config version; each is audited and restorable all the same.

A metric a running or held rollout guards on cannot be deleted, nor change its kind (the
rollout's tolerance is in the kind's unit); deleting a metric deletes its follows, each flag's
change audited on its own, deleting a flag drops the flag's (``_drop_flag_follows``, called by
the flags slice). Environments are never deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

import msgspec
from flagsight_core.contract import KEY_PATTERN

from api.controlplane import documents
from api.controlplane.changes import (
    DEFAULT_METRIC_TOLERANCES,
    Actor,
    AuditRecord,
    RolloutPlan,
    RolloutState,
    guarded_metric,
    guarded_metrics,
    metric_guardrail,
)
from api.controlplane.errors import (
    ConflictError,
    ConflictReason,
    InvalidError,
    NotFoundError,
)
from api.controlplane.model import Better, Metric, MetricFollow, MetricKind
from api.controlplane.resources.audit import Restore, restores
from api.controlplane.resources.flags import FlagCode
from api.controlplane.sql_backend import Connection, Row
from api.controlplane.sql_slice import SqlSlice

MAX_WINDOW_HOURS = 720
"""A metric's window is 1 to 720 hours (30 days) after a user's first exposure: events are
kept in the warehouse for longer, and a rollout waits for its users' windows."""

MAX_CONVERSION_TOLERANCE = 100.0
"""A conversion guardrail's tolerance is in percentage points: above 100 it could never be
exceeded."""

GUARDING_STATES = (RolloutState.RUNNING, RolloutState.HELD)
"""The rollouts that guard on their metrics: a held one may run again (a person, a restore)."""

METRIC_RESOURCE = "metric"
"""``NotFoundError.resource`` of a metric."""


class MetricCode(StrEnum):
    METRIC_NOT_FOUND = "metric_not_found"
    """``NotFoundError``: details["identifier"] is the key the caller gave."""
    METRIC_IN_USE = "metric_in_use"
    """``ConflictError``: a running or held rollout of ``flag`` in ``environment`` (its key)
    guards on ``metric``, which cannot be deleted."""
    METRIC_KIND_IN_USE = "metric_kind_in_use"
    """``ConflictError``: ``metric``'s kind cannot change (to ``kind``) while a rollout of
    ``flag`` in ``environment`` guards on it: the rollout's tolerance is in its unit."""
    METRIC_STILL_ABSENT = "metric_still_absent"
    """A restore that would change nothing (``ConflictReason.NOTHING_TO_RESTORE``)."""
    METRIC_GONE = "metric_gone"
    """A restore refused (``ConflictReason.NOT_RESTORABLE``): the record's flag followed, or
    its rollout guarded on, ``metric``, which was deleted since."""
    METRIC_KIND_CHANGED = "metric_kind_changed"
    """A restore refused (``ConflictReason.NOT_RESTORABLE``): the record's rollout guarded on
    ``metric`` when it was a ``was`` metric, and it is a ``kind`` one now (the rollout's
    tolerance for it is in the old kind's unit)."""
    # InvalidError: details["field"] is the store's field at fault
    METRIC_KEY_MALFORMED = "metric_key_malformed"
    METRIC_EVENT_MALFORMED = "metric_event_malformed"
    METRIC_WINDOW_OUT_OF_RANGE = "metric_window_out_of_range"
    """``window_hours`` is not 1 to ``maximum``."""
    UNKNOWN_METRIC = "unknown_metric"
    """``metrics[index]`` names ``metric``, which the organization does not have."""
    UNKNOWN_METRIC_GUARDRAIL = "unknown_metric_guardrail"
    """``guardrails[index]`` guards on ``metric``, which the organization does not have."""
    METRIC_TOLERANCE_REQUIRED = "metric_tolerance_required"
    """``guardrail`` guards on a metric of ``kind`` (count, sum, mean), whose unit the service
    cannot guess: the rollout must name its tolerance."""
    METRIC_TOLERANCE_OUT_OF_RANGE = "metric_tolerance_out_of_range"
    """``guardrail`` guards on a conversion: its tolerance (``tolerance``) is in percentage
    points, at most ``maximum``."""


def metric_of(row: Row) -> Metric:
    return Metric(
        row["organization_id"], row["key"], row["name"], row["event"], MetricKind(row["kind"]),
        int(row["window_hours"]), Better(row["better"]),
        datetime.fromisoformat(row["created_at"]), datetime.fromisoformat(row["updated_at"]),
    )  # fmt: skip


def metric_document(metric: Metric) -> dict[str, Any]:
    """A metric as the admin API answers it, and as its audit records keep it."""
    return {
        "key": metric.key,
        "name": metric.name,
        "event": metric.event,
        "kind": str(metric.kind),
        "windowHours": metric.window_hours,
        "better": str(metric.better),
        "createdAt": _iso(metric.created_at),
        "updatedAt": _iso(metric.updated_at),
    }


def metric_from_document(organization_id: str, document: dict[str, Any]) -> Metric:
    """The metric a ``metric_document`` describes (a restore's way back)."""
    return Metric(
        organization_id, document["key"], document["name"], document["event"],
        MetricKind(document["kind"]), document["windowHours"], Better(document["better"]),
        datetime.fromisoformat(document["createdAt"]),
        datetime.fromisoformat(document["updatedAt"]),
    )  # fmt: skip


def _iso(moment: datetime) -> str:
    return documents.iso_time(moment.timestamp())


def _follows_document(keys: Sequence[str]) -> dict[str, Any]:
    """A flag's follows as the admin API answers them, and as their audit records keep them."""
    return {"metrics": list(keys)}


_METRIC_BY_KEY = "SELECT * FROM metrics WHERE organization_id = ? AND key = ?"


class MetricStore(Protocol):
    def put_metric(
        self,
        organization_id: str,
        key: str,
        *,
        name: str,
        event: str,
        kind: MetricKind,
        window_hours: int,
        better: Better,
        actor: str = Actor.SYSTEM,
    ) -> Metric:
        """Create or replace the metric (its ``created_at`` kept when replaced);
        ``ConflictError`` (``METRIC_KIND_IN_USE``) for a new kind while a rollout guards on
        it."""
        ...

    def get_metric(self, organization_id: str, key: str) -> Metric | None: ...

    def list_metrics(self, organization_id: str) -> list[Metric]:
        """By key."""
        ...

    def delete_metric(self, organization_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        """Delete the metric and its follows; ``ConflictError`` (``METRIC_IN_USE``) while a
        running or held rollout guards on it."""
        ...

    def flag_metrics(self, environment_id: str, flag_key: str) -> list[str]:
        """The keys of the metrics the flag follows, in the order they were set."""
        ...

    def set_flag_metrics(
        self,
        environment_id: str,
        flag_key: str,
        keys: Sequence[str],
        *,
        actor: str = Actor.SYSTEM,
    ) -> list[str]:
        """Replace the metrics the flag follows (a key given twice counts once); every key
        must be a metric of the environment's organization (``InvalidError`` naming
        ``metrics``), the flag must exist (``NotFoundError``)."""
        ...

    def metric_follows(self) -> list[MetricFollow]:
        """Every flag environment and metric it follows, or that a running or held rollout of
        the flag guards on, once each; by environment, flag and metric key."""
        ...


class MetricSql(SqlSlice):
    """Metrics and the flags that follow them, in SQL (see ``MetricStore``)."""

    codes = MetricCode

    def put_metric(
        self,
        organization_id: str,
        key: str,
        *,
        name: str,
        event: str,
        kind: MetricKind,
        window_hours: int,
        better: Better,
        actor: str = Actor.SYSTEM,
    ) -> Metric:
        _check_metric(key, event, window_hours)
        with self._transaction(write=True) as conn:
            self._require_organization(conn, organization_id)
            before = self._metric_in(conn, organization_id, key)
            now = datetime.fromisoformat(self._now())
            metric = Metric(
                organization_id, key, name, event, MetricKind(kind), window_hours,
                Better(better), now if before is None else before.created_at, now,
            )  # fmt: skip
            self._write_metric(conn, before, metric, actor=actor, action="metric.put")
        return metric

    @staticmethod
    def _metric_in(conn: Connection, organization_id: str, key: str) -> Metric | None:
        row = conn.execute(_METRIC_BY_KEY, (organization_id, key)).fetchone()
        return metric_of(row) if row else None

    def _write_metric(
        self,
        conn: Connection,
        before: Metric | None,
        metric: Metric,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Create or replace ``metric`` (``before``: as it is now) inside the caller's write
        transaction, audited; a new kind is refused while a rollout guards on it. Putting a
        metric and restoring one both come here."""
        if before is not None and before.kind is not metric.kind:
            self._check_metric_unguarded(
                conn, metric.organization_id, metric.key, MetricCode.METRIC_KIND_IN_USE,
                kind=str(metric.kind),
            )  # fmt: skip
        conn.execute(
            "INSERT INTO metrics (organization_id, key, name, event, kind, window_hours, better,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (organization_id, key) DO UPDATE SET name = excluded.name,"
            " event = excluded.event, kind = excluded.kind,"
            " window_hours = excluded.window_hours, better = excluded.better,"
            " created_at = excluded.created_at, updated_at = excluded.updated_at",
            (metric.organization_id, metric.key, metric.name, metric.event, str(metric.kind),
             metric.window_hours, str(metric.better), _iso(metric.created_at),
             _iso(metric.updated_at)),
        )  # fmt: skip
        return self._audit(
            conn, metric.organization_id, actor, action,
            f"metric:{metric.organization_id}/{metric.key}",
            None if before is None else metric_document(before), metric_document(metric),
            restored_from,
        )  # fmt: skip

    def get_metric(self, organization_id: str, key: str) -> Metric | None:
        row = self._fetchone(_METRIC_BY_KEY, (organization_id, key))
        return metric_of(row) if row else None

    def list_metrics(self, organization_id: str) -> list[Metric]:
        rows = self._fetchall(
            "SELECT * FROM metrics WHERE organization_id = ? ORDER BY key", (organization_id,)
        )
        return [metric_of(row) for row in rows]

    def delete_metric(self, organization_id: str, key: str, *, actor: str = Actor.SYSTEM) -> None:
        with self._transaction(write=True) as conn:
            self._delete_metric(conn, organization_id, key, actor=actor, action="metric.deleted")

    def _delete_metric(
        self,
        conn: Connection,
        organization_id: str,
        key: str,
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Delete the metric and every follow of it inside the caller's write transaction,
        refused while a rollout guards on it. Deleting a metric and restoring its creation
        both come here. Each flag that followed it changes too, so each gets its own audit
        record (the same action): once the metric is back, restoring that record puts the
        flag's follows back as they were."""
        before = self._metric_in(conn, organization_id, key)
        if before is None:
            raise NotFoundError(MetricCode.METRIC_NOT_FOUND, METRIC_RESOURCE, key)
        self._check_metric_unguarded(conn, organization_id, key, MetricCode.METRIC_IN_USE)
        followers = conn.execute(
            "SELECT f.environment_id, f.flag_key FROM metric_follows f"
            " JOIN environments e ON e.id = f.environment_id"
            " WHERE e.organization_id = ? AND f.metric_key = ?"
            " ORDER BY f.environment_id, f.flag_key",
            (organization_id, key),
        ).fetchall()
        for row in followers:
            environment_id, flag_key = row["environment_id"], row["flag_key"]
            kept = [k for k in self._follows_in(conn, environment_id, flag_key) if k != key]
            self._write_follows(
                conn, organization_id, environment_id, flag_key, kept, actor=actor,
                action=action, restored_from=restored_from,
            )  # fmt: skip
        conn.execute(
            "DELETE FROM metrics WHERE organization_id = ? AND key = ?", (organization_id, key)
        )
        return self._audit(
            conn, organization_id, actor, action, f"metric:{organization_id}/{key}",
            metric_document(before), None, restored_from,
        )  # fmt: skip

    @staticmethod
    def _guarding_rollouts(conn: Connection, organization_id: str) -> list[tuple[Row, list[str]]]:
        """The organization's running and held rollouts, with their guardrails, by
        environment and flag."""
        rows = conn.execute(
            "SELECT e.key AS environment, r.flag_key AS flag, r.guardrails FROM rollouts r"
            " JOIN environments e ON e.id = r.environment_id"
            f" WHERE e.organization_id = ? AND r.state IN ({', '.join('?' * len(GUARDING_STATES))})"
            " ORDER BY e.rowid, r.flag_key",
            (organization_id, *map(str, GUARDING_STATES)),
        ).fetchall()
        return [(row, msgspec.json.decode(row["guardrails"])) for row in rows]

    def _check_metric_unguarded(
        self, conn: Connection, organization_id: str, key: str, code: MetricCode, **details: Any
    ) -> None:
        """``ConflictError`` (``code``) naming the first rollout that guards on the metric."""
        for row, guardrails in self._guarding_rollouts(conn, organization_id):
            if metric_guardrail(key) in guardrails:
                raise ConflictError(
                    code, ConflictReason.METRIC_IN_USE,
                    metric=key, flag=row["flag"], environment=row["environment"], **details,
                )  # fmt: skip

    def flag_metrics(self, environment_id: str, flag_key: str) -> list[str]:
        with self._transaction(write=False) as conn:
            return self._follows_in(conn, environment_id, flag_key)

    @staticmethod
    def _follows_in(conn: Connection, environment_id: str, flag_key: str) -> list[str]:
        rows = conn.execute(
            "SELECT metric_key FROM metric_follows WHERE environment_id = ? AND flag_key = ?"
            " ORDER BY position",
            (environment_id, flag_key),
        ).fetchall()
        return [row[0] for row in rows]

    def set_flag_metrics(
        self,
        environment_id: str,
        flag_key: str,
        keys: Sequence[str],
        *,
        actor: str = Actor.SYSTEM,
    ) -> list[str]:
        wanted = list(dict.fromkeys(keys))
        with self._transaction(write=True) as conn:
            environment = self._require_environment(conn, environment_id)
            if self._flag_in(conn, environment_id, flag_key) is None:
                raise NotFoundError(FlagCode.FLAG_NOT_FOUND, "flag", flag_key)
            for index, key in enumerate(wanted):
                if self._metric_in(conn, environment.organization_id, key) is None:
                    raise InvalidError(
                        MetricCode.UNKNOWN_METRIC, "metrics", metric=key, index=index
                    )
            self._write_follows(
                conn, environment.organization_id, environment_id, flag_key, wanted,
                actor=actor, action="flagMetrics.put",
            )  # fmt: skip
        return wanted

    def _write_follows(
        self,
        conn: Connection,
        organization_id: str,
        environment_id: str,
        flag_key: str,
        keys: Sequence[str],
        *,
        actor: str,
        action: str,
        restored_from: str | None = None,
    ) -> AuditRecord:
        """Replace the flag's follows with ``keys`` (checked), audited."""
        before = self._follows_in(conn, environment_id, flag_key)
        self._drop_flag_follows(conn, environment_id, flag_key)
        for position, key in enumerate(keys):
            conn.execute(
                "INSERT INTO metric_follows (environment_id, flag_key, metric_key, position)"
                " VALUES (?, ?, ?, ?)",
                (environment_id, flag_key, key, position),
            )
        return self._audit(
            conn, organization_id, actor, action, f"flagMetrics:{environment_id}/{flag_key}",
            _follows_document(before), _follows_document(keys), restored_from,
        )  # fmt: skip

    @staticmethod
    def _drop_flag_follows(conn: Connection, environment_id: str, flag_key: str) -> None:
        """Forget what the flag follows, inside the caller's write transaction (a deleted flag
        follows nothing)."""
        conn.execute(
            "DELETE FROM metric_follows WHERE environment_id = ? AND flag_key = ?",
            (environment_id, flag_key),
        )

    def metric_follows(self) -> list[MetricFollow]:
        with self._transaction(write=False) as conn:
            followed = conn.execute(
                "SELECT e.organization_id, f.environment_id, f.flag_key, m.* FROM metric_follows f"
                " JOIN environments e ON e.id = f.environment_id"
                " JOIN metrics m ON m.organization_id = e.organization_id AND m.key = f.metric_key"
            ).fetchall()
            guarding = conn.execute(
                "SELECT e.organization_id, r.environment_id, r.flag_key, r.guardrails"
                " FROM rollouts r JOIN environments e ON e.id = r.environment_id"
                f" WHERE r.state IN ({', '.join('?' * len(GUARDING_STATES))})",
                tuple(map(str, GUARDING_STATES)),
            ).fetchall()
            found = {
                (row["environment_id"], row["flag_key"], row["key"]): MetricFollow(
                    row["organization_id"], row["environment_id"], row["flag_key"], metric_of(row)
                )
                for row in followed
            }
            for row in guarding:
                for key in guarded_metrics(msgspec.json.decode(row["guardrails"])):
                    metric = self._metric_in(conn, row["organization_id"], key)
                    if metric is not None:
                        found.setdefault(
                            (row["environment_id"], row["flag_key"], key),
                            MetricFollow(
                                row["organization_id"], row["environment_id"], row["flag_key"],
                                metric,
                            ),
                        )  # fmt: skip
        return [found[place] for place in sorted(found)]

    def _check_metric_guardrails(
        self, conn: Connection, organization_id: str, plan: RolloutPlan
    ) -> None:
        """A rollout's metric guardrails, inside the caller's transaction: each a metric of the
        organization (``InvalidError`` naming ``guardrails``), and a count, sum or mean one
        with its tolerance, a conversion's at most 100 points (naming ``tolerances``)."""
        named = dict(plan.tolerance_overrides)
        for index, guardrail in enumerate(plan.guardrails):
            key = guarded_metric(guardrail)
            if key is None:
                continue
            metric = self._metric_in(conn, organization_id, key)
            if metric is None:
                raise InvalidError(
                    MetricCode.UNKNOWN_METRIC_GUARDRAIL, "guardrails", metric=key, index=index
                )
            default = DEFAULT_METRIC_TOLERANCES.get(metric.kind)
            tolerance = named.get(guardrail, default)
            if tolerance is None:
                raise InvalidError(
                    MetricCode.METRIC_TOLERANCE_REQUIRED, "tolerances", guardrail=guardrail,
                    kind=str(metric.kind),
                )  # fmt: skip
            if metric.kind is MetricKind.CONVERSION and tolerance > MAX_CONVERSION_TOLERANCE:
                raise InvalidError(
                    MetricCode.METRIC_TOLERANCE_OUT_OF_RANGE, "tolerances", guardrail=guardrail,
                    tolerance=tolerance, maximum=MAX_CONVERSION_TOLERANCE,
                )  # fmt: skip

    def _check_metrics_kept(
        self, conn: Connection, record: AuditRecord, keys: Iterable[str]
    ) -> None:
        """Refuse to restore ``record`` (``METRIC_GONE``) when a metric it names (a follow, a
        rollout's guardrail) no longer exists."""
        for key in keys:
            if self._metric_in(conn, record.organization_id, key) is None:
                raise ConflictError(
                    MetricCode.METRIC_GONE, ConflictReason.NOT_RESTORABLE, metric=key,
                    audit_id=record.id, action=record.action, target=record.target,
                )  # fmt: skip

    def _check_metric_kinds_kept(
        self, conn: Connection, record: AuditRecord, keys: Iterable[str]
    ) -> None:
        """Refuse to restore ``record`` (``METRIC_KIND_CHANGED``) when a metric it guards on
        has changed kind since: its kind then is the one the metric's last audit record
        before ``record`` left it with (a metric older than the audit log counts as kept)."""
        for key in keys:
            current = self._metric_in(conn, record.organization_id, key)
            then = conn.execute(
                "SELECT after FROM audit_log WHERE organization_id = ? AND target = ?"
                " AND seq < (SELECT seq FROM audit_log WHERE id = ?) ORDER BY seq DESC LIMIT 1",
                (record.organization_id, f"metric:{record.organization_id}/{key}", record.id),
            ).fetchone()
            was = msgspec.json.decode(then["after"])["kind"] if then and then["after"] else None
            if current is not None and was is not None and was != str(current.kind):
                raise ConflictError(
                    MetricCode.METRIC_KIND_CHANGED, ConflictReason.NOT_RESTORABLE, metric=key,
                    was=was, kind=str(current.kind), audit_id=record.id, action=record.action,
                    target=record.target,
                )  # fmt: skip

    @restores("metric")
    def _restore_metric(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """Put the metric back as it was before that change (its ``createdAt`` and
        ``updatedAt`` then; the follows a deletion took come back by restoring their own
        records), or delete it again when the change created it, refused (as a deletion is)
        while a rollout guards on it."""
        organization_id, _, key = ident.partition("/")
        current = self._metric_in(conn, organization_id, key)
        if record.before is None:
            if current is None:
                raise ConflictError(
                    MetricCode.METRIC_STILL_ABSENT, ConflictReason.NOTHING_TO_RESTORE, metric=key
                )
            self._check_metric_unguarded(conn, organization_id, key, MetricCode.METRIC_IN_USE)
            return lambda actor: self._delete_metric(
                conn, organization_id, key, actor=actor, action="restore", restored_from=record.id
            )
        metric = metric_from_document(organization_id, record.before)
        if current is not None and current.kind is not metric.kind:
            self._check_metric_unguarded(
                conn, organization_id, key, MetricCode.METRIC_KIND_IN_USE, kind=str(metric.kind)
            )
        return lambda actor: self._write_metric(
            conn, current, metric, actor=actor, action="restore", restored_from=record.id
        )

    @restores("flagMetrics")
    def _restore_flag_metrics(self, conn: Connection, record: AuditRecord, ident: str) -> Restore:
        """Put back the metrics the flag followed before that change; refused when one of them
        has been deleted since, or the flag has (its follows went with it)."""
        environment_id, _, flag_key = ident.partition("/")
        environment = self._require_environment(conn, environment_id)
        if self._flag_in(conn, environment_id, flag_key) is None:
            raise NotFoundError(FlagCode.FLAG_NOT_FOUND, "flag", flag_key)
        keys = (record.before or {}).get("metrics", [])
        self._check_metrics_kept(conn, record, keys)
        return lambda actor: self._write_follows(
            conn, environment.organization_id, environment_id, flag_key, keys, actor=actor,
            action="restore", restored_from=record.id,
        )  # fmt: skip


def _check_metric(key: str, event: str, window_hours: int) -> None:
    if not KEY_PATTERN.fullmatch(key):
        raise InvalidError(MetricCode.METRIC_KEY_MALFORMED, "key", value=key)
    if not KEY_PATTERN.fullmatch(event):
        raise InvalidError(MetricCode.METRIC_EVENT_MALFORMED, "event", value=event)
    if not 1 <= window_hours <= MAX_WINDOW_HOURS:
        raise InvalidError(
            MetricCode.METRIC_WINDOW_OUT_OF_RANGE, "window_hours", value=window_hours,
            maximum=MAX_WINDOW_HOURS,
        )  # fmt: skip
