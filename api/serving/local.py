"""Local evaluation's two trips to the service: quota with evaluation ids, and reports
(contract section 11; ``docs/sdk.md``, "Local evaluation").

**Grants.** A local SDK spends only quota the meter granted it. Each grant is taken from the
meter like any evaluation (``Meter.consume``, against the hard threshold), sized by the
lease policy (``leasing.sdk_grant_size``: 1 % of what remains, shrinking to one near the
threshold), and comes with one signed block of evaluation ids, as a bulk answer's: the SDK
mints id ``prefix + index`` for its ``index``-th evaluation, so feedback on a local evaluation
is verified and attributed like any other, and a forged id is refused. What an SDK did not
spend goes back with ``refund`` (on ``close()``), bounded by the grant's own signed count.

**Reports.** The SDK sends its evaluations in batches; each becomes one evaluation event in
the event log with ``source`` ``local``, so the lake, the Evaluations metric, feedback
attribution and release-health arms count it as a remote one. Every id must come from a block
this service issued for the key's environment.

Trust: local evaluation trusts the application that holds the key (it has the ruleset and
could decide without asking); the checks here keep a faulty SDK from writing events the
service did not grant, not a hostile one from skipping its reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec
from flagsight_core.contract import FLAG_KEY_MAX, LOCAL_GRANT_MAX, USER_IDENTIFIER_MAX
from flagsight_core.ids import PREFIX_LENGTH, EvaluationIdInfo, InvalidEvaluationId
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT, NOT_EVALUATED, OUTCOMES

from api.controlplane.cache import Caller
from api.eventlog.schema import SOURCE_LOCAL, EvaluationEvent
from api.metering.leasing import sdk_grant_size
from api.metering.meter import month_of
from api.serving.services import Services

REPORT_PAST_S = 24 * 3600.0
REPORT_FUTURE_S = 300.0
"""A reported ``evaluatedAt`` outside [now - 24 h, now + 5 min] (a skewed clock) is taken
as the time the report arrived, so the event still lands in a recent partition."""
_HEX_DIGITS = [f"{byte:02x}" for byte in range(256)]
"""Two lower-case hex digits per byte: an index's canonical spelling without a format call."""


@dataclass(frozen=True, slots=True)
class Grant:
    granted: int
    id_prefix: str | None
    """The signed prefix of ``granted`` ids; None when nothing was granted."""


