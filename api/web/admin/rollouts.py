"""``.../flags/{flag_key}/rollout``: a guarded rollout of the flag's first percentage rule
(contract section 10): start, read, stop. The guardian (``pipelines/guardian.py``) moves it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import falcon
import falcon.asgi
import msgspec
from flagsight_core.contract import KEY_SPEC
from msgspec import Meta

from api.controlplane import documents
from api.controlplane.catalogue import DEFAULT_GUARDRAILS
from api.controlplane.changes import (
    GUARDRAIL_UNITS,
    GUARDRAILS,
    METRIC_GUARDRAIL_PREFIX,
    RolloutAction,
    RolloutPlan,
    RolloutState,
)
from api.controlplane.changes import Rollout as RolloutRecord
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Place, Timestamp, convert, one_of, words
from api.web.admin.environments import existing_environment
from api.web.admin.slices import Answer, Operation, Route, Slice, key_param
from api.web.errors import BadRequest, NotFound
from api.web.jsonio import write_json

DEFAULT_STEPS = (10.0, 25.0, 50.0, 100.0)
DEFAULT_STEP_MINUTES = 10.0
MAX_STEPS = 20
MAX_STEP_MINUTES = 7 * 24 * 60
MAX_TOLERANCE = {"pp": 100.0, "ms": 3_600_000.0}
"""A tolerance above these could never be exceeded (percentage points) or means nothing (an
hour of p95 latency)."""
MAX_METRIC_TOLERANCE = 1e12
"""A metric guardrail's tolerance is in its events' own unit (a count, a sum of values); the
store holds a conversion's to 100 percentage points."""
STEP_WORDS = "Field '{label}' must be a number above 0 and at most 100, with at most two decimals"
GUARDRAIL_WORDS = (
    f"Field 'guardrails' must be an array of {', '.join(GUARDRAILS)} or"
    f" {METRIC_GUARDRAIL_PREFIX}<metricKey>"
)
METRIC_GUARDRAIL_PATTERN = f"^{METRIC_GUARDRAIL_PREFIX}{KEY_SPEC}$"
GUARDRAIL_PATTERN = f"^(?:{'|'.join(GUARDRAILS)}|{METRIC_GUARDRAIL_PREFIX}{KEY_SPEC})$"
"""A built-in guardrail's name, or ``metric:<metricKey>`` (contract 13)."""

Step = Annotated[
    float, Meta(gt=0, le=100, extra=words(every=STEP_WORDS), extra_json_schema={"multipleOf": 0.01})
]
"""A percentage of the flag's split: two decimals at most (checked in ``_check_steps``, where
the float's two decimals are judged as they always were)."""
Guardrail = Annotated[
    str,
    Meta(pattern=GUARDRAIL_PATTERN, extra=words(every=GUARDRAIL_WORDS),
         extra_json_schema={"anyOf": [
             {"enum": list(GUARDRAILS)},
             {"type": "string", "pattern": METRIC_GUARDRAIL_PATTERN},
         ]}),
]  # fmt: skip
"""A guardrail: a built-in comparison of release health, or one of the organization's metrics
(the store refuses a metric it does not have)."""
StateName = one_of(RolloutState)
ActionName = one_of(a for a in RolloutAction if a is not RolloutAction.WAIT)
"""What a decision did: a wait is never recorded."""

Tolerance = Annotated[float, Meta(gt=0, le=MAX_METRIC_TOLERANCE)]
"""A tolerance as the document states it; its words are ``_tolerance_words`` (by name)."""


def _not_watched(name: str, watched: tuple[str, ...]) -> str:
    return (
        f"Field 'tolerances' names {name!r}, which is not one of the rollout's guardrails"
        f" ({', '.join(watched) or 'none'})"
    )


def _tolerance_schema(guardrail: str) -> dict[str, Any]:
    return {"type": "number", "exclusiveMinimum": 0,
            "maximum": MAX_TOLERANCE[GUARDRAIL_UNITS[guardrail]]}  # fmt: skip


