"""Evaluation ids: unique, URL-safe, at most 64 characters, verifiable without a lookup."""

from __future__ import annotations

import re

import pytest
from flagsight_core.ids import EvaluationIdIssuer, InvalidEvaluationId

ENV = "env_0123456789abcdef"
OTHER_ENV = "env_fedcba9876543210"


@pytest.fixture
def issuer() -> EvaluationIdIssuer:
    return EvaluationIdIssuer(b"s" * 32)


def test_ids_are_url_safe_short_and_unique(issuer: EvaluationIdIssuer) -> None:
    ids = [issuer.issue(ENV) for _ in range(2000)] + issuer.issue_many(ENV, 10_000)
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)


def test_verify_tells_the_environment(issuer: EvaluationIdIssuer) -> None:
    assert issuer.verify(issuer.issue(ENV)).environment_id == ENV
    assert issuer.verify(issuer.issue_many(OTHER_ENV, 3)[2]).environment_id == OTHER_ENV


def test_a_grants_ids_verify_and_tell_the_grants_time(issuer: EvaluationIdIssuer) -> None:
    prefix = issuer.issue_grant_prefix(ENV, 300, 1_800_000_123.9)
    info = issuer.verify(prefix + "012b")
    assert (info.environment_id, info.count, info.granted_at) == (ENV, 300, 1_800_000_123)
    assert issuer.verify(issuer.issue(ENV)).granted_at is None  # an evaluate answer's
    assert issuer.issue_grant_prefix(ENV, 300, 1_800_000_123) != prefix
    with pytest.raises(InvalidEvaluationId):
        issuer.verify(prefix + "012c")  # past the grant


def test_another_deployments_ids_are_refused(issuer: EvaluationIdIssuer) -> None:
    foreign = EvaluationIdIssuer(b"x" * 32).issue(ENV)
    with pytest.raises(InvalidEvaluationId):
        issuer.verify(foreign)


def test_an_index_past_the_signed_count_is_refused(issuer: EvaluationIdIssuer) -> None:
    last = issuer.issue_many(ENV, 3)[2]
    with pytest.raises(InvalidEvaluationId):
        issuer.verify(last[:-4] + "0003")


@pytest.mark.parametrize("bad", ["", "abc", None, 42, "A" * 46, "!" * 46])
def test_malformed_ids_are_refused(issuer: EvaluationIdIssuer, bad: object) -> None:
    with pytest.raises(InvalidEvaluationId):
        issuer.verify(bad)


def test_a_tampered_environment_is_refused(issuer: EvaluationIdIssuer) -> None:
    genuine = issuer.issue(ENV)
    tampered = genuine[:3] + ("A" if genuine[3] != "A" else "B") + genuine[4:]
    with pytest.raises(InvalidEvaluationId):
        issuer.verify(tampered)


def test_only_the_issued_spelling_of_an_id_is_accepted(issuer: EvaluationIdIssuer) -> None:
    """Base64 has other spellings of the same bytes: the last character's 4 spare bits, "+/"
    for "-_", stray characters a lenient decoder skips. Feedback under one of them would never
    meet its evaluation in the warehouse, so each is refused."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    ids = [issuer.issue(ENV) for _ in range(200)]
    spellings = 0
    for genuine in ids:
        for char in alphabet:
            other = genuine[:41] + char + genuine[42:]
            if other == genuine:
                continue
            spellings += 1
            with pytest.raises(InvalidEvaluationId):
                issuer.verify(other)
        with_standard_alphabet = genuine[:42].translate(str.maketrans("-_", "+/")) + genuine[42:]
        if with_standard_alphabet != genuine:
            with pytest.raises(InvalidEvaluationId):
                issuer.verify(with_standard_alphabet)
        assert issuer.verify(genuine).environment_id == ENV
    assert spellings == 200 * 63
