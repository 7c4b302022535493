"""Simulations behind docs/statistics.md's "Metrics: conversion, count, sum, mean": false
decisions when nothing changed on skewed values, the guard's two error rates, and power with
and without the pre-exposure adjustment.

Every experiment is read after every batch of users on cumulative moments and decided the
first time its interval excludes 0, with the package's own vectorized rules
(``estimate_difference`` and ``radius`` are what ``compare_means`` applies, and
``stratified_difference`` and ``guard_ends`` what ``mean_guard`` applies; tests below check
that on sampled reads). Seeds are fixed, so a failure is a change in behaviour. The long
versions carry the ``simulation`` marker (``make simulations``); run as a module to print the
doc's tables:

    .venv/bin/python -m tests.warehouse.test_statistics_means_simulation
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from tests.pipelines.rollout_simulation import wilson
from warehouse.statistics import Decision
from warehouse.statistics.guard import SAFETY_ALPHA, Status, rollback_alpha
from warehouse.statistics.means import (
    MEAN_MIXING_SD,
    MIN_USERS_FOR_MEANS,
    MeanMoments,
    compare_means,
    estimate_difference,
    guard_ends,
    mean_guard,
    radius,
    stratified_difference,
)

ALPHA = 0.05
FALSE_DECISION_LIMIT = 0.05
Values = tuple[np.ndarray, np.ndarray, np.ndarray]  # y, d, x: one user per entry
Model = Callable[[np.random.Generator, tuple[int, ...], float], Values]


# Per-user values: each model draws (y, d, x) for users of one arm, ``lift`` scaling y -----------


def counts(rng: np.random.Generator, shape: tuple[int, ...], lift: float) -> Values:
    """Events per user, over-dispersed: a Gamma(0.5) rate per user (mean 2, most users few,
    some many), its pre-exposure count from the same rate (correlation 0.80)."""
    rate = rng.gamma(0.5, 4.0, shape)
    return rng.poisson(rate * lift).astype(float), np.ones(shape), rng.poisson(rate).astype(float)


def log_normal(rng: np.random.Generator, shape: tuple[int, ...], lift: float) -> Values:
    """A sum per user, log-normal (sigma 1: the mean 1.6 times the median, a long right tail),
    its pre-exposure value from the same user (latent correlation 0.5)."""
    user = rng.standard_normal(shape)
    pre, post = (0.5 * user + math.sqrt(0.75) * rng.standard_normal(shape) for _ in range(2))
    return lift * np.exp(3.0 + post), np.ones(shape), np.exp(3.0 + pre)


def revenue(rng: np.random.Generator, shape: tuple[int, ...], lift: float) -> Values:
    """Revenue per user, zero-inflated log-normal: a Gamma(0.3) purchase rate per user (about
    92 % of users buy nothing in the window), each buyer's basket log-normal (sigma 1.2)."""
    rate = rng.gamma(0.3, 0.3, shape)
    basket = np.exp(3.0 + 1.2 * rng.standard_normal(shape))
    bought, bought_before = rng.poisson(rate, shape), rng.poisson(rate, shape)
    return lift * bought * basket, np.ones(shape), bought_before * basket


def order_value(rng: np.random.Generator, shape: tuple[int, ...], lift: float) -> Values:
    """Kind "mean": value per order, the ratio of a user's order values to its orders (a
    Gamma(1) orders rate, mean 1.5; many users without orders), each user's orders about its
    own log-normal value; its pre-exposure value that user's mean order value (0 if none)."""
    rate = rng.gamma(1.0, 1.5, shape)
    orders, orders_before = rng.poisson(rate, shape), rng.poisson(rate, shape)
    usual = np.exp(3.0 + rng.standard_normal(shape))
    y = lift * orders * usual * np.exp(0.3 * rng.standard_normal(shape))
    x = np.where(orders_before > 0, usual * np.exp(0.3 * rng.standard_normal(shape)), 0.0)
    return y, orders.astype(float), x


