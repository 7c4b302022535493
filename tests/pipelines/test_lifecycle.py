"""The flag lifecycle end to end (contract section 14): flags in a real control plane (some made
in the past through the store's clock), evaluation events written as sealed Parquet, the real
pipeline, and the published ``flag_lifecycle`` rows read back with the read helpers.

Thresholds are set low through the settings' variables: launched after 1 day, stale after 5,
archived flags watched 2 hours. Events lie at whole days before now (never near the 5-day
edge of the window, so the day-grained window and an exact one agree), and every figure
expected here is computed from the events this test wrote, not from the warehouse.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import falcon.testing
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from flagsight_core import PercentageRule

from api.controlplane.changes import GUARDRAILS, RolloutAction, RolloutPlan
from api.controlplane.documents import iso_time
from api.controlplane.model import FlagKind, FlagMeta, Plan
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from api.eventlog.layout import type_dir
from api.eventlog.schema import EVALUATION, EVALUATION_SCHEMA
from api.settings import Settings
from tests.admin.conftest import ADMIN_TOKEN, AdminClient, build_app, build_services
from tests.pipelines.support import materialize_all
from warehouse import read
from warehouse.lifecycle import LifecycleEvidence, lifecycle_document

DAY = 86_400.0
STALE_DAYS = 5.0
LAUNCHED_DAYS = 1.0
ARCHIVED_HOURS = 2.0
SDKS = ("python/1.0", "go/2.1", None)


class Clock:
    """The store's clock: the test sets when each change happens."""

    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


class Lake:
    """Evaluation events written to the lake, kept to compute the expected figures."""

    def __init__(self, settings: Settings, organization_id: str, environment_id: str) -> None:
        self.root = Path(settings.events_location) / type_dir(EVALUATION)
        self.organization_id, self.environment_id = organization_id, environment_id
        self.rows: list[dict] = []
        self.pending: list[dict] = []
        self.ids = itertools.count()

    def evaluate(self, flag: str, at: float, values, sdks=SDKS) -> None:
        """One evaluation per value, 10 s apart going back from ``at``; sdks in turn."""
        for j, (value, sdk) in enumerate(zip(values, itertools.cycle(sdks), strict=False)):
            eid = f"ev-{next(self.ids):06d}"
            self.pending.append(
                {
                    "schema_version": 2,
                    "evaluation_id": eid,
                    "evaluated_at": datetime.fromtimestamp(at - 10 * j, UTC),
                    "organization_id": self.organization_id,
                    "environment_id": self.environment_id,
                    "flag_key": flag,
                    "user_identifier": f"user-{eid}",
                    "value": value,
                    "matched_rule_type": None,
                    "error_type": None,
                    "sdk": sdk,
                    "api_key_id": "key-test",
                    "source": "v1",
                    "rule_index": None,
                    "arm": None,
                    "rollout_percentage": None,
                }
            )

    def seal(self, name: str) -> None:
        """Write what was evaluated since the last seal, one file per UTC date."""
        by_date = defaultdict(list)
        for row in self.pending:
            by_date[row["evaluated_at"].date()].append(row)
        for day, rows in by_date.items():
            folder = self.root / f"date={day.isoformat()}"
            folder.mkdir(parents=True, exist_ok=True)
            table = pa.Table.from_pylist(rows, schema=EVALUATION_SCHEMA)
            pq.write_table(table, folder / f"{name}-{day.isoformat()}.parquet")
        self.rows += self.pending
        self.pending = []

    def of(self, flag: str) -> list[dict]:
        return [row for row in self.rows if row["flag_key"] == flag]


def expected_evidence(
    lake: Lake, flag: str, now: float, changed_at: float, completed_at: float | None = None
) -> dict:
    """The flag's evidence, from the events written (contract section 14's definitions)."""
    rows = lake.of(flag)
    times = [row["evaluated_at"].timestamp() for row in rows]
    window = [row for row in rows if row["evaluated_at"].timestamp() >= now - STALE_DAYS * DAY]
    served: dict = defaultdict(set)
    for row in rows:
        served[row["evaluated_at"].date()].add(row["value"])
    run_start = None
    days = sorted(served, reverse=True)
    if days and len(served[days[0]]) == 1:
        for day in days:
            if served[day] != served[days[0]]:
                break
            run_start = day
    candidates = []
    if run_start is not None:
        midnight = datetime(run_start.year, run_start.month, run_start.day, tzinfo=UTC)
        candidates.append((max(midnight.timestamp(), changed_at), "one-value-14d"))
    if completed_at is not None:
        candidates.append((completed_at, "rollout-completed"))
    launched_at, launched_by = min(candidates) if candidates else (None, None)
    return {
        "last_evaluated_at": max(times) if times else None,
        "evaluations_30d": len(window),
        "served_true_percent_30d": (
            100.0 * sum(row["value"] for row in window) / len(window) if window else None
        ),
        "launched_at": launched_at,
        "launched_by": launched_by,
        "applications": sorted({row["sdk"] for row in window if row["sdk"]}),
    }