Tolerances = Annotated[
    dict[str, Tolerance],
    Meta(
        description="The largest regression accepted per watched guardrail: percentage points"
        " for failureRate, coverage and a conversion metric, milliseconds for latencyP95Ms, the"
        " events' own unit for a count, sum or mean metric (which has no default and must be"
        " given). A step advances only once each regression is shown below its tolerance"
        " (contract section 10); a guardrail left out takes its default.",
        extra=words(type="Field 'tolerances' must be an object of guardrail names to numbers"),
        extra_json_schema={
            "properties": {g: _tolerance_schema(g) for g in GUARDRAILS},
            "propertyNames": {"pattern": GUARDRAIL_PATTERN},
        },
    ),
]


def _check_steps(steps: tuple[float, ...], place: Place) -> None:
    for index, step in enumerate(steps):
        if round(step * 100) != step * 100:
            raise BadRequest(STEP_WORDS.format(label=f"steps[{index}]"))
        if index and step <= steps[index - 1]:
            raise BadRequest(f"Field 'steps[{index}]' must be greater than the step before it")
    if steps[-1] != 100:
        raise BadRequest("Field 'steps' must end at 100")


def _check_guardrails(guardrails: tuple[str, ...], place: Place) -> None:
    if len(set(guardrails)) != len(guardrails):
        raise BadRequest("Field 'guardrails' names a guardrail twice")


def _tolerance_words(guardrail: str) -> str:
    if guardrail in GUARDRAIL_UNITS:
        unit = GUARDRAIL_UNITS[guardrail]
        return (
            f"Field 'tolerances' must give {guardrail} a number above 0 and at most"
            f" {MAX_TOLERANCE[unit]:g} ({unit})"
        )
    return f"Field 'tolerances' must give {guardrail} a number above 0"


def _precheck_tolerances(tolerances: Any, place: Place) -> None:
    """Each tolerance a number within its guardrail's bounds, refused in words naming the
    guardrail (a metric's unit, and a conversion's bound, are the store's to know)."""
    if not isinstance(tolerances, dict):
        return  # the declared type words it
    for name, value in tolerances.items():
        top = MAX_TOLERANCE[GUARDRAIL_UNITS[name]] if name in GUARDRAIL_UNITS else None
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not 0 < value <= (top or MAX_METRIC_TOLERANCE):
            raise BadRequest(_tolerance_words(name))


def _check_tolerances(tolerances: dict[str, float], place: Place) -> None:
    watched = place.fields["guardrails"]
    for name in tolerances:
        if name not in watched:
            raise BadRequest(_not_watched(name, watched))


class RolloutPut(Body):
    """Every field is optional: the defaults are the plan docs/admin-api.md describes. Steps
    increase and end at 100, with at most two decimals; each tolerance names a guardrail the
    rollout watches. A ``metric:<metricKey>`` guardrail names a metric of the organization, and
    one on a count, sum or mean metric needs its tolerance (the store checks both)."""

    steps: Annotated[
        tuple[Step, ...],
        Meta(min_length=1, max_length=MAX_STEPS,
             description="Increasing percentages of the first PERCENTAGE rule, last 100",
             extra_json_schema={"uniqueItems": True},
             extra=words(every=f"Field '{{label}}' must be an array of 1 to {MAX_STEPS} percentages")),
    ] = DEFAULT_STEPS  # fmt: skip
    stepMinutes: Annotated[float, Meta(gt=0, le=MAX_STEP_MINUTES)] = DEFAULT_STEP_MINUTES
    guardrails: Annotated[
        tuple[Guardrail, ...],
        Meta(extra=words(every=GUARDRAIL_WORDS), extra_json_schema={"uniqueItems": True}),
    ] = DEFAULT_GUARDRAILS
    tolerances: Tolerances = msgspec.field(default_factory=dict)

    checks = {"steps": _check_steps, "guardrails": _check_guardrails,
              "tolerances": _check_tolerances}  # fmt: skip
    prechecks = {"tolerances": _precheck_tolerances}

    def plan(self) -> RolloutPlan:
        overrides = tuple(sorted((k, float(v)) for k, v in self.tolerances.items()))
        return RolloutPlan(
            tuple(float(s) for s in self.steps), float(self.stepMinutes), tuple(self.guardrails),
            overrides,
        )  # fmt: skip


def rollout_plan(body: Any) -> RolloutPlan:
    """A rollout's plan from plain JSON values (the dashboard's form): 400 as the API says."""
    return convert(RolloutPut, body).plan()


Count = Annotated[int, Meta(ge=0)]