def correlated_normal(rho: float) -> Model:
    """Normal values (mean 10, sd 3) whose pre-exposure value has correlation ``rho``;
    ``lift`` adds ``(lift - 1)`` standard deviations."""

    def model(rng: np.random.Generator, shape: tuple[int, ...], lift: float) -> Values:
        pre = rng.standard_normal(shape)
        post = rho * pre + math.sqrt(1.0 - rho * rho) * rng.standard_normal(shape)
        return 10.0 + 3.0 * (post + lift - 1.0), np.ones(shape), 10.0 + 3.0 * pre

    return model


KINDS: dict[str, tuple[Model, bool]] = {  # name: (model, ratio)
    "count": (counts, False),
    "sum, log-normal": (log_normal, False),
    "sum, zero-inflated log-normal": (revenue, False),
    "mean (ratio), order value": (order_value, True),
}


def batch_moments(values: Values) -> MeanMoments:
    """The moments of each batch (last axis: the batch's users), cumulated over the reads
    (the axis before it): one ``MeanMoments`` of arrays, one entry per read."""
    y, d, x = values
    sums = [a.sum(axis=-1) for a in (y, d, x, y * y, d * d, x * x, y * d, y * x, d * x)]
    n = np.full(y.shape[:-1], y.shape[-1], dtype=np.float64)
    return MeanMoments(*(np.cumsum(a, axis=-1) for a in (n, *sums)))


def monitored(
    model: Model,
    ratio: bool,
    *,
    experiments: int,
    reads: int,
    per_read: int,
    share: float,
    lift: float,
    seed: int,
) -> tuple[MeanMoments, MeanMoments]:
    """Each arm's cumulative moments, one row per experiment and one column per read;
    ``per_read`` users arrive between reads, ``share`` of them in treatment."""
    rng = np.random.default_rng(seed)
    in_treatment = max(round(per_read * share), 1)
    treatment = batch_moments(model(rng, (experiments, reads, in_treatment), lift))
    control = batch_moments(model(rng, (experiments, reads, per_read - in_treatment), 1.0))
    return treatment, control


def decided(
    arms: tuple[MeanMoments, MeanMoments],
    ratio: bool,
    *,
    adjust: bool = True,
    minimum: int = MIN_USERS_FOR_MEANS,
    mixing_sd: float = MEAN_MIXING_SD,
) -> tuple[np.ndarray, np.ndarray]:
    """Per read, whether the interval excludes 0, and the estimate's sign."""
    e = estimate_difference(*arms, ratio=ratio, adjust=adjust, minimum=minimum)
    excluded = e.readable & (np.abs(e.difference) > radius(e, ALPHA, mixing_sd))
    return excluded, np.sign(e.difference)


def a_a_rate(
    kind: str, experiments: int, seed: int, share: float = 0.5, minimum: int = MIN_USERS_FOR_MEANS
) -> float:
    """Share of A/A experiments with a decision at any of 100 reads (20,000 users in all)."""
    model, ratio = KINDS[kind]
    arms = monitored(model, ratio, experiments=experiments, reads=100, per_read=200,
                     share=share, lift=1.0, seed=seed)  # fmt: skip
    return float(decided(arms, ratio, minimum=minimum)[0].any(axis=1).mean())


