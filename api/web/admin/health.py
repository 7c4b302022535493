"""``GET .../flags/{flag_key}/health``: release health as contract section 9 shapes it
(``api.controlplane.health_document``), from the warehouse's ``flag_health`` row."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import falcon
import msgspec
from flagsight_core.contract import Decision
from msgspec import Meta

from api.controlplane.catalogue import BUILT_IN
from api.controlplane.health_document import health_answer
from api.web.admin.auth import require_admin
from api.web.admin.bodies import Timestamp, one_of
from api.web.admin.flags import EVALUATED_FLAG_KEY, NOT_AGGREGATED
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.admin.warehouse_rows import WarehouseRowResource

Count = Annotated[int, Meta(ge=0)]
DecisionName = one_of(Decision)


class HealthArm(msgspec.Struct):
    """One arm, counted in users: coverage = usersWithFeedback / users x 100; failureRate =
    users with any failed feedback / usersWithFeedback x 100; latency percentiles over the
    users that reported one, each weighing once (its mean)."""

    users: Count
    usersWithFeedback: Count
    coverage: float | None
    failureRate: float | None
    latencyP50Ms: float | None
    latencyP95Ms: float | None
    latencyP99Ms: float | None


class HealthArms(msgspec.Struct):
    treatment: HealthArm
    control: HealthArm


class HealthComparison(msgspec.Struct):
    """Treatment minus control in the metric's unit, with an always-valid confidence sequence
    (docs/statistics.md)."""

    difference: float | None
    ci: Annotated[list[float], Meta(min_length=2, max_length=2)] | None
    confidence: float
    decision: DecisionName


class SampleRatio(msgspec.Struct):
    expected: float | None
    observed: float | None
    pValue: float | None
    mismatch: bool


class MetricArm(msgspec.Struct):
    """An arm's exposed users and the metric per user (conversion: a percentage of users;
    otherwise in the events' unit)."""

    users: Count
    mean: float | None


class MetricComparison(msgspec.Struct):
    """A followed metric (contract section 13): treatment minus control per user, with an
    always-valid confidence sequence; ``varianceReduction``, how much narrower the interval is
    for the users' pre-exposure values (null for a conversion, compared exactly)."""

    treatment: MetricArm
    control: MetricArm
    difference: float | None
    ci: Annotated[list[float], Meta(min_length=2, max_length=2)] | None
    confidence: float
    decision: DecisionName
    varianceReduction: float | None
    withheldReason: str | None


FlagHealth = msgspec.defstruct(
    "FlagHealth",
    [
        ("computedAt", Timestamp),
        ("percentage", float | None),
        ("arms", HealthArms | None),
        ("sampleRatio", SampleRatio),
        *((measure.name, HealthComparison) for measure in BUILT_IN),
        ("metrics", dict[str, MetricComparison]),
        ("withheldReason", str | None),
    ],
    module=__name__,
)
"""The health answer: one comparison per built-in entry of the catalogue
(``api.controlplane.catalogue``), and one per followed metric under ``metrics``."""


def read_flag_health(warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
    """The warehouse row, or None when there is none (or no warehouse file yet)."""
    from warehouse.read import flag_health

    return flag_health(warehouse_path, environment_id, flag_key)


@falcon.before(require_admin)
class FlagHealthResource(WarehouseRowResource):
    """``.../flags/{flag_key}/health``: the latest aggregation; 404 before the first one."""

    what = "health"

    def read_row(self, warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
        return read_flag_health(warehouse_path, environment_id, flag_key)

    def answer(self, row: Any) -> Any:
        return FlagHealth(**health_answer(row))


SLICE = Slice(
    Route("/environments/{env_id}/flags/{flag_key}/health", FlagHealthResource, {
        "get": Operation("The flag environment's release health (contract section 9)",
                         {200: Answer("Arms, sample ratio and always-valid comparisons",
                                      FlagHealth)},
                         errors={400: None, 404: NOT_AGGREGATED}),
    }, parameters={"flag_key": EVALUATED_FLAG_KEY}),
)  # fmt: skip
