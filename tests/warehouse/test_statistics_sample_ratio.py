"""Sample-ratio check: the sequential p-value against the rule's split."""

from __future__ import annotations

import math

import pytest

from warehouse.statistics import SRM_P_VALUE_THRESHOLD, SampleRatio, sample_ratio


def test_53_47_among_10000_users_is_a_mismatch() -> None:
    result = sample_ratio(5_300, 4_700, 0.5)
    assert result.mismatch
    assert result.p_value < SRM_P_VALUE_THRESHOLD
    assert result.observed == pytest.approx(0.53)
    assert result.expected == 0.5


def test_50_2_49_8_among_10000_users_is_not_a_mismatch() -> None:
    result = sample_ratio(5_020, 4_980, 0.5)
    assert not result.mismatch
    assert result.p_value >= SRM_P_VALUE_THRESHOLD


def test_unequal_split_is_judged_against_its_own_share() -> None:
    assert not sample_ratio(1_000, 9_000, 0.1).mismatch
    assert sample_ratio(1_200, 8_800, 0.1).mismatch
    assert sample_ratio(5_000, 5_000, 0.1).mismatch


def test_a_small_drift_is_found_once_there_are_enough_users() -> None:
    assert not sample_ratio(505, 495, 0.5).mismatch
    assert sample_ratio(50_500 + 600, 49_500 - 600, 0.5).mismatch


def test_p_value_is_not_smaller_than_a_single_look_chi_square_at_a_balanced_split() -> None:
    """Always valid costs evidence: at a 50/50 split and counts like these the sequential p is
    the larger one (not everywhere: docs/statistics.md)."""
    for treatment in (5_100, 5_200, 5_300, 5_500):
        control = 10_000 - treatment
        z = (treatment - 5_000) / math.sqrt(10_000 * 0.25)
        chi_square_p = math.erfc(abs(z) / math.sqrt(2))
        assert sample_ratio(treatment, control, 0.5).p_value > chi_square_p


def test_no_users_yet_is_no_mismatch_and_no_p_value() -> None:
    assert sample_ratio(0, 0, 0.5) == SampleRatio(0.5, None, None, False)


@pytest.mark.parametrize(
    ("treatment", "control", "share", "mismatch", "p_value"),
    [
        (0, 1_000, 0.0, False, 1.0),  # percentage 0: nobody in treatment, as expected
        (1, 1_000, 0.0, True, 0.0),  # percentage 0 yet a treated user: impossible
        (1_000, 0, 1.0, False, 1.0),  # percentage 100
        (1_000, 3, 1.0, True, 0.0),
    ],
)
def test_percentage_0_and_100(treatment, control, share, mismatch, p_value) -> None:
    result = sample_ratio(treatment, control, share)
    assert (result.mismatch, result.p_value) == (mismatch, p_value)


@pytest.mark.parametrize(("treatment", "control", "share"), [(-1, 5, 0.5), (5, 5, 1.5)])
def test_impossible_inputs_are_rejected(treatment, control, share) -> None:
    with pytest.raises(ValueError):
        sample_ratio(treatment, control, share)
