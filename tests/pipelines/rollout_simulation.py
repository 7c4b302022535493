"""Guarded rollouts in simulation: thousands of rollouts judged read by read, vectorized.

Each simulated rollout goes through its plan as the guardian takes it (``pipelines.guardian``):
read every five minutes, its evidence kept across its steps (each step a stratum for failure
rate and coverage, each arm's latencies pooled for the p95), a regression shown on any
guardrail rolls it back at any read, a step whose time has passed advances once every
guardrail is shown within its tolerance, and one still waiting ``MAX_WAIT_SECONDS`` after its
time is held. Users arrive at random (Poisson per read), each is new (a user is counted in
one step), reports feedback with the arm's coverage and, with it, a log-normal latency.

The tests are the package's own, vectorized over rollouts: ``guard.rejects`` for failure rate
and coverage (exactly what ``proportion_guard`` decides with), and for the p95 the two-sample
sequence of ``quantiles`` on each rollout's pooled histograms, with an exact shortcut for the
regression side: when the pair (the control's true-p95 bucket, the same bucket) is accepted
the interval holds 0, so only reads where it is rejected (rare when nothing changed) are
computed in full. ``tests/pipelines/test_guardian.py`` checks this rule against
``guard_evidence.evidence_of`` and ``judge`` on sampled reads.

The sample-ratio check is left out: it can only hold a rollout, never roll it back or advance
it, so leaving it out can only raise the rates measured here.

Run as a module for the tables in docs/statistics.md:

    .venv/bin/python -m tests.pipelines.rollout_simulation [HEALTHY_ROLLOUTS [REGRESSION_ROLLOUTS]]
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.special import betaln
from scipy.stats import lognorm

from api.controlplane.changes import DEFAULT_TOLERANCES, GUARDRAILS
from api.web.admin.rollouts import DEFAULT_STEP_MINUTES, DEFAULT_STEPS
from pipelines.guardian import MAX_WAIT_SECONDS
from pipelines.health import LATENCY_QUANTILE
from warehouse.statistics.boundaries import tuning_constant
from warehouse.statistics.guard import SAFETY_ALPHA, rejects, rollback_alpha
from warehouse.statistics.histogram import buckets_of, lower_edge, upper_edge
from warehouse.statistics.quantiles import (
    TWO_SAMPLE_DESIGN_USERS,
    ArmCells,
    quantile_difference_interval,
)

READ_SECONDS = 300.0
COVERAGE = 0.95
LATENCY_MEDIAN_MS, LATENCY_SIGMA = 150.0, 0.5
HOURLY = 60.0

RUNNING, ROLLED_BACK, HELD, COMPLETED = "running", "rolledBack", "held", "completed"
_CODES = (RUNNING, ROLLED_BACK, HELD, COMPLETED)


@dataclass(frozen=True)
class Scenario:
    users_per_day: int
    step_minutes: float = DEFAULT_STEP_MINUTES
    control_failure: float = 0.01
    treatment_failure: float | None = None  # None: as control
    treatment_slowdown: float = 1.0
    treatment_coverage: float | None = None  # None: as control
    steps: tuple[float, ...] = DEFAULT_STEPS
    tolerances: tuple[tuple[str, float], ...] = ()
    guardrails: tuple[str, ...] = GUARDRAILS

    @property
    def tolerance(self) -> dict[str, float]:
        return {**DEFAULT_TOLERANCES, **dict(self.tolerances)}

    @property
    def healthy(self) -> bool:
        return (
            self.treatment_failure in (None, self.control_failure)
            and self.treatment_slowdown == 1.0
            and self.treatment_coverage in (None, COVERAGE)
        )

    def describe(self) -> str:
        failure = f"{self.control_failure:.2%}"
        if self.treatment_failure is not None:
            failure += f" -> {self.treatment_failure:.2%}"
        text = (
            f"{self.users_per_day:,} users/day, {self.step_minutes:g}-min steps"
            f" {'/'.join(f'{s:g}' for s in self.steps)}, failure {failure}"
        )
        if self.treatment_slowdown != 1.0:
            text += f", p95 x{self.treatment_slowdown:g}"
        if self.tolerances:
            text += ", tolerance " + ", ".join(f"{g} {t:g}" for g, t in self.tolerances)
        return text


@lru_cache(maxsize=16)
def latency_model(slowdown: float = 1.0) -> LatencyModel:
    return LatencyModel(slowdown)


class LatencyModel:
    """Log-normal per-user latencies over histogram buckets. ``p95_index`` is the bucket
    holding the control's true p95."""

    def __init__(self, slowdown: float = 1.0) -> None:
        dist = lognorm(LATENCY_SIGMA, scale=LATENCY_MEDIAN_MS * slowdown)
        base = lognorm(LATENCY_SIGMA, scale=LATENCY_MEDIAN_MS)
        self.buckets = np.arange(
            int(buckets_of([base.ppf(1e-7) / 2])[0]), int(buckets_of([base.ppf(1 - 1e-9) * 3])[0])
        )
        self.upper = np.array([upper_edge(int(b)) for b in self.buckets])
        self.lower = np.array([lower_edge(int(b)) for b in self.buckets])
        probabilities = dist.cdf(self.upper) - dist.cdf(self.lower)
        self.probabilities = probabilities / probabilities.sum()
        self.cumulative = np.cumsum(self.probabilities)
        self.p95_index = int(np.searchsorted(self.upper, base.ppf(LATENCY_QUANTILE)))

    def cells(self, counts: np.ndarray) -> ArmCells:
        present = counts > 0
        return ArmCells(self.lower[present], self.upper[present], counts[present], None)


