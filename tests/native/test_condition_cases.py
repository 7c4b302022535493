"""The language-neutral condition cases (``tests/cases/conditions.json``) against the native path:
a flag whose SEGMENT rule names a segment with the case's condition, asked for the case's user.

The native path serves only requests without attributes (``EvaluationServer.serve_one`` hands
on every request with some), and asks a segment with conditions through its ``__contains__``:
for every case it answers as the Python path does for the user without attributes, and for
the cases that need none, what the case says."""

from __future__ import annotations

import os

import pytest
from flagsight_core import RESULTS, Flag, SegmentRule, decide_one
from flagsight_core.conditions import condition_from_json
from flagsight_core.ids import EvaluationIdIssuer, environment_id_to_bytes
from flagsight_core.segments import SegmentMembership, segment_of

from api.eventlog.schema import SOURCE_EVALUATE
from api.native import fastpath
from tests.support.condition_cases import HOLDS, answer

pytestmark = pytest.mark.skipif(
    fastpath is None or os.environ.get("FLAGSIGHT_NATIVE") == "0",
    reason="the native path is switched off",
)
ENVIRONMENT = "env_00ff10ee20dd30cc"
FLAG = Flag("f", True, False, (SegmentRule("s"),))


@pytest.mark.parametrize("case", HOLDS, ids=[c["name"] for c in HOLDS])
def test_a_case_served_natively(case: dict) -> None:
    segment = segment_of(
        SegmentMembership.build(()), None, (condition_from_json(case["condition"]),)
    )
    segments = {"s": segment}
    user = case["userIdentifier"]
    ids = EvaluationIdIssuer(os.urandom(32))
    outcome, rule, _prefix, _frame = fastpath.serve_one(
        FLAG.plan, FLAG.code_table, segments, FLAG.key, user, ids.signing_key,
        environment_id_to_bytes(ENVIRONMENT), ids.nonces, 0, "org", ENVIRONMENT, None, "key",
        SOURCE_EVALUATE, FLAG.split_rule, FLAG.split_percentage,
    )  # fmt: skip
    assert (bytes([outcome]), bytes([rule])) == decide_one(FLAG, user, segments)
    if not case["attributes"]:
        result = RESULTS[outcome]
        assert (result.value, result.matched_rule_type) == answer(case)