class GuardConfidence(msgspec.Struct):
    rollback: Annotated[float, Meta(description="Of a regression's end")]
    safety: Annotated[float, Meta(description="Of the tolerance's end")]


class ArmUsers(msgspec.Struct):
    treatment: Count
    control: Count


class GuardrailEvidence(msgspec.Struct):
    tolerance: float
    difference: Annotated[
        float | None, Meta(description="Treatment minus control over the rollout's steps")
    ]
    ci: Annotated[
        list[float | None],
        Meta(min_length=2, max_length=2,
             description="Each end at its own level: the worse side at the safety level, the"
                         " better side at the rollback level; null while unbounded"),
    ]  # fmt: skip
    status: Literal["regression", "safe", "undecided"]
    users: ArmUsers
    usersNeeded: Annotated[
        int | None,
        Meta(description="Estimated more users at the current split before the guardrail"
                         " could be shown within its tolerance"),
    ]  # fmt: skip


class RolloutGuard(msgspec.Struct):
    step: Count
    percentage: float
    confidence: GuardConfidence
    guardrails: Annotated[
        dict[str, GuardrailEvidence],
        Meta(extra_json_schema={"propertyNames": {"pattern": GUARDRAIL_PATTERN}}),
    ]


class RolloutDecision(msgspec.Struct):
    at: Timestamp
    step: Annotated[
        int, Meta(ge=0, description="The step judged: its index in the rollout's steps, from 0")
    ]
    percentage: Annotated[float, Meta(description="The flag's split afterwards")]
    action: ActionName
    reason: str
    statistics: Annotated[
        dict[str, Any] | None, Meta(description="The release-health figures the decision rests on")
    ]


class RolloutWaiting(msgspec.Struct):
    since: Timestamp
    reason: str


class Rollout(msgspec.Struct):
    state: StateName
    step: Annotated[
        int,
        Meta(ge=0, description="The current step's index in steps, from 0 (steps[step] is its"
                               " percentage; the dashboard and the CLI say step 1 of N for 0)"),
    ]  # fmt: skip
    percentage: float
    steps: list[Step]
    stepMinutes: float
    guardrails: list[Guardrail]
    tolerances: Annotated[
        dict[str, float], Meta(description="Each watched guardrail's tolerance, defaults filled in")
    ]
    stepStartedAt: Timestamp
    decisions: list[RolloutDecision]
    guard: Annotated[
        RolloutGuard | None,
        Meta(description="The guardian's latest evidence, one one-sided sequence per guardrail"
                         " over the whole rollout (docs/rollouts.md); null before its first"
                         " judgement."),
    ]  # fmt: skip
    waiting: Annotated[
        RolloutWaiting | None,
        Meta(description="A step whose time has passed, waiting until every guardrail is shown"
                         " within its tolerance (held four weeks after its time); null"
                         " otherwise."),
    ]  # fmt: skip


def rollout(record: RolloutRecord) -> Rollout:
    return Rollout(**documents.rollout(record))


@falcon.before(require_admin)
class RolloutResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await existing_environment(self, env_id)
        found = await self.read(self.store.get_rollout, env_id, flag_key)
        if found is None:
            raise NotFound(f"Flag '{flag_key}' has no rollout in environment '{env_id}'")
        write_json(resp, rollout(found))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        key_param(flag_key, "flagKey")
        plan = (await self.optional_body(req, RolloutPut)).plan()
        started = await self.write(self.store.start_rollout, env_id, flag_key, plan)
        write_json(resp, rollout(started))

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.write(self.store.stop_rollout, env_id, flag_key)
        resp.status = falcon.HTTP_204


SLICE = Slice(
    Route("/environments/{env_id}/flags/{flag_key}/rollout", RolloutResource, {
        "get": Operation("A guarded rollout's state, step, percentage and decisions",
                         {200: Answer("The rollout", Rollout)}),
        "put": Operation("Start (or restart) a guarded rollout of the flag's first percentage rule",
                         {200: Answer("Started at its first step", Rollout)}, body=RolloutPut,
                         body_required=False, errors={409: "The flag has no PERCENTAGE rule"}),
        "delete": Operation("Stop the rollout, leaving the percentage where it is",
                            {204: Answer("Done; no body")}),
    }),
)  # fmt: skip