class LocalEvaluation(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One reported evaluation, as the SDK's core decided it; on the wire a JSON array in
    this order (``docs/api.md``, "Local evaluation"). Untracked by the cyclic collector
    (``gc=False``: its fields are strings and numbers, no cycle can pass through it): 10,000
    tracked objects a report set off collections that cost a third of the decoding."""

    evaluation_id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    evaluated_at_ms: int
    flag_key: Annotated[str, msgspec.Meta(min_length=1, max_length=FLAG_KEY_MAX)]
    user_identifier: Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)]
    value: bool
    matched_rule_type: str | None
    error_type: str | None
    rule_index: Annotated[int, msgspec.Meta(ge=0, lt=NOT_EVALUATED)] | None
    """The deciding rule; None when no rule did (the flag's state, or no rule matched)."""
    arm: Literal[ARM_TREATMENT, ARM_CONTROL] | None  # type: ignore[valid-type]
    """The release-health arm (``arm_of``, by the SDK's core), None outside the split."""
    rollout_percentage: Annotated[float, msgspec.Meta(ge=0, le=100)] | None
    """The split's percentage when evaluated, with an arm."""


class ReportProblem(ValueError):
    """One reported evaluation cannot be taken; the message says why."""


def grant(services: Services, caller: Caller, wanted: int) -> Grant:
    """Up to ``wanted`` evaluations of quota, with their ids (``granted`` 0: none left)."""
    organization = caller.organization
    environment = caller.environment
    if organization is None or environment is None:
        return Grant(0, None)
    month = month_of(services.clock())
    used = services.meter.usage(organization.id, month)
    size = sdk_grant_size(caller.hard_limit - used, wanted, LOCAL_GRANT_MAX)
    granted = services.meter.consume(organization.id, month, size, caller.hard_limit) if size else 0
    if not granted:
        return Grant(0, None)
    services.metrics.local_quota.labels("granted").inc(granted)
    return Grant(granted, services.ids.issue_prefix(environment.id, granted))


def refund(services: Services, caller: Caller, id_prefix: str, unused: int) -> int:
    """Give back ``unused`` of the grant ``id_prefix``; the number taken back.

    Raises ``ReportProblem`` for a prefix this service did not issue for the key's environment,
    or more than the grant held."""
    block = _block(services, caller, id_prefix)
    if not 0 <= unused <= block.count:
        raise ReportProblem(f"the grant held {block.count} evaluations, not {unused}")
    if caller.organization is not None and unused:
        services.meter.refund(caller.organization.id, month_of(services.clock()), unused)
        services.metrics.local_quota.labels("refunded").inc(unused)
    return unused


def _block(services: Services, caller: Caller, id_prefix: str) -> EvaluationIdInfo:
    try:
        block = services.ids.verify(id_prefix + "0000")
    except InvalidEvaluationId:
        raise ReportProblem("the id block was not issued by this service") from None
    if caller.environment is None or block.environment_id != caller.environment.id:
        raise ReportProblem("the id block was issued for another environment than this key's")
    return block


def report_events(
    services: Services, caller: Caller, evaluations: list[LocalEvaluation], sdk: str | None
) -> list[EvaluationEvent]:
    """The evaluation events of a report; ``ReportProblem`` (naming the index) for the first
    evaluation that cannot be taken, and then none is."""
    environment, organization = caller.environment, caller.organization
    if environment is None or organization is None:
        raise ReportProblem("the key's environment is gone")
    now = services.clock()
    lowest, highest = (now - REPORT_PAST_S) * 1000, (now + REPORT_FUTURE_S) * 1000
    now_us = int(now * 1_000_000)
    blocks: dict[str, int] = {}
    outcomes = set(OUTCOMES)  # the registry's now (a test may register a rule type)
    events: list[EvaluationEvent] = []
    append = events.append
    key_id, organization_id, environment_id = caller.key.key_id, organization.id, environment.id
    for index, item in enumerate(evaluations):
        evaluation_id = item.evaluation_id
        prefix, digits = evaluation_id[:PREFIX_LENGTH], evaluation_id[PREFIX_LENGTH:]
        count = blocks.get(prefix)
        if count is None:
            try:
                count = blocks[prefix] = _block(services, caller, prefix).count
            except ReportProblem as exc:
                raise ReportProblem(f"evaluations[{index}]: {exc}") from None
        try:
            position = int(digits, 16)
        except ValueError:
            position = count
        # the one spelling this service issues (int() would also read " 1a", "+1a", "1_a")
        if position >= count or digits != _HEX_DIGITS[position >> 8] + _HEX_DIGITS[position & 255]:
            raise ReportProblem(f"evaluations[{index}]: the evaluation id is not in its block")
        if (item.value, item.matched_rule_type, item.error_type) not in outcomes:
            raise ReportProblem(
                f"evaluations[{index}]: value, matchedRuleType and errorType are no outcome"
            )
        arm = item.arm
        at_ms = item.evaluated_at_ms
        append(
            (  # an ``EvaluationEvent``'s fields, as a plain tuple: its NamedTuple ``__new__``
                # cost a third of a report's ingest, and the log encodes both alike
                evaluation_id,
                at_ms * 1000 if lowest <= at_ms <= highest else now_us,
                organization_id,
                environment_id,
                item.flag_key,
                item.user_identifier,
                item.value,
                item.matched_rule_type,
                item.error_type,
                sdk,
                key_id,
                SOURCE_LOCAL,
                item.rule_index,
                arm,
                item.rollout_percentage if arm is not None else None,
            )  # type: ignore[arg-type]
        )
    return events
