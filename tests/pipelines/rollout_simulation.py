"""Guarded rollouts in simulation: thousands of rollouts judged read by read, vectorized.

Each simulated rollout goes through its steps as the guardian takes it (``pipelines.guardian``):
every step is a fresh comparison (its own epoch) read every five minutes; a regression on a
watched guardrail at the rollout's level rolls it back, a step whose time has passed advances
once every guardrail is judged, and one still unjudged a day after its time is held. Users
arrive at random (Poisson per read); each user with feedback also reports a latency.

The comparisons are the package's own, vectorized over rollouts: ``excludes_difference`` for
failure rate and coverage, and for the p95 the two-sample sequence with an exact shortcut.
The p95 interval contains every difference of a pair of quantiles that the mixtures accept
together, so when the pair (common threshold, common threshold) is accepted it holds 0 and the
read is no p95 regression; only reads where that pair is rejected (rare when nothing changed)
are computed in full, on histograms rebuilt from the same draws (``p95_comparison``).
``tests/pipelines/test_guardian.py`` checks this rule against ``health_row`` and ``judge`` on
sampled reads.

The sample-ratio check is left out: it can only hold a rollout, never roll it back, so leaving
it out can only raise the rollback rate measured here.

Run as a module for the figures in docs/statistics.md:

    .venv/bin/python -m tests.pipelines.rollout_simulation
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import betaln
from scipy.stats import lognorm

from pipelines.guardian import MAX_WAIT_SECONDS
from pipelines.health import LATENCY_QUANTILE
from warehouse.statistics import (
    MIN_USERS_WITH_FEEDBACK,
    ArmCells,
    compare_quantiles,
    excludes_difference,
    rollout_confidence,
)
from warehouse.statistics.boundaries import tuning_constant
from warehouse.statistics.histogram import buckets_of, lower_edge, upper_edge
from warehouse.statistics.quantiles import TWO_SAMPLE_DESIGN_USERS

STEPS = (1.0, 5.0, 25.0, 50.0, 100.0)
GUARDRAILS = ("failureRate", "latencyP95Ms", "coverage")
READ_SECONDS = 300.0
COVERAGE = 0.95
LATENCY_MEDIAN_MS, LATENCY_SIGMA = 150.0, 0.5

ROLLED_BACK, HELD, COMPLETED = "rolledBack", "held", "completed"


@dataclass(frozen=True)
class Scenario:
    users_per_day: int
    step_minutes: float
    control_failure: float
    treatment_failure: float | None = None  # None: as control (A/A)
    treatment_slowdown: float = 1.0

    @property
    def reads_per_step(self) -> int:
        return round(self.step_minutes * 60 / READ_SECONDS)

    def describe(self) -> str:
        failure = f"{self.control_failure:.2%}"
        if self.treatment_failure is not None:
            failure += f" -> {self.treatment_failure:.2%}"
        return (
            f"{self.users_per_day:,} users/day, {self.step_minutes:g}-minute steps, "
            f"failure {failure}"
        )


@lru_cache(maxsize=8)
def latency_model(slowdown: float = 1.0) -> LatencyModel:
    return LatencyModel(slowdown)


class LatencyModel:
    """Log-normal per-user latencies, drawn as histogram bucket counts. ``p95_index`` is the
    bucket holding the control's true p95; ``below`` the probability of a latency in a lower
    bucket, ``inside`` in that bucket."""

    def __init__(self, slowdown: float = 1.0) -> None:
        dist = lognorm(LATENCY_SIGMA, scale=LATENCY_MEDIAN_MS * slowdown)
        base = lognorm(LATENCY_SIGMA, scale=LATENCY_MEDIAN_MS)
        self.buckets = np.arange(
            int(buckets_of([base.ppf(1e-7) / 2])[0]), int(buckets_of([base.ppf(1 - 1e-9) * 3])[0])
        )
        upper = np.array([upper_edge(int(b)) for b in self.buckets])
        lower = np.array([lower_edge(int(b)) for b in self.buckets])
        probabilities = dist.cdf(upper) - dist.cdf(lower)
        self.probabilities = probabilities / probabilities.sum()
        self.p95_index = int(np.searchsorted(upper, base.ppf(LATENCY_QUANTILE)))
        self.below = float(self.probabilities[: self.p95_index].sum())
        self.inside = float(self.probabilities[self.p95_index])


@dataclass
class StepReads:
    """Cumulative counts per rollout (rows) and read (columns) within one step."""

    users_t: np.ndarray
    users_c: np.ndarray
    feedback_t: np.ndarray
    feedback_c: np.ndarray
    failed_t: np.ndarray
    failed_c: np.ndarray
    below_t: np.ndarray  # users with a latency below the p95's bucket
    below_c: np.ndarray
    inside_t: np.ndarray  # users with a latency in it
    inside_c: np.ndarray
    new_feedback_t: np.ndarray  # per read, not cumulative: to rebuild histograms
    new_feedback_c: np.ndarray
    new_below_t: np.ndarray
    new_below_c: np.ndarray
    new_inside_t: np.ndarray
    new_inside_c: np.ndarray


def draw_step(
    rng: np.random.Generator, scenario: Scenario, share: float, rollouts: int, reads: int
) -> StepReads:
    shape = (rollouts, reads)
    arriving = rng.poisson(scenario.users_per_day * READ_SECONDS / 86_400, shape)
    users_t = rng.binomial(arriving, share)
    users_c = arriving - users_t
    feedback_t, feedback_c = rng.binomial(users_t, COVERAGE), rng.binomial(users_c, COVERAGE)
    treatment_failure = scenario.treatment_failure
    if treatment_failure is None:
        treatment_failure = scenario.control_failure
    failed_t = rng.binomial(feedback_t, treatment_failure)
    failed_c = rng.binomial(feedback_c, scenario.control_failure)
    treatment_model, control_model = latency_model(scenario.treatment_slowdown), latency_model()
    below_t = rng.binomial(feedback_t, treatment_model.below)
    below_c = rng.binomial(feedback_c, control_model.below)
    inside_t = rng.binomial(
        feedback_t - below_t, treatment_model.inside / (1 - treatment_model.below)
    )
    inside_c = rng.binomial(feedback_c - below_c, control_model.inside / (1 - control_model.below))
    per_read = (users_t, users_c, feedback_t, feedback_c, failed_t, failed_c, below_t, below_c,
                inside_t, inside_c)  # fmt: skip
    cumulative = [np.cumsum(a, axis=1) for a in per_read]
    return StepReads(*cumulative, feedback_t, feedback_c, below_t, below_c, inside_t, inside_c)


def _log_mixture(n: np.ndarray, s: np.ndarray, alpha: float) -> np.ndarray:
    """``quantiles``' beta-binomial log mixture, vectorized over arms."""
    q = LATENCY_QUANTILE
    k = max(TWO_SAMPLE_DESIGN_USERS / tuning_constant(alpha) - 1.0, 1.0)
    a, b = k * q, k * (1.0 - q)
    return betaln(a + s, b + n - s) - betaln(a, b) - s * math.log(q) - (n - s) * math.log1p(-q)