def at_ms(unix_seconds: float) -> float:
    """A time as the control plane keeps it (ISO 8601 to the millisecond)."""
    return datetime.fromisoformat(iso_time(unix_seconds)).timestamp()


MIXED = [True, False, True, False]


@pytest.fixture
def world(tmp_path: Path):
    now = time.time()
    settings = Settings.from_env(
        {
            "FLAGSIGHT_DATA_DIR": str(tmp_path / "data"),
            "FLAGSIGHT_LIFECYCLE_LAUNCHED_DAYS": str(LAUNCHED_DAYS),
            "FLAGSIGHT_LIFECYCLE_STALE_DAYS": str(STALE_DAYS),
            "FLAGSIGHT_LIFECYCLE_ARCHIVED_EVALUATED_HOURS": str(ARCHIVED_HOURS),
        }
    )
    assert settings.lifecycle_stale_days == STALE_DAYS
    clock = Clock(now - 20 * DAY)
    store = SqliteControlPlaneStore(settings.control_plane_path, clock=clock)
    organization = store.create_organization("Lifecycle", Plan.PRO)
    env = store.create_environment(organization.id, "production").id
    lake = Lake(settings, organization.id, env)

    def put(key, *, archived=False, rules=(), meta=None, at=now - 20 * DAY):
        clock.at = at
        store.put_flag(env, key, True, archived, list(rules), meta=meta)

    past = iso_time(now - DAY)
    put("fresh", at=now - 3600)
    put("mixed")
    put("expired", meta=FlagMeta(expires_at=past))
    put("expired-never", meta=FlagMeta(expires_at=iso_time(now - 3600)))
    put("forgotten")
    put("launched")
    put("relaunched")
    put("relaunched", rules=[PercentageRule(100.0, True)], at=now - DAY / 2)  # a rule change
    put("launched-long")
    put("permanent", meta=FlagMeta(kind=FlagKind.PERMANENT, expires_at=past))
    put("archived-evaluated", archived=True)
    put("archived-quiet", archived=True)
    put("doomed")
    put("rollout-done", rules=[PercentageRule(50.0, True)], at=now - 10 * DAY)
    clock.at = now - 10 * DAY
    store.start_rollout(env, "rollout-done", RolloutPlan((50.0, 100.0), 60.0, GUARDRAILS))
    clock.at = now - 2 * DAY
    store.decide_rollout(env, "rollout-done", 0, RolloutAction.COMPLETED, "test", None)
    clock.at = now

    for k in (0, 1, 3):
        lake.evaluate("mixed", now - k * DAY - 60, MIXED * 2)
    lake.evaluate("mixed", now - 8 * DAY, MIXED, sdks=("ruby/0.9",))  # outside the window
    lake.evaluate("expired", now - 60, MIXED)
    lake.evaluate("forgotten", now - 8 * DAY, MIXED)
    for flag in ("launched", "relaunched"):
        lake.evaluate(flag, now - 4 * DAY - 60, MIXED)
        for k in (3, 2, 0):
            lake.evaluate(flag, now - k * DAY - 60, [True] * 3)
    for k in (8, 7, 2, 0):
        lake.evaluate("launched-long", now - k * DAY - 60, [False] * 3)
    lake.evaluate("permanent", now - 8 * DAY, MIXED)
    lake.evaluate("archived-evaluated", now - 1800, MIXED)
    lake.evaluate("archived-quiet", now - DAY, MIXED)
    for k in (0, 1, 3):
        lake.evaluate("rollout-done", now - k * DAY - 60, MIXED)
    lake.evaluate("unknown-flag", now - 60, MIXED)  # evaluated, but no such flag: no row
    lake.seal("w1")
    yield settings, store, clock, lake, env, now
    store.close()


def run(settings: Settings):
    result = materialize_all(settings)
    assert result.success
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks["lifecycle_one_row_per_flag"] and checks["lifecycle_evidence_consistent"]
    assert all(checks.values()), checks
    (materialization,) = result.asset_materializations_for_node("flag_lifecycle")
    return {key: value.value for key, value in materialization.metadata.items()}


def stages(settings: Settings, env: str) -> dict[str, tuple[str, list[str]]]:
    rows = read.environment_lifecycles(settings.warehouse_path, env)
    return {key: (row["stage"], row["reasons"]) for key, row in rows.items()}