def true_p95_difference(slowdown: float) -> float:
    """The treatment's p95 minus the control's, in ms, for a slowdown of every latency."""
    base = lognorm(LATENCY_SIGMA, scale=LATENCY_MEDIAN_MS).ppf(LATENCY_QUANTILE)
    return float(base * (slowdown - 1.0))


def _log_mixture(n: np.ndarray, s: np.ndarray, alpha: float) -> np.ndarray:
    """``quantiles``' beta-binomial log mixture, vectorized over arms."""
    q = LATENCY_QUANTILE
    k = max(TWO_SAMPLE_DESIGN_USERS / tuning_constant(alpha) - 1.0, 1.0)
    a, b = k * q, k * (1.0 - q)
    return betaln(a + s, b + n - s) - betaln(a, b) - s * math.log(q) - (n - s) * math.log1p(-q)


def _least_log_mixture(n: np.ndarray, low: np.ndarray, high: np.ndarray, alpha: float):
    """The minimum of the (convex) log mixture over the counts ``low..high``: its minimum is
    within a few counts of ``q n``, so it is that point clipped to the range."""
    centre = np.round(LATENCY_QUANTILE * n)
    offsets = np.arange(-6, 7)[:, None]
    s = np.clip(centre[None] + offsets, low[None], high[None])
    return _log_mixture(n[None], s, alpha).min(axis=0)


@dataclass
class Rollouts:
    """Every simulated rollout's state, read by read."""

    scenario: Scenario
    count: int
    state: np.ndarray = field(init=False)
    step: np.ndarray = field(init=False)
    step_started: np.ndarray = field(init=False)  # read index
    ended_at: np.ndarray = field(init=False)  # read index; -1 while running
    treatment_users_at_end: np.ndarray = field(init=False)
    # per rollout and step (stratum): users, users with feedback, failed users, per arm
    users: np.ndarray = field(init=False)  # (arm, rollout, step)
    feedback: np.ndarray = field(init=False)
    failed: np.ndarray = field(init=False)
    histograms: np.ndarray = field(init=False)  # (arm, rollout, bucket), pooled over steps

    def __post_init__(self) -> None:
        steps, buckets = len(self.scenario.steps), len(latency_model().buckets)
        self.state = np.zeros(self.count, dtype=np.int8)
        self.step = np.zeros(self.count, dtype=np.int64)
        self.step_started = np.zeros(self.count, dtype=np.int64)
        self.ended_at = np.full(self.count, -1, dtype=np.int64)
        self.treatment_users_at_end = np.zeros(self.count, dtype=np.int64)
        self.users = np.zeros((2, self.count, steps), dtype=np.int64)
        self.feedback = np.zeros((2, self.count, steps), dtype=np.int64)
        self.failed = np.zeros((2, self.count, steps), dtype=np.int64)
        self.histograms = np.zeros((2, self.count, buckets), dtype=np.int64)

    def states(self) -> np.ndarray:
        return np.array(_CODES, dtype=object)[self.state]


