"""What the dashboard shows of a guarded rollout: each watched guardrail by its label, with its
tolerance and the guardian's latest evidence (``Rollout.guard``) in words; the start form's
defaults; and whether a change of the flag's split moves what the rollout sets.

The evidence is treatment minus control in the guardrail's unit (percentage points or
milliseconds) over every step so far; an interval end the data cannot bound yet is null.
Names, labels, units and default tolerances come from ``api.controlplane.changes``, the
default plan from the admin API's ``fields``: nothing about a guardrail is written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flagsight_core import PercentageRule, Rule, first_split
from flagsight_core.words import counted

from api.controlplane.changes import (
    DEFAULT_TOLERANCES,
    GUARDRAIL_LABELS,
    GUARDRAIL_UNITS,
    GUARDRAILS,
    Rollout,
    RolloutState,
)
from api.web.admin.rollouts import DEFAULT_STEP_MINUTES, DEFAULT_STEPS
from api.web.dashboard.format import MISSING, number

STATUS_TEXT = {
    "safe": "Shown within tolerance",
    "regression": "Regression shown",
    "undecided": "Not yet shown",
}
"""What each guardrail status of the evidence means, for people."""

NO_EVIDENCE = "Not judged yet"

UNIT_NAMES = {"pp": "percentage points", "ms": "milliseconds"}
"""Each unit of ``GUARDRAIL_UNITS`` in words (an abbreviation's title)."""

DECIMALS = {"pp": 2, "ms": 1}


@dataclass(frozen=True)
class GuardrailRow:
    """One watched guardrail as the rollout panel shows it, every figure as text."""

    name: str
    label: str
    tolerance: str
    status: str
    """``safe``, ``regression``, ``undecided``, or ``none`` before any evidence."""
    status_text: str
    difference: str
    interval: str
    users: str
    needed: str


def amount(value: float, unit: str) -> str:
    """A signed difference in its unit: ``+0.40 pp``, ``-12.5 ms``."""
    return f"{value:+.{DECIMALS[unit]}f} {unit}"


def tolerance_text(guardrail: str, tolerance: float) -> str:
    """``1 pp``, ``50 ms``."""
    return f"{tolerance:g} {GUARDRAIL_UNITS[guardrail]}"


def interval_text(ci: Sequence[float | None] | None, unit: str) -> str:
    """An interval whose ends may not be bounded yet, in words."""
    low, high = ci if ci else (None, None)
    if low is None and high is None:
        return "not bounded yet"
    if low is None:
        return f"up to {amount(high, unit)} (lower end not bounded yet)"
    if high is None:
        return f"from {amount(low, unit)} (upper end not bounded yet)"
    return f"{amount(low, unit)} to {amount(high, unit)}"


def guardrail_rows(rollout: Rollout) -> list[GuardrailRow]:
    """The watched guardrails in the plan's order, with the evidence of each, if any."""
    guard = rollout.guard or {}
    evidence = guard.get("guardrails") or {}
    percentage = guard.get("percentage", rollout.percentage)
    tolerances = rollout.plan.tolerances
    return [
        _row(name, tolerances[name], evidence.get(name), percentage)
        for name in rollout.plan.guardrails
    ]


def _row(
    name: str, tolerance: float, bound: dict[str, Any] | None, percentage: float
) -> GuardrailRow:
    label, unit = GUARDRAIL_LABELS[name], GUARDRAIL_UNITS[name]
    if bound is None:
        return GuardrailRow(name, label, tolerance_text(name, tolerance), "none", NO_EVIDENCE,
                            MISSING, MISSING, MISSING, MISSING)  # fmt: skip
    difference, needed = bound.get("difference"), bound.get("usersNeeded")
    users = bound.get("users") or {}
    return GuardrailRow(
        name=name,
        label=label,
        tolerance=tolerance_text(name, bound.get("tolerance", tolerance)),
        status=bound["status"],
        status_text=STATUS_TEXT.get(bound["status"], bound["status"]),
        difference=MISSING if difference is None else amount(difference, unit),
        interval=interval_text(bound.get("ci"), unit),
        users=f"{number(users.get('treatment'))} treatment, {number(users.get('control'))} control",
        needed=MISSING
        if needed is None
        else f"about {counted(int(needed), 'more user')} at {percentage:g} %",
    )


def confidence_text(rollout: Rollout) -> str:
    """The levels the evidence is read at, in words; empty before any evidence."""
    confidence = (rollout.guard or {}).get("confidence") or {}
    if not confidence:
        return ""
    return (
        f"a regression beyond a tolerance rolls back once shown at"
        f" {confidence['rollback'] * 100:.4g} % confidence; a step advances once every"
        f" guardrail is shown within its tolerance at {confidence['safety'] * 100:.4g} %"
    )


def default_rollout_form() -> dict[str, str]:
    """The start form's defaults: the admin API's plan (``api.web.admin.rollouts``) and the
    default tolerances, every guardrail watched."""
    return {
        "steps": ", ".join(f"{step:g}" for step in DEFAULT_STEPS),
        "step_minutes": f"{DEFAULT_STEP_MINUTES:g}",
        **{f"guardrail_{g}": "on" for g in GUARDRAILS},
        **{f"tolerance_{g}": f"{DEFAULT_TOLERANCES[g]:g}" for g in GUARDRAILS},
    }


def running(rollout: Rollout | None) -> Rollout | None:
    """The rollout when it is running (it moves the flag's split on its own), else None."""
    return rollout if rollout is not None and rollout.state is RolloutState.RUNNING else None


def split_percentage(rules: Sequence[Rule]) -> float | None:
    """The first percentage rule's percentage (the split a rollout moves), or None."""
    index = first_split(rules)
    rule = rules[index] if index >= 0 else None
    return float(rule.percentage) if isinstance(rule, PercentageRule) else None


@dataclass(frozen=True)
class SplitChange:
    """A save that moves a running rollout's split: from what the flag has to what it would."""

    before: float | None
    after: float | None


def split_change(stored: Sequence[Rule], draft: Sequence[Rule]) -> SplitChange | None:
    """What saving ``draft`` over ``stored`` does to the first percentage rule's percentage,
    or None when it keeps it."""
    before, after = split_percentage(stored), split_percentage(draft)
    return None if before == after else SplitChange(before, after)