def test_every_stage_with_its_reasons_and_evidence(world) -> None:
    settings, store, clock, lake, env, now = world
    metadata = run(settings)

    assert stages(settings, env) == {
        "fresh": ("new", ["never-evaluated"]),
        "mixed": ("active", ["evaluated-30d"]),
        "expired": ("stale", ["expired"]),
        "expired-never": ("stale", ["expired"]),
        "forgotten": ("stale", ["not-evaluated-30d"]),
        "launched": ("launched", ["one-value-14d"]),
        "relaunched": ("active", ["evaluated-30d"]),
        "launched-long": ("stale", ["launched-30d"]),
        "permanent": ("permanent", ["kind-permanent"]),
        "archived-evaluated": ("archived", ["archived", "archived-but-evaluated"]),
        "archived-quiet": ("archived", ["archived"]),
        "doomed": ("new", ["never-evaluated"]),
        "rollout-done": ("launched", ["rollout-completed"]),
    }
    assert metadata["stale"] == 4 and metadata["launched"] == 2 and metadata["new"] == 2
    assert metadata["newlyStale"] == 4  # no row before: every flag was new

    created, changed = at_ms(now - 20 * DAY), at_ms(now - DAY / 2)
    expected = {
        flag: expected_evidence(lake, flag, now, created)
        for flag in ("fresh", "mixed", "expired", "forgotten", "launched", "launched-long")
        + ("permanent", "archived-evaluated", "archived-quiet")
    }
    expected["fresh"] = expected_evidence(lake, "fresh", now, at_ms(now - 3600))
    expected["relaunched"] = expected_evidence(lake, "relaunched", now, changed)
    expected["rollout-done"] = expected_evidence(
        lake, "rollout-done", now, at_ms(now - 2 * DAY), completed_at=at_ms(now - 2 * DAY)
    )
    for flag, want in expected.items():
        row = read.flag_lifecycle(settings.warehouse_path, env, flag)
        for key, value in want.items():
            if isinstance(value, float):
                assert row[key] == pytest.approx(value, abs=1e-3), (flag, key)
            else:
                assert row[key] == value, (flag, key)
    assert expected["mixed"]["applications"] == ["go/2.1", "python/1.0"]  # not ruby, 8 days ago
    assert expected["relaunched"]["launched_at"] == changed  # the rule change, not the run
    assert read.flag_lifecycle(settings.warehouse_path, env, "unknown-flag") is None

    row = read.flag_lifecycle(settings.warehouse_path, env, "archived-evaluated")
    assert row["archived_but_evaluated"] is True
    document = lifecycle_document(row["stage"], row["reasons"], LifecycleEvidence.from_row(row))
    last = max(r["evaluated_at"] for r in lake.of("archived-evaluated"))
    assert document["lastEvaluatedAt"] == last.isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )
    assert document["evaluations30d"] == 4 and document["servedTruePercent30d"] == 50.0
    assert document["archivedButEvaluated"] is True
    assert document["applications"] == ["go/2.1", "python/1.0"]
    assert (
        read.flag_lifecycle(settings.warehouse_path, env, "archived-quiet")[
            "archived_but_evaluated"
        ]
        is False
    )


def test_later_runs_fold_new_events_drop_deleted_flags_and_see_each_transition_once(
    world,
) -> None:
    settings, store, clock, lake, env, now = world
    organization = store.get_environment(env).organization_id
    store.create_webhook(organization, "https://hooks.example/stale", ["flag.stale"])
    run(settings)
    first = stale_events(store)
    assert sorted(event["data"]["flagKey"] for event in first) == [
        "expired", "expired-never", "forgotten", "launched-long",
    ]  # fmt: skip

    store.delete_flag(env, "doomed")
    lake.evaluate("fresh", time.time(), [True, False, True])
    lake.evaluate("mixed", time.time(), [True, True], sdks=("swift/3.0",))
    lake.seal("w2")
    second = run(settings)
    assert second["newlyStale"] == 0
    lifecycles = read.environment_lifecycles(settings.warehouse_path, env)
    assert "doomed" not in lifecycles
    assert lifecycles["fresh"]["stage"] == "active"
    assert lifecycles["fresh"]["evaluations_30d"] == 3
    mixed = lifecycles["mixed"]
    assert mixed["evaluations_30d"] == expected_evidence(lake, "mixed", now, 0.0)["evaluations_30d"]
    assert mixed["applications"] == ["go/2.1", "python/1.0", "swift/3.0"]

    flag = store.get_flag(env, "mixed")
    store.put_flag(env, "mixed", flag.enabled, flag.archived, list(flag.rules),
                   meta=FlagMeta(expires_at=iso_time(time.time() - 1)))  # fmt: skip
    third = run(settings)
    assert third["newlyStale"] == 1
    assert third["newly_stale_flags"] == [{"environment_id": env, "flag_key": "mixed"}]
    assert stages(settings, env)["mixed"] == ("stale", ["expired"])
    [event] = stale_events(store)
    assert event["type"] == "flag.stale"
    assert event["data"]["flagKey"] == "mixed" and event["data"]["environmentId"] == env
    assert event["data"]["lifecycle"]["stage"] == "stale"
    assert event["data"]["lifecycle"]["reasons"] == ["expired"]
    assert event["data"]["lifecycle"]["applications"] == ["go/2.1", "python/1.0", "swift/3.0"]
    assert run(settings)["newlyStale"] == 0  # once per transition
    assert stale_events(store) == []

    # no longer stale, then stale again: announced again
    store.put_flag(env, "mixed", flag.enabled, flag.archived, list(flag.rules), meta=FlagMeta())
    assert run(settings)["newlyStale"] == 0
    store.put_flag(env, "mixed", flag.enabled, flag.archived, list(flag.rules),
                   meta=FlagMeta(expires_at=iso_time(time.time() - 1)))  # fmt: skip
    assert run(settings)["newlyStale"] == 1
    assert [event["data"]["flagKey"] for event in stale_events(store)] == ["mixed"]


