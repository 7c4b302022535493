"""Local evaluation's two trips to the service: quota with evaluation ids, and reports
(contract section 11; ``docs/sdk.md``, "Local evaluation").

**Grants.** A local SDK spends only quota the meter granted it. Each grant is taken from the
meter like any evaluation (``Meter.consume``, against the hard threshold), sized by the
lease policy (``leasing.sdk_grant_size``: 1 % of what remains, shrinking to one near the
threshold), and comes with one signed block of evaluation ids, as a bulk answer's: the SDK
mints id ``prefix + index`` for its ``index``-th evaluation, so feedback on a local evaluation
is verified and attributed like any other, and a forged id is refused. A grant's block is
signed as one (``ids.GRANT_VERSION``, with the grant's time), so an evaluate answer's ids
are neither reported as local evaluations nor given back.

**Give-backs.** What an SDK did not spend goes back with ``refund`` (on ``close()``), once,
and never more than the grant minus what was reported under it: the control plane's grant
ledger (``api.controlplane.resources.grants``) records each grant's reports and its
give-back, and the meter takes the quota back from the grant's month after the ledger recorded it. When
either cannot record it now the give-back is refused (503), never dropped: the SDK keeps it
and tries again (contract 4).

**Reports.** The SDK sends its evaluations in batches; each becomes one evaluation event in
the event log with ``source`` ``local``, so the lake, the Evaluations metric, feedback
attribution and release-health arms count it as a remote one. Every id must come from a grant
this service made for the key's environment, and not from its part given back; the ledger
notes how far each grant was reported before the events are appended (a report refused
after that is sent again whole, and noting is idempotent).

Trust: local evaluation trusts the application that holds the key (it has the ruleset and
could decide without asking); the checks here keep a faulty SDK from writing events the
service did not grant, not a hostile one from skipping its reports.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec
from flagsight_core.contract import FLAG_KEY_MAX, LOCAL_GRANT_MAX, USER_IDENTIFIER_MAX
from flagsight_core.ids import PREFIX_LENGTH, InvalidEvaluationId
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT, NOT_EVALUATED, OUTCOMES

from api.controlplane.cache import Caller
from api.controlplane.errors import UnavailableError
from api.controlplane.resources.grants import GrantState, GrantTooOld, LocalGrant
from api.eventlog.schema import LocalReport
from api.metering.leasing import sdk_grant_size
from api.metering.meter import MeterUnavailable, month_of
from api.serving.services import Services

log = logging.getLogger("flagsight.local")
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


LocalEvaluation = tuple[
    Annotated[str, msgspec.Meta(min_length=1, max_length=64)],  # evaluationId
    int,  # evaluatedAt, Unix milliseconds
    Annotated[str, msgspec.Meta(min_length=1, max_length=FLAG_KEY_MAX)],  # flagKey
    Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)],  # userIdentifier
    bool,  # value
    str | None,  # matchedRuleType
    str | None,  # errorType
    Annotated[int, msgspec.Meta(ge=0, lt=NOT_EVALUATED)] | None,  # ruleIndex: None, no rule did
    Literal[ARM_TREATMENT, ARM_CONTROL] | None,  # type: ignore[valid-type]  # arm (``arm_of``)
    Annotated[float, msgspec.Meta(ge=0, le=100)] | None,  # rolloutPercentage, with an arm
]
"""One reported evaluation, as the SDK's core decided it: on the wire a JSON array in this
order (``docs/api.md``, "Local evaluation"), decoded to a plain tuple, which is what the event
log keeps (``LocalRow``'s fields): no object is built per evaluation, and a tuple of strings
and numbers is left alone by the cyclic garbage collector."""


class ReportProblem(ValueError):
    """One reported evaluation, or a give-back, cannot be taken; the message says why."""


class NotRecorded(RuntimeError):
    """The ledger or the meter cannot record it now; nothing changed, and it can be retried."""


@dataclass(frozen=True, slots=True)
class CheckedReport:
    """A report every evaluation of which can be taken, and how far it reaches into each grant
    (the highest index reported, plus one)."""

    report: LocalReport
    reached: list[tuple[LocalGrant, int]]


def grant(services: Services, caller: Caller, wanted: int) -> Grant:
    """Up to ``wanted`` evaluations of quota, with their ids (``granted`` 0: none left)."""
    organization = caller.organization
    environment = caller.environment
    if organization is None or environment is None:
        return Grant(0, None)
    now = services.clock()
    month = month_of(now)
    used = services.meter.usage(organization.id, month)
    size = sdk_grant_size(caller.hard_limit - used, wanted, LOCAL_GRANT_MAX)
    granted = services.meter.consume(organization.id, month, size, caller.hard_limit) if size else 0
    if not granted:
        return Grant(0, None)
    services.metrics.local_quota.labels("granted").inc(granted)
    return Grant(granted, services.ids.issue_grant_prefix(environment.id, granted, now))


def refund(services: Services, caller: Caller, id_prefix: str, unused: int) -> int:
    """Give back ``unused`` of the grant ``id_prefix``; the number taken back.

    Raises ``ReportProblem`` for a prefix that is not a grant this service made for the key's
    environment, a grant given back already, or more than its unreported part; ``NotRecorded``
    when the ledger or the meter cannot record it now."""
    grant = _grant(services, caller, id_prefix)
    if not 0 <= unused <= grant.count:
        raise ReportProblem(f"the grant held {grant.count} evaluations, not {unused}")
    if not unused:
        return 0
    store, now = services.store, services.clock()
    try:
        refused = store.give_back_grant(grant, unused, now)
    except GrantTooOld:
        raise ReportProblem("the grant is too old to be given back") from None
    except UnavailableError as exc:
        raise NotRecorded(str(exc)) from None
    if refused is not None:
        raise ReportProblem(_refusal(refused, unused))
    try:
        services.meter.refund(grant.organization_id, month_of(grant.granted_at), unused)
    except MeterUnavailable as exc:
        _undo(services, grant)
        raise NotRecorded(str(exc)) from None
    services.metrics.local_quota.labels("refunded").inc(unused)
    return unused


def _refusal(state: GrantState, unused: int) -> str:
    if state.returned is not None:
        return f"the grant was given back already ({state.returned} evaluations)"
    left = state.granted - state.reported_through
    return (
        f"{state.reported_through} of the grant's {state.granted} evaluations were reported;"
        f" at most {left} can be given back, not {unused}"
    )


def _undo(services: Services, grant: LocalGrant) -> None:
    """The meter refused: forget the give-back so a retry can make it. If even that fails, the
    quota stays counted as served (usage errs high, never low) and an operator is told."""
    try:
        services.store.undo_give_back(grant)
    except UnavailableError:
        log.error(
            "local give-back recorded but not refunded: the quota stays counted as served",
            extra={"idPrefix": grant.id_prefix, "organization": grant.organization_id},
        )


def _grant(services: Services, caller: Caller, id_prefix: str) -> LocalGrant:
    """The grant ``id_prefix`` names; ``ReportProblem`` if it is no grant of the key's
    environment (forged, another environment's, or an evaluate answer's ids)."""
    try:
        block = services.ids.verify(id_prefix + "0000")
    except InvalidEvaluationId:
        raise ReportProblem("the id block was not issued by this service") from None
    if caller.environment is None or block.environment_id != caller.environment.id:
        raise ReportProblem("the id block was issued for another environment than this key's")
    if block.granted_at is None or caller.organization is None:
        raise ReportProblem("the id block is an evaluate answer's, not a local grant's")
    return LocalGrant(id_prefix, caller.organization.id, block.count, block.granted_at)


def note_reported(services: Services, checked: CheckedReport) -> None:
    """Record how far the report reaches into each grant, before its events are appended.

    ``ReportProblem`` when it holds ids given back (nothing recorded); ``NotRecorded`` when
    the ledger cannot be written now."""
    try:
        refused = services.store.note_grants_reported(checked.reached)
    except UnavailableError as exc:
        raise NotRecorded(str(exc)) from None
    if refused is not None:
        grant, state = refused
        raise ReportProblem(
            f"evaluations of the grant {grant.id_prefix} were given back"
            f" ({state.returned} of {state.granted}): they cannot be reported"
        )


def report_of(
    services: Services, caller: Caller, evaluations: list[LocalEvaluation], sdk: str | None
) -> CheckedReport:
    """The report to append; ``ReportProblem`` (naming the index) for the first evaluation
    that cannot be taken, and then none is.

    ``evaluations`` is kept as the event log's rows: only a row whose time is outside the
    report window is replaced (by one at the time the report arrived)."""
    environment, organization = caller.environment, caller.organization
    if environment is None or organization is None:
        raise ReportProblem("the key's environment is gone")
    now = services.clock()
    lowest, highest = (now - REPORT_PAST_S) * 1000, (now + REPORT_FUTURE_S) * 1000
    blocks: dict[str, list[int]] = {}  # prefix -> [count, highest index + 1]
    grants: dict[str, LocalGrant] = {}
    outcomes = set(OUTCOMES)  # the registry's now (a test may register a rule type)
    hex_digits = _HEX_DIGITS
    # one bytecode costs about as much as a check here (10,000 rows a report): fields by
    # unpacking, the block of each prefix verified once
    for index, (evaluation_id, at_ms, _, _, value, rule_type, error_type, _, _, _) in enumerate(
        evaluations
    ):
        prefix, digits = evaluation_id[:PREFIX_LENGTH], evaluation_id[PREFIX_LENGTH:]
        block = blocks.get(prefix)
        if block is None:
            try:
                grant = grants[prefix] = _grant(services, caller, prefix)
            except ReportProblem as exc:
                raise ReportProblem(f"evaluations[{index}]: {exc}") from None
            block = blocks[prefix] = [grant.count, 0]
        count = block[0]
        try:
            position = int(digits, 16)
        except ValueError:
            position = count
        # the one spelling this service issues (int() would also read " 1a", "+1a", "1_a")
        if position >= count or digits != hex_digits[position >> 8] + hex_digits[position & 255]:
            raise ReportProblem(f"evaluations[{index}]: the evaluation id is not in its block")
        if position >= block[1]:
            block[1] = position + 1
        if (value, rule_type, error_type) not in outcomes:
            raise ReportProblem(
                f"evaluations[{index}]: value, matchedRuleType and errorType are no outcome"
            )
        if not lowest <= at_ms <= highest:
            evaluations[index] = (evaluation_id, int(now * 1000), *evaluations[index][2:])
    report = LocalReport(
        organization.id,
        environment.id,
        sdk,
        caller.key.key_id,
        evaluations,  # type: ignore[arg-type]
    )
    return CheckedReport(report, [(grants[p], block[1]) for p, block in blocks.items()])