def _arrive(rng: np.random.Generator, r: Rollouts, active: np.ndarray) -> None:
    """One read's new users for the active rollouts, at each one's current split."""
    s = r.scenario
    share = np.asarray(s.steps)[r.step[active]] / 100.0
    arriving = rng.poisson(s.users_per_day * READ_SECONDS / 86_400, active.size)
    treated = rng.binomial(arriving, share)
    coverage = (s.treatment_coverage or COVERAGE, COVERAGE)
    failure = (s.treatment_failure or s.control_failure, s.control_failure)
    models = (latency_model(s.treatment_slowdown), latency_model())
    stratum = r.step[active]
    for arm, users in enumerate((treated, arriving - treated)):
        feedback = rng.binomial(users, coverage[arm])
        failed = rng.binomial(feedback, failure[arm])
        r.users[arm, active, stratum] += users
        r.feedback[arm, active, stratum] += feedback
        r.failed[arm, active, stratum] += failed
        _add_latencies(rng, r.histograms[arm], active, feedback, models[arm])


def _add_latencies(rng, histograms, rows, users, model: LatencyModel) -> None:
    """Each new user's latency bucket, drawn one by one (cheaper than a multinomial per row
    when a read brings a few users to each of many rollouts)."""
    owners = np.repeat(rows, users)
    buckets = np.searchsorted(model.cumulative, rng.random(owners.size), side="right")
    np.add.at(histograms, (owners, np.minimum(buckets, model.cumulative.size - 1)), 1)


def _proportions(r: Rollouts, rows: np.ndarray, guardrail: str):
    """``(x_T, n_T, x_C, n_C)`` per row and stratum, the worse side higher (coverage: users
    without feedback)."""
    if guardrail == "failureRate":
        return r.failed[0, rows], r.feedback[0, rows], r.failed[1, rows], r.feedback[1, rows]
    t_users, c_users = r.users[0, rows], r.users[1, rows]
    return (t_users - r.feedback[0, rows], t_users, c_users - r.feedback[1, rows], c_users)


def proportion_shown(
    r: Rollouts, rows: np.ndarray, guardrail: str, *, regression: bool
) -> np.ndarray:
    """The guard's one-sided test for rows: a regression shown (``regression``), or the
    regression shown below the tolerance."""
    tol = r.scenario.tolerance[guardrail] / 100.0
    if regression:
        alpha, delta = rollback_alpha(len(r.scenario.guardrails)), 0.0
    else:
        alpha, delta = SAFETY_ALPHA, tol
    counts = _proportions(r, rows, guardrail)
    return rejects(*counts, delta, alpha=alpha, above=regression, mixing_sd=tol)


def p95_interval_end(r: Rollouts, row: int, *, regression: bool) -> float:
    """The p95 interval's end that decides: the lower at the rollback level, or the upper at
    the safety level (ms)."""
    model = latency_model()
    treatment = model.cells(r.histograms[0, row])
    control = model.cells(r.histograms[1, row])
    if treatment.n == 0 or control.n == 0:
        return -math.inf if regression else math.inf
    if regression:
        alpha = rollback_alpha(len(r.scenario.guardrails))
        return quantile_difference_interval(treatment, control, LATENCY_QUANTILE, 1.0 - alpha)[0]
    return quantile_difference_interval(treatment, control, LATENCY_QUANTILE, 1 - SAFETY_ALPHA)[1]


def p95_regression(r: Rollouts, rows: np.ndarray) -> np.ndarray:
    """Rows whose p95 regression is shown: the shortcut clears most, the rest in full."""
    alpha = rollback_alpha(len(r.scenario.guardrails))
    index = latency_model().p95_index
    n = r.histograms[:, rows].sum(axis=2).astype(float)
    below = r.histograms[:, rows, :index].sum(axis=2)
    inside = r.histograms[:, rows, index]
    common = _least_log_mixture(n[0], below[0], below[0] + inside[0], alpha)
    common += _least_log_mixture(n[1], below[1], below[1] + inside[1], alpha)
    cleared = (common < math.log(1.0 / alpha)) | (n.min(axis=0) == 0)
    shown = np.zeros(rows.size, dtype=bool)
    for k in np.flatnonzero(~cleared):
        shown[k] = p95_interval_end(r, int(rows[k]), regression=True) > 0
    return shown