def stale_events(store) -> list[dict]:
    """The ``flag.stale`` events queued since the last call (each taken off the queue)."""
    due = store.due_deliveries(time.time() + 3600, limit=1000)
    for delivery in due:
        store.record_delivery(delivery.seq, time.time(), error=None, retry_at=None)
    return [json.loads(delivery.body) for delivery in due]


def test_the_admin_api_answers_each_flag_lifecycle_filters_by_stage_and_shows_uploads(
    world,
) -> None:
    """Through the real admin API over the pipeline's warehouse (contract 14): every flag's
    ``lifecycle``, ``?lifecycle=``, and an upload of code references on the flag."""
    settings, store, clock, lake, env, now = world
    run(settings)
    admin = _admin(settings, store)
    listed = admin.get(f"/environments/{env}/flags").body["items"]
    shown = {
        flag["key"]: (flag["lifecycle"]["stage"], flag["lifecycle"]["reasons"]) for flag in listed
    }
    assert shown == stages(settings, env) | {"doomed": ("new", ["never-evaluated"])}

    mixed = next(flag for flag in listed if flag["key"] == "mixed")["lifecycle"]
    want = expected_evidence(lake, "mixed", now, at_ms(now - 20 * DAY))
    assert mixed["evaluations30d"] == want["evaluations_30d"]
    assert mixed["servedTruePercent30d"] == pytest.approx(want["served_true_percent_30d"])
    assert mixed["applications"] == want["applications"]
    assert mixed["codeReferences"] == {"count": 0, "scannedAt": None, "repository": None}

    stale = admin.get(f"/environments/{env}/flags?lifecycle=stale").body["items"]
    assert sorted(flag["key"] for flag in stale) == sorted(
        key for key, (stage, _) in shown.items() if stage == "stale"
    )
    assert all(flag["lifecycle"]["stage"] == "stale" for flag in stale)
    refused = admin.get(f"/environments/{env}/flags?lifecycle=rotten")
    assert refused.status == 400 and "'lifecycle'" in refused.body["message"]

    upload = {
        "repository": "acme/shop",
        "revision": "abc123",
        "references": [
            {"flagKey": "mixed", "path": "src/cart.py", "line": 12},
            {"flagKey": "mixed", "path": "web/cart.ts", "line": 4},
            {"flagKey": "expired", "path": "src/old.py", "line": 1},
        ],
    }
    put = admin.put(f"/environments/{env}/code-refs", upload)
    assert (put.status, put.body["count"], put.body["repository"]) == (200, 3, "acme/shop")
    references = admin.get(f"/environments/{env}/flags/mixed").body["lifecycle"]["codeReferences"]
    assert references == {"count": 2, "scannedAt": put.body["scannedAt"], "repository": "acme/shop"}
    fresh = admin.get(f"/environments/{env}/flags/fresh").body["lifecycle"]["codeReferences"]
    assert fresh == {"count": 0, "scannedAt": put.body["scannedAt"], "repository": "acme/shop"}

    store.put_flag(env, "expired", True, True, [])  # archived since the run: shown as it is now
    archived = admin.get(f"/environments/{env}/flags/expired").body["lifecycle"]
    assert (archived["stage"], archived["archivedButEvaluated"]) == ("archived", True)


def _admin(settings: Settings, store: SqliteControlPlaneStore) -> AdminClient:
    """The admin API on the world's settings and store, at the real time."""
    settings = dataclasses.replace(settings, admin_token=ADMIN_TOKEN)
    services = dataclasses.replace(build_services(settings, store), clock=time.time)
    return AdminClient(falcon.testing.TestClient(build_app(services)), services)