def chunked_a_a(kind: str, experiments: int, seed: int, **kwargs) -> tuple[int, int]:
    """``a_a_rate``'s decided experiments, 250 experiments at a time (memory)."""
    hits = 0
    for chunk in range(experiments // 250):
        hits += round(250 * a_a_rate(kind, 250, seed + chunk, **kwargs))
    return hits, experiments


@pytest.mark.parametrize("share", [0.5, 0.1], ids=["50%", "10%"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_a_false_decisions_read_100_times_at_most_5_percent(kind: str, share: float) -> None:
    assert a_a_rate(kind, 200, seed=51, share=share) <= FALSE_DECISION_LIMIT


@pytest.mark.simulation
@pytest.mark.parametrize("share", [0.5, 0.1], ids=["50%", "10%"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_two_thousand_a_a_experiments_at_most_5_percent(kind: str, share: float) -> None:
    hits, n = chunked_a_a(kind, 2_000, seed=1_000, share=share)
    upper = wilson(hits, n)[1]
    assert upper <= FALSE_DECISION_LIMIT, f"{hits / n:.2%}, upper bound {upper:.2%}"


def test_the_simulated_rule_is_the_rule_compare_means_applies() -> None:
    rng = np.random.default_rng(52)
    outcomes = set()
    for kind, (model, ratio) in KINDS.items():
        arms = monitored(model, ratio, experiments=20, reads=30, per_read=100, share=0.5,
                         lift=1.4, seed=53)  # fmt: skip
        excluded, _ = decided(arms, ratio)
        for row, read in zip(rng.integers(0, 20, 12), rng.integers(0, 30, 12), strict=True):
            t, c = (MeanMoments(*(float(a[row, read]) for a in vars(m).values())) for m in arms)
            answer = compare_means(t, c, ratio=ratio, higher_is_better=True)
            shown = answer.decision in (Decision.IMPROVEMENT, Decision.REGRESSION)
            assert shown == bool(excluded[row, read]), kind
            outcomes.add(shown)
    assert outcomes == {True, False}  # the sample exercises both


# Power, with and without the pre-exposure adjustment ----------------------------------------

POWER_READS, POWER_PER_READ = 60, 100  # up to 3,000 users per arm, read every 50 per arm


def detection_users(rho: float, effect: float, adjust: bool, experiments: int, seed: int):
    """Users per arm at the first read that shows the improvement (inf: never), and the
    variance reduction measured at the last read."""
    model = correlated_normal(rho)
    arms = monitored(model, False, experiments=experiments, reads=POWER_READS,
                     per_read=POWER_PER_READ, share=0.5, lift=1.0 + effect, seed=seed)  # fmt: skip
    excluded, sign = decided(arms, False, adjust=adjust)
    shown = excluded & (sign > 0)
    first = np.where(shown.any(axis=1), shown.argmax(axis=1) + 1.0, np.inf)
    adjusted = estimate_difference(*arms, ratio=False)
    plain = estimate_difference(*arms, ratio=False, adjust=False)
    narrowing = 1.0 - radius(adjusted, ALPHA)[:, -1] / radius(plain, ALPHA)[:, -1]
    return first * POWER_PER_READ / 2, float(narrowing.mean())


@pytest.mark.parametrize("rho", [0.5, 0.7])
def test_the_adjustment_buys_power_and_narrows_as_the_correlation_says(rho: float) -> None:
    plain, _ = detection_users(rho, 0.1, False, 300, seed=61)
    adjusted, narrowing = detection_users(rho, 0.1, True, 300, seed=61)
    assert np.mean(adjusted <= 1_500) >= np.mean(plain <= 1_500) + 0.15
    assert abs(narrowing - (1.0 - math.sqrt(1.0 - rho * rho))) < 0.02


# The guard of a guarded rollout --------------------------------------------------------------

GUARD_STEPS = (0.05, 0.25, 0.5)  # treatment's share at each step before 100 %
GUARD_LEVELS = (1.0, 1.5, 0.8)  # each step's metric level: a drift between steps (day, night)
GUARD_READS, GUARD_PER_READ = 24, 400  # per step: 9,600 users a step


@dataclass(frozen=True)
class GuardRun:
    """Per read, the guard's two one-sided bounds, oriented worse-is-higher."""

    low: np.ndarray
    high: np.ndarray


def guarded(
    kind: str, regression: float, tolerance: float, experiments: int, seed: int, level: float
) -> GuardRun:
    """Rollouts through ``GUARD_STEPS``, the metric's per-user values scaled by the step's
    level in both arms, treatment's by ``1 + regression`` on the worse side (lower for the
    sums, whose ``better`` is higher); the evidence kept over the steps."""
    model, ratio = KINDS[kind]
    rng = np.random.default_rng(seed)
    sign = -1.0  # the sums' and ratios' worse side: treatment lower
    per_step = []
    for share, drift in zip(GUARD_STEPS, GUARD_LEVELS, strict=True):
        in_treatment = round(GUARD_PER_READ * share)
        shape_t = (experiments, GUARD_READS, in_treatment)
        shape_c = (experiments, GUARD_READS, GUARD_PER_READ - in_treatment)
        y, d, x = model(rng, shape_t, 1.0 + sign * regression)
        treatment = batch_moments((drift * y, d, drift * x))
        y, d, x = model(rng, shape_c, 1.0)
        control = batch_moments((drift * y, d, drift * x))
        per_step.append((treatment, control))
    lows, highs = [], []
    for k in range(len(GUARD_STEPS)):
        for read in range(GUARD_READS):
            arms = []
            for arm in (0, 1):
                columns = [s[arm] for s in per_step[: k + 1]]
                fields = vars(columns[0]).keys()
                arms.append(MeanMoments(*(
                    np.stack([getattr(c, f)[:, -1] for c in columns[:-1]]
                             + [getattr(columns[-1], f)[:, read]], axis=-1)
                    for f in fields
                )))  # fmt: skip
            estimate, information = stratified_difference(*arms, ratio=ratio)
            low, high = guard_ends(sign * estimate, information, tolerance,
                                   rollback_level=level)  # fmt: skip
            lows.append(low)
            highs.append(high)
    return GuardRun(np.stack(lows, axis=1), np.stack(highs, axis=1))


GUARD_KINDS = {"count": 0.10, "sum, log-normal": 0.05, "mean (ratio), order value": 0.08}
"""Each guarded metric's tolerance, as a share of its control mean (the regression tested)."""


def control_mean(kind: str) -> float:
    model, ratio = KINDS[kind]
    y, d, _ = model(np.random.default_rng(0), (2_000_000,), 1.0)
    return float(y.sum() / d.sum()) if ratio else float(y.mean())


def guard_rates(kind: str, experiments: int, seed: int, level: float) -> dict[str, float]:
    """Healthy: rolled back at any read; at the tolerance: rolled back, and shown safe at any
    read (what reaching 100 % needs)."""
    share = GUARD_KINDS[kind]
    tolerance = share * control_mean(kind)
    healthy = guarded(kind, 0.0, tolerance, experiments, seed, level)
    regressed = guarded(kind, share, tolerance, experiments, seed + 1, level)
    return {
        "healthy rolled back": float((healthy.low > 0).any(axis=1).mean()),
        "healthy shown safe": float((healthy.high < tolerance).any(axis=1).mean()),
        "at tolerance rolled back": float((regressed.low > 0).any(axis=1).mean()),
        "at tolerance shown safe": float((regressed.high < tolerance).any(axis=1).mean()),
    }


@pytest.mark.parametrize("kind", list(GUARD_KINDS))
def test_the_guard_rolls_back_healthy_rollouts_at_most_at_its_level(kind: str) -> None:
    """At a single guardrail's level (5 %), read 72 times over three drifting steps; a
    regression of the tolerance is never shown safe beyond the safety level."""
    rates = guard_rates(kind, 200, seed=71, level=ALPHA)
    assert rates["healthy rolled back"] <= ALPHA
    assert rates["at tolerance shown safe"] <= SAFETY_ALPHA
    assert rates["at tolerance rolled back"] >= 0.5


@pytest.mark.simulation
@pytest.mark.parametrize("kind", list(GUARD_KINDS))
def test_a_thousand_guarded_rollouts_keep_both_promises(kind: str) -> None:
    rates = guard_rates(kind, 1_000, seed=72, level=ALPHA)
    for key in ("healthy rolled back", "at tolerance shown safe"):
        upper = wilson(round(rates[key] * 1_000), 1_000)[1]
        assert upper <= ALPHA, (key, rates)


def test_the_guard_read_in_the_simulation_is_mean_guard() -> None:
    """The simulation's bounds at the last read are ``mean_guard``'s, step by step."""
    model, ratio = KINDS["count"]
    rng = np.random.default_rng(73)
    strata = [
        tuple(MeanMoments.of(*model(rng, (round(2_000 * s),), 1.1)) for s in (share, 1 - share))
        for share in GUARD_STEPS
    ]
    bound = mean_guard(strata, 0.2, higher_is_worse=True, ratio=False, rollback_level=ALPHA,
                       current_share=0.5)  # fmt: skip
    arms = [MeanMoments(*(np.array([vars(pair[i])[f] for pair in strata]) for f in vars(strata[0][0])))
            for i in (0, 1)]  # fmt: skip
    estimate, information = stratified_difference(*arms, ratio=ratio)
    low, high = guard_ends(estimate, information, 0.2, rollback_level=ALPHA)
    assert bound.ci == pytest.approx((float(low), float(high)))
    assert bound.status is (Status.REGRESSION if low > 0 else Status.SAFE if high < 0.2 else
                            Status.UNDECIDED)  # fmt: skip


# The doc's tables --------------------------------------------------------------------------


def users_at(first: np.ndarray, power: float) -> float:
    """Users per arm by which ``power`` of the experiments decided (inf: not within reach)."""
    return float(np.sort(first)[math.ceil(power * first.size) - 1])


def print_a_a() -> None:
    print("## A/A: decided at any of 100 reads, 20,000 users; 2,000 experiments a cell")
    for kind in KINDS:
        for share in (0.5, 0.1):
            hits, n = chunked_a_a(kind, 2_000, seed=1_000, share=share)
            low, high = wilson(hits, n)
            print(f"{kind} | {share:.0%} | {hits / n:.2%} [{low:.2%}, {high:.2%}]")


def print_minimum_study() -> None:
    print("## A/A by minimum users per arm, 10 % treatment; carrying gate on / off (1,000 each)")
    import warehouse.statistics.means as means

    gate = means.MIN_CARRYING_USERS
    for kind in KINDS:
        row = []
        for minimum in (100, 200, 500, 1_000):
            rates = []
            for carrying in (gate, 0.0):
                means.MIN_CARRYING_USERS = carrying
                hits, n = chunked_a_a(kind, 1_000, seed=2_000, share=0.1, minimum=minimum)
                rates.append(f"{hits / n:.1%}")
            means.MIN_CARRYING_USERS = gate
            row.append(f"{minimum}: {' / '.join(rates)}")
        print(kind, "|", " | ".join(row))


def print_power() -> None:
    print("## Power: +0.1 sd, normal values, 50/50, read every 50 users per arm; 2,000 exp.")
    for rho in (0.5, 0.7):
        for adjust in (False, True):
            first = np.concatenate([detection_users(rho, 0.1, adjust, 500, seed=3_000 + c)[0]
                                    for c in range(4)])  # fmt: skip
            _, narrowing = detection_users(rho, 0.1, True, 500, seed=3_000)
            shares = [users_at(first, p) for p in (0.5, 0.8, 0.95)]
            print(f"rho {rho} | adjusted {adjust} | 50/80/95 %: {shares} | "
                  f"by 1,500 per arm {np.mean(first <= 1_500):.1%} | narrowing {narrowing:.3f}")  # fmt: skip


def print_mixing_study() -> None:
    print("## Users per arm for 80 % power, +0.1 sd (no adjustment), by mixing sd; 1,000 exp.")
    arms = monitored(correlated_normal(0.0), False, experiments=1_000, reads=120, per_read=100,
                     share=0.5, lift=1.1, seed=4_000)  # fmt: skip
    for mixing_sd in (0.025, 0.05, 0.1, 0.2, 0.4):
        excluded, sign = decided(arms, False, adjust=False, mixing_sd=mixing_sd)
        shown = excluded & (sign > 0)
        first = np.where(shown.any(axis=1), shown.argmax(axis=1) + 1.0, np.inf) * 50
        print(f"{mixing_sd}: {users_at(first, 0.8):.0f}")


def print_guard() -> None:
    print("## Guard: steps 5/25/50 % (levels x1, x1.5, x0.8), 24 reads of 400 users each;")
    print("## 1,000 rollouts; rollback level 5 % and 1.67 % (three guardrails)")
    for kind in GUARD_KINDS:
        for level in (ALPHA, rollback_alpha(3)):
            rates = guard_rates(kind, 1_000, seed=72, level=level)
            print(kind, f"tolerance {GUARD_KINDS[kind]:.0%} of the mean, level {level:.4f} |",
                  " | ".join(f"{k} {v:.1%}" for k, v in rates.items()))  # fmt: skip


TABLES = {
    "a_a": print_a_a,
    "minimum": print_minimum_study,
    "power": print_power,
    "mixing": print_mixing_study,
    "guard": print_guard,
}


def main(names: list[str]) -> None:
    """Every table, or those named (``a_a``, ``minimum``, ``power``, ``mixing``, ``guard``)."""
    for name in names or TABLES:
        TABLES[name]()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