def _least_log_mixture(n: np.ndarray, low: np.ndarray, high: np.ndarray, alpha: float):
    """The minimum of the log mixture over the counts ``low..high``: it is convex, with its
    unconstrained minimum within a few counts of ``q n``, so the minimum is at that point
    clipped to the range."""
    centre = np.round(LATENCY_QUANTILE * n)
    offsets = np.arange(-6, 7)[:, None, None]
    s = np.clip(centre[None] + offsets, low[None], high[None])
    return _log_mixture(n[None], s, alpha).min(axis=0)


def p95_shortcut(reads: StepReads, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``(cleared, bounded)``: reads where both arms' p95 bucket, taken as a pair of cells,
    is accepted (so the interval holds 0: no regression, no improvement), and reads whose
    interval has finite ends (each arm's count above all its values rejected even with the
    other arm at its least)."""
    n_t, n_c = reads.feedback_t.astype(float), reads.feedback_c.astype(float)
    zero_t, zero_c = np.zeros_like(n_t), np.zeros_like(n_c)
    threshold = math.log(1.0 / alpha)
    common = _least_log_mixture(
        n_t, reads.below_t, reads.below_t + reads.inside_t, alpha
    ) + _least_log_mixture(n_c, reads.below_c, reads.below_c + reads.inside_c, alpha)
    cleared = common < threshold
    top_t = _log_mixture(n_t, n_t, alpha) + _least_log_mixture(n_c, zero_c, n_c, alpha)
    top_c = _log_mixture(n_c, n_c, alpha) + _least_log_mixture(n_t, zero_t, n_t, alpha)
    return cleared, (top_t >= threshold) & (top_c >= threshold)


def rebuild_histograms(
    reads: StepReads, row: int, column: int, slowdown: float, seed: tuple
) -> tuple[np.ndarray, np.ndarray, LatencyModel]:
    """The two arms' bucket counts at a read, drawn consistently with the counts under the
    threshold (the same seed gives the same histograms)."""
    rng = np.random.default_rng(seed + (row,))
    control_model = latency_model()
    arms = []
    for model, feedback, below, inside in (
        (latency_model(slowdown), reads.new_feedback_t, reads.new_below_t, reads.new_inside_t),
        (control_model, reads.new_feedback_c, reads.new_below_c, reads.new_inside_c),
    ):
        split = model.p95_index
        low = model.probabilities[:split] / model.probabilities[:split].sum()
        high = model.probabilities[split + 1 :] / model.probabilities[split + 1 :].sum()
        under, within = below[row, : column + 1], inside[row, : column + 1]
        above = feedback[row, : column + 1] - under - within
        counts = np.zeros(len(model.buckets), dtype=np.int64)
        counts[:split] = rng.multinomial(under, low).sum(axis=0)
        counts[split] = within.sum()
        counts[split + 1 :] = rng.multinomial(above, high).sum(axis=0)
        arms.append(counts)
    return arms[0], arms[1], control_model


def cells_of(counts: np.ndarray, model: LatencyModel, estimate: float | None) -> ArmCells:
    present = counts > 0
    buckets = model.buckets[present]
    return ArmCells(
        np.array([lower_edge(int(b)) for b in buckets]),
        np.array([upper_edge(int(b)) for b in buckets]),
        counts[present],
        estimate,
    )


def p95_comparison(reads: StepReads, row: int, column: int, slowdown: float, seed: tuple, level):
    """The full p95 comparison of one read, on its rebuilt histograms."""
    treatment, control, model = rebuild_histograms(reads, row, column, slowdown, seed)
    return compare_quantiles(
        cells_of(treatment, model, None),
        cells_of(control, model, None),
        LATENCY_QUANTILE,
        confidence=level,
    )


@dataclass
class JudgedStep:
    """One step's reads for every rollout, and what the guardian's rules make of each."""

    scenario: Scenario
    seed: tuple
    level: float
    reads: StepReads
    proportion_regression: np.ndarray  # failure rate or coverage a regression
    p95_cleared: np.ndarray  # the p95 shortcut says: no p95 regression
    judged: np.ndarray  # every watched guardrail judged (not withheld)
    due: int  # the first read at or after the step's time (0-based)
    regression: np.ndarray  # what decides: all proportion regressions, and p95 ones up to
    # each rollout's first regression (later reads cannot change its outcome)

    def p95_regression(self, row: int, column: int) -> bool:
        """The full p95 comparison of one read (False where the shortcut cleared it)."""
        if self.p95_cleared[row, column]:
            return False
        slowdown = self.scenario.treatment_slowdown
        comparison = p95_comparison(self.reads, row, column, slowdown, self.seed, self.level)
        return comparison.decision == "regression"


def judge_step(
    rng: np.random.Generator, scenario: Scenario, share: float, rollouts: int, seed: tuple
) -> JudgedStep:
    """Every read of one step, from its start to a day past its time."""
    level = rollout_confidence(STEPS, GUARDRAILS)
    due = scenario.reads_per_step
    reads_total = due + round(MAX_WAIT_SECONDS / READ_SECONDS)
    r = draw_step(rng, scenario, share, rollouts, reads_total)
    regression = np.zeros((rollouts, reads_total), dtype=bool)
    judged = np.ones((rollouts, reads_total), dtype=bool)
    for x_t, n_t, x_c, n_c, worse_if_higher in (
        (r.failed_t, r.feedback_t, r.failed_c, r.feedback_c, True),
        (r.feedback_t, r.users_t, r.feedback_c, r.users_c, False),
    ):
        enough = np.minimum(n_t, n_c) >= MIN_USERS_WITH_FEEDBACK
        safe_t, safe_c = np.maximum(n_t, 1), np.maximum(n_c, 1)
        excluded = excludes_difference(x_t, safe_t, x_c, safe_c, 0.0, confidence=level)
        higher, lower = x_t * safe_c > x_c * safe_t, x_t * safe_c < x_c * safe_t
        regression |= enough & excluded & (higher if worse_if_higher else lower)
        judged &= enough
    cleared, bounded = p95_shortcut(r, 1.0 - level)
    enough = np.minimum(r.feedback_t, r.feedback_c) >= MIN_USERS_WITH_FEEDBACK
    judged &= enough & bounded
    cleared |= ~enough
    step = JudgedStep(scenario, seed, level, r, regression.copy(), cleared, judged, due - 1,
                      regression)  # fmt: skip
    for row in range(rollouts):
        first = np.flatnonzero(regression[row])
        stop = first[0] if first.size else reads_total
        for column in np.flatnonzero(~cleared[row, :stop]):
            if step.p95_regression(row, int(column)):
                regression[row, column] = True
                break
    return step


def step_outcomes(step: JudgedStep) -> np.ndarray:
    """Per rollout: ``"advanced"``, rolled back or held, by the first read that decides (a
    regression at any read; an advance at a judged read from the step's time on)."""
    reads_total = step.regression.shape[1]
    advance = step.judged & (np.arange(reads_total) >= step.due)[None, :]
    never = reads_total
    first_regression = np.where(step.regression.any(axis=1), step.regression.argmax(axis=1), never)
    first_advance = np.where(advance.any(axis=1), advance.argmax(axis=1), never)
    return np.where(
        first_regression <= first_advance,
        np.where(first_regression < never, ROLLED_BACK, HELD),
        "advanced",
    )


def run_rollouts(scenario: Scenario, rollouts: int, seed: int) -> dict[str, np.ndarray]:
    """Every rollout's final state and the step it ended at."""
    rng = np.random.default_rng(seed)
    state = np.full(rollouts, "running", dtype=object)
    step = np.zeros(rollouts, dtype=int)
    for index, percentage in enumerate(STEPS[:-1]):
        active = np.flatnonzero(state == "running")
        if active.size == 0:
            break
        step_seed = (seed, index)
        outcome = step_outcomes(judge_step(rng, scenario, percentage / 100, active.size, step_seed))
        step[active] = index
        state[active] = np.where(outcome == "advanced", "running", outcome)
    step[state == "running"] = len(STEPS) - 1
    state[state == "running"] = COMPLETED
    return {"state": state, "step": step}


A_A_SCENARIOS = [
    Scenario(200_000, 60, 0.0002),
    Scenario(200_000, 60, 0.01),
    Scenario(200_000, 1_440, 0.0002),
    Scenario(200_000, 1_440, 0.01),
]


def rollback_rate(scenario: Scenario, rollouts: int, seed: int) -> tuple[float, float, float]:
    """Share rolled back, with its 95 % (Wilson) interval."""
    states = run_rollouts(scenario, rollouts, seed)["state"]
    rolled_back = int((states == ROLLED_BACK).sum())
    return (rolled_back / rollouts, *wilson(rolled_back, rollouts))


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    print("## A/A guarded rollouts, 2,000 each: rolled back (95 % interval), held, completed")
    for scenario in A_A_SCENARIOS:
        result = run_rollouts(scenario, 2_000, seed=1)
        states = result["state"]
        rate = (states == ROLLED_BACK).mean()
        low, high = wilson(int((states == ROLLED_BACK).sum()), len(states))
        print(
            f"{scenario.describe()} | {rate:.4f} [{low:.4f}, {high:.4f}] | "
            f"held {(states == HELD).mean():.4f} | completed {(states == COMPLETED).mean():.4f}"
        )


if __name__ == "__main__":
    main()
