"""The lifecycle stage's decision (contract section 14, docs/lifecycle.md): its precedence
over every combination of the conditions, its reasons, its edges, and the document."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from warehouse.lifecycle import (
    EMPTY_EVIDENCE,
    LifecycleEvidence,
    LifecycleThresholds,
    format_time,
    lifecycle_document,
    lifecycle_stage,
    parse_time,
)

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
DAY = 86_400.0
T = LifecycleThresholds(launched_days=14, stale_days=30, archived_evaluated_hours=24)


def evidence(**fields) -> LifecycleEvidence:
    base = LifecycleEvidence(
        last_evaluated_at=NOW - 60,
        evaluations_30d=10,
        served_true_percent_30d=50.0,
        launched_at=None,
        applications=("python/1.0",),
        archived_but_evaluated=False,
    )
    return replace(base, **fields)


def stage(kind="temporary", archived=False, expires_at=None, now=NOW, thresholds=T, **fields):
    return lifecycle_stage(
        kind=kind,
        archived=archived,
        expires_at=expires_at,
        evidence=evidence(**fields),
        now=now,
        thresholds=thresholds,
    )


# Every combination of the conditions, against the precedence written out as a table.
EVALUATED = {  # how the flag was evaluated: last_evaluated_at
    "never": None,
    "recently": NOW - 3600,
    "long ago": NOW - 40 * DAY,
}
LAUNCHED_AT = {
    "not launched": None,
    "launched 3 days": NOW - 3 * DAY,
    "launched 20 days": NOW - 20 * DAY,
    "launched 40 days": NOW - 40 * DAY,
}
EXPIRES = {"no expiry": None, "expires later": NOW + DAY, "expired": NOW - DAY}


def expected(kind, archived, abe, evaluated, launched, expires) -> tuple[str, tuple[str, ...]]:
    if archived:
        return "archived", ("archived", "archived-but-evaluated") if abe else ("archived",)
    if kind == "permanent":
        return "permanent", ("kind-permanent",)
    stale = []
    if expires == "expired":
        stale.append("expired")
    if evaluated == "long ago":
        stale.append("not-evaluated-30d")
    if launched == "launched 40 days":
        stale.append("launched-30d")
    if stale:
        return "stale", tuple(stale)
    if evaluated == "never":
        return "new", ("never-evaluated",)
    if launched in ("launched 20 days",):
        return "launched", ("one-value-14d",)
    return "active", ("evaluated-30d",)


@pytest.mark.parametrize(
    ("kind", "archived", "abe", "evaluated", "launched", "expires"),
    list(
        itertools.product(
            ("temporary", "permanent"),
            (False, True),
            (False, True),
            EVALUATED,
            LAUNCHED_AT,
            EXPIRES,
        )
    ),
)
def test_precedence_over_every_combination(kind, archived, abe, evaluated, launched, expires):
    got = stage(
        kind=kind,
        archived=archived,
        expires_at=EXPIRES[expires],
        last_evaluated_at=EVALUATED[evaluated],
        launched_at=LAUNCHED_AT[launched],
        archived_but_evaluated=abe,
    )
    assert got == expected(kind, archived, abe, evaluated, launched, expires)


def test_a_flag_never_evaluated_and_past_its_expiry_is_stale():
    assert stage(last_evaluated_at=None, expires_at="2020-01-01T00:00:00Z") == (
        "stale",
        ("expired",),
    )


def test_a_permanent_flag_is_permanent_whatever_its_expiry_and_evidence():
    assert stage(
        kind="permanent",
        expires_at=NOW - 365 * DAY,
        last_evaluated_at=NOW - 400 * DAY,
        launched_at=NOW - 400 * DAY,
    ) == ("permanent", ("kind-permanent",))


def test_an_archived_flag_is_archived_even_when_permanent_and_expired():
    assert stage(kind="permanent", archived=True, expires_at=NOW - DAY) == (
        "archived",
        ("archived",),
    )


def test_launched_by_a_completed_rollout_says_so():
    launched = stage(launched_at=NOW - 15 * DAY, launched_by="rollout-completed")
    assert launched == ("launched", ("rollout-completed",))
    one_value = stage(launched_at=NOW - 15 * DAY, launched_by="one-value-14d")
    assert one_value == ("launched", ("one-value-14d",))


def test_the_thresholds_are_inclusive_at_their_edges():
    assert stage(launched_at=NOW - 14 * DAY)[0] == "launched"
    assert stage(launched_at=NOW - 14 * DAY + 1)[0] == "active"
    assert stage(launched_at=NOW - 30 * DAY) == ("stale", ("launched-30d",))
    assert stage(launched_at=NOW - 30 * DAY + 1)[0] == "launched"
    assert stage(last_evaluated_at=NOW - 30 * DAY) == ("stale", ("not-evaluated-30d",))
    assert stage(last_evaluated_at=NOW - 30 * DAY + 1)[0] == "active"
    assert stage(expires_at=NOW) == ("stale", ("expired",))
    assert stage(expires_at=NOW + 0.001)[0] == "active"


def test_thresholds_are_the_settings_and_may_be_fractions_of_a_day():
    seconds = LifecycleThresholds(launched_days=0.0001, stale_days=0.0002)  # 8.64 s, 17.28 s
    recent = NOW - 1
    assert stage(thresholds=seconds, last_evaluated_at=recent, launched_at=NOW - 9)[0] == "launched"
    assert stage(thresholds=seconds, last_evaluated_at=recent, launched_at=NOW - 8)[0] == "active"
    assert stage(thresholds=seconds, last_evaluated_at=NOW - 18)[0] == "stale"
    assert stage(thresholds=seconds, last_evaluated_at=NOW - 17)[0] == "active"


def test_several_stale_reasons_are_all_given_in_order():
    assert stage(
        expires_at="2026-12-01T00:00:00Z",
        last_evaluated_at=NOW - 31 * DAY,
        launched_at=NOW - 50 * DAY,
    ) == ("stale", ("expired", "not-evaluated-30d", "launched-30d"))


def test_before_the_first_aggregation_a_flag_is_new_with_empty_evidence():
    got = lifecycle_stage(
        kind="temporary", archived=False, expires_at=None, evidence=EMPTY_EVIDENCE, now=NOW
    )
    assert got == ("new", ("never-evaluated",))
    assert lifecycle_document(*got, EMPTY_EVIDENCE) == {
        "stage": "new",
        "reasons": ["never-evaluated"],
        "lastEvaluatedAt": None,
        "evaluations30d": 0,
        "servedTruePercent30d": None,
        "launchedAt": None,
        "applications": [],
        "codeReferences": {"count": 0, "scannedAt": None, "repository": None},
        "archivedButEvaluated": False,
    }


def test_the_document_has_the_contracts_shape():
    seen = evidence(
        last_evaluated_at=parse_time("2027-01-15T07:59:00.123Z"),
        evaluations_30d=1234,
        served_true_percent_30d=99.5,
        launched_at=parse_time("2027-01-01T00:00:00Z"),
        applications=("go/2.1", "python/1.0"),
        archived_but_evaluated=True,
    )
    references = {"count": 3, "scannedAt": "2027-01-14T10:00:00.000Z", "repository": "acme/app"}
    assert lifecycle_document(
        "archived", ("archived", "archived-but-evaluated"), seen, references
    ) == {
        "stage": "archived",
        "reasons": ["archived", "archived-but-evaluated"],
        "lastEvaluatedAt": "2027-01-15T07:59:00.123Z",
        "evaluations30d": 1234,
        "servedTruePercent30d": 99.5,
        "launchedAt": "2027-01-01T00:00:00.000Z",
        "applications": ["go/2.1", "python/1.0"],
        "codeReferences": references,
        "archivedButEvaluated": True,
    }


def test_evidence_reads_back_from_a_warehouse_row():
    row = {
        "last_evaluated_at": NOW - 5,
        "evaluations_30d": 7,
        "served_true_percent_30d": 100.0,
        "launched_at": NOW - 20 * DAY,
        "launched_by": "one-value-14d",
        "applications": ["python/1.0"],
        "archived_but_evaluated": False,
    }
    got = LifecycleEvidence.from_row(row)
    assert got.applications == ("python/1.0",) and got.launched_at == NOW - 20 * DAY
    assert lifecycle_stage(
        kind="temporary", archived=False, expires_at=None, evidence=got, now=NOW
    ) == ("launched", ("one-value-14d",))


def test_times_parse_and_format_in_utc():
    assert parse_time("2026-12-01T00:00:00Z") == parse_time("2026-12-01T01:00:00+01:00")
    assert parse_time("2026-12-01T00:00:00") == parse_time("2026-12-01T00:00:00Z")
    assert format_time(parse_time("2026-12-01T00:00:00Z")) == "2026-12-01T00:00:00.000Z"
    assert parse_time(None) is None and format_time(None) is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_thresholds_must_be_positive(bad):
    with pytest.raises(ValueError, match="positive"):
        LifecycleThresholds(stale_days=bad)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        stage(kind="forever")