def regression_shown(r: Rollouts, rows: np.ndarray) -> np.ndarray:
    shown = np.zeros(rows.size, dtype=bool)
    for guardrail in r.scenario.guardrails:
        if guardrail == "latencyP95Ms":
            shown |= p95_regression(r, rows)
        else:
            shown |= proportion_shown(r, rows, guardrail, regression=True)
    return shown


def safety_shown(r: Rollouts, rows: np.ndarray) -> np.ndarray:
    """Rows where every guardrail is shown within its tolerance (p95 last: the costliest)."""
    safe = np.ones(rows.size, dtype=bool)
    for guardrail in r.scenario.guardrails:
        if guardrail != "latencyP95Ms":
            safe &= proportion_shown(r, rows, guardrail, regression=False)
    if "latencyP95Ms" in r.scenario.guardrails:
        tolerance = r.scenario.tolerance["latencyP95Ms"]
        candidates = np.flatnonzero(safe)
        safe[candidates] = p95_might_be_safe(r, rows[candidates], tolerance)
        for k in np.flatnonzero(safe):
            safe[k] = p95_interval_end(r, int(rows[k]), regression=False) < tolerance
    return safe


def p95_might_be_safe(r: Rollouts, rows: np.ndarray, tolerance: float) -> np.ndarray:
    """False where the p95's upper end is surely not below ``tolerance``: the pair (a point
    of the control's true-p95 bucket, that point plus the tolerance) is accepted, so the
    interval reaches the tolerance. The full computation decides the rest."""
    model = latency_model()
    c = model.p95_index
    t = min(int(np.searchsorted(model.upper, model.lower[c] + tolerance)), len(model.upper) - 1)
    n = r.histograms[:, rows].sum(axis=2).astype(float)
    below_t = r.histograms[0, rows, :t].sum(axis=1)
    below_c = r.histograms[1, rows, :c].sum(axis=1)
    evidence = _least_log_mixture(n[0], below_t, below_t + r.histograms[0, rows, t], SAFETY_ALPHA)
    evidence += _least_log_mixture(n[1], below_c, below_c + r.histograms[1, rows, c], SAFETY_ALPHA)
    return (evidence >= math.log(1.0 / SAFETY_ALPHA)) & (n.min(axis=0) > 0)


def run_rollouts(scenario: Scenario, rollouts: int, seed: int, max_days: float | None = None):
    """Every rollout to its end (or ``max_days``): the ``Rollouts`` with each one's state, the
    read it ended at and the treatment users it had then."""
    rng = np.random.default_rng(seed)
    r = Rollouts(scenario, rollouts)
    last = len(scenario.steps) - 1
    step_reads = max(round(scenario.step_minutes * 60 / READ_SECONDS), 1)
    wait_reads = round(MAX_WAIT_SECONDS / READ_SECONDS)
    horizon = last * (step_reads + wait_reads)
    if max_days is not None:
        horizon = min(horizon, round(max_days * 86_400 / READ_SECONDS))
    for read in range(1, horizon + 1):
        active = np.flatnonzero(r.state == 0)
        if active.size == 0:
            break
        _arrive(rng, r, active)
        back = regression_shown(r, active)
        _end(r, active[back], ROLLED_BACK, read)
        active = active[~back]
        due = active[read - r.step_started[active] >= step_reads]
        safe = due[safety_shown(r, due)] if due.size else due
        r.step[safe] += 1
        r.step_started[safe] = read
        _end(r, safe[r.step[safe] == last], COMPLETED, read)
        waiting = np.setdiff1d(due, safe)
        _end(r, waiting[read - r.step_started[waiting] >= step_reads + wait_reads], HELD, read)
    return r


