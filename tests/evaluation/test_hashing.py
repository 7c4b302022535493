"""Bucketing is exactly the contract's formula, reproducible by any client."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from flagsight_core.hashing import bucket, threshold
from hypothesis import given
from hypothesis import strategies as st

from tests.murmur3_reference import murmur3_x86_32, reference_bucket

VECTORS = json.loads((Path(__file__).parents[1] / "cases" / "bucketing.json").read_text())


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # published murmur3_x86_32 vectors, seed 0
        (b"", 0),
        (b"hello", 0x248BFA47),
        (b"The quick brown fox jumps over the lazy dog", 0x2E4FF723),
    ],
)
def test_reference_implementation_matches_published_vectors(data: bytes, expected: int) -> None:
    assert murmur3_x86_32(data, 0) == expected


@pytest.mark.parametrize("case", VECTORS, ids=lambda c: f"{c['flagKey']}:{c['userIdentifier']}")
def test_bucket_matches_golden_vectors(case: dict) -> None:
    assert bucket(case["flagKey"], case["userIdentifier"]) == case["bucket"]


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=80))
def test_bucket_matches_independent_reference(flag_key: str, user: str) -> None:
    assert bucket(flag_key, user) == reference_bucket(flag_key, user)


@pytest.mark.parametrize(
    ("percentage", "expected"),
    [(0, 0), (0.01, 1), (33.33, 3333), (50, 5000), (99.99, 9999), (100, 10000)],
)
def test_threshold_is_round_p_times_100(percentage: float, expected: int) -> None:
    assert threshold(percentage) == expected


def test_buckets_are_uniform_chi_square() -> None:
    """100k users over 100 bins of 100 buckets: chi-square below the 99.9th percentile."""
    bins = [0] * 100
    for i in range(100_000):
        bins[bucket("uniformity-check", f"user-{i}") // 100] += 1
    expected = 1000
    chi2 = sum((n - expected) ** 2 / expected for n in bins)
    assert chi2 < 148.2  # chi-square, 99 degrees of freedom, p = 0.001


def test_two_flags_bucket_independently() -> None:
    """Membership in one flag's 50 % says nothing about another's: a 2x2 table near 25 % each."""
    n = 40_000
    both = sum(
        1 for i in range(n) if bucket("flag-a", f"u{i}") < 5000 and bucket("flag-b", f"u{i}") < 5000
    )
    share = both / n
    assert abs(share - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n)


def test_a_lone_surrogate_is_bucketed_not_crashing() -> None:
    """A str with a lone surrogate (possible from non-msgspec JSON decoders) is hashed as bytes."""
    assert 0 <= bucket("flag", "\ud800") < 10_000