def _end(r: Rollouts, rows: np.ndarray, state: str, read: int) -> None:
    r.state[rows] = _CODES.index(state)
    r.ended_at[rows] = read
    r.treatment_users_at_end[rows] = r.users[0, rows].sum(axis=1)


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Summary:
    scenario: Scenario
    rollouts: int
    rolled_back: int
    held: int
    completed: int
    completed_hours: tuple[float, float] | None  # median, p95
    rolled_back_hours: float | None  # median

    @property
    def rolled_back_upper(self) -> float:
        return wilson(self.rolled_back, self.rollouts)[1]

    @property
    def completed_upper(self) -> float:
        return wilson(self.completed, self.rollouts)[1]


def summarize(scenario: Scenario, rollouts: int, seed: int) -> Summary:
    r = run_rollouts(scenario, rollouts, seed)
    states = r.states()
    hours = r.ended_at * READ_SECONDS / 3600

    def times(state: str) -> np.ndarray:
        return hours[states == state]

    done, back = times(COMPLETED), times(ROLLED_BACK)
    return Summary(
        scenario, rollouts, int((states == ROLLED_BACK).sum()), int((states == HELD).sum()),
        int((states == COMPLETED).sum()),
        (float(np.median(done)), float(np.percentile(done, 95))) if done.size else None,
        float(np.median(back)) if back.size else None,
    )  # fmt: skip


TRAFFIC = (2_000, 20_000, 200_000)
PLANS = ((DEFAULT_STEP_MINUTES, DEFAULT_STEPS), (HOURLY, DEFAULT_STEPS))


def regressions(users: int, minutes: float, steps: tuple[float, ...]) -> list[Scenario]:
    """The regressions of the acceptance table, each at exactly its tolerance and at twice it."""
    cases = []
    for control, treatment in ((0.01, 0.02), (0.001, 0.005), (0.05, 0.075)):
        gap = 100.0 * (treatment - control)
        for tolerance in (gap, gap / 2):
            cases.append(
                Scenario(users, minutes, control, treatment, steps=steps,
                         tolerances=(("failureRate", round(tolerance, 6)),))
            )  # fmt: skip
    for slowdown in (1.2, 1.5):
        gap = true_p95_difference(slowdown)
        for tolerance in (gap, gap / 2):
            cases.append(
                Scenario(users, minutes, treatment_slowdown=slowdown, steps=steps,
                         tolerances=(("latencyP95Ms", round(tolerance, 3)),))
            )  # fmt: skip
    return cases


def _row(summary: Summary) -> str:
    n = summary.rollouts
    completed = f"{summary.completed / n:.1%} [≤ {summary.completed_upper:.1%}]"
    if summary.completed_hours is not None:
        median, p95 = summary.completed_hours
        completed += f" ({_duration(median)}, {_duration(p95)})"
    back = "-" if summary.rolled_back_hours is None else _duration(summary.rolled_back_hours)
    return (
        f"| {summary.scenario.describe()} | {summary.rolled_back / n:.2%}"
        f" [≤ {summary.rolled_back_upper:.2%}] | {summary.held / n:.1%} | {completed} | {back} |"
    )


def _duration(hours: float) -> str:
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def main(healthy_rollouts: int = 2_000, regression_rollouts: int = 400) -> None:
    print(
        "| scenario | rolled back [Wilson 95 % upper] | held | reached 100 % [Wilson 95 % upper]"
        " (median, p95 time) | median time to roll back |"
    )
    print("|---|---|---|---|---|")
    seed = 1
    for users in TRAFFIC:
        for minutes, steps in PLANS:
            print(_row(summarize(Scenario(users, minutes, steps=steps), healthy_rollouts, seed)),
                  flush=True)  # fmt: skip
            for scenario in regressions(users, minutes, steps):
                seed += 1
                print(_row(summarize(scenario, regression_rollouts, seed)), flush=True)
    blatant = Scenario(200_000, HOURLY, 0.01, 1.0, steps=(1.0, 5.0, 25.0, 50.0, 100.0))
    r = run_rollouts(blatant, regression_rollouts, seed=99)
    print(
        f"\n100 % failing at a 1 % step: {np.mean(r.states() == ROLLED_BACK):.1%} rolled back,"
        f" treatment users by then: median {np.median(r.treatment_users_at_end):.0f},"
        f" max {r.treatment_users_at_end.max()}"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
