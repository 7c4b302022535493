"""The language-neutral condition cases (``tests/cases/conditions.json``) against the native path:
a flag whose SEGMENT rule names a segment with the case's condition, asked for the case's user.

The native path asks each segment whether it holds the user's identifier. Without attributes
it asks a segment with conditions through its ``__contains__``: for every case it answers as the
Python path does for the user without attributes, and for the cases that need none, what the
case says. With the case's attributes (``serve_one``'s last argument) it answers what the case
says, as the Python path does, with the Python path's frame byte for byte."""

from __future__ import annotations

import os

import pytest
from flagsight_core import RESULTS, Flag, SegmentRule, decide_one
from flagsight_core.conditions import condition_from_json
from flagsight_core.ids import EvaluationIdIssuer, environment_id_to_bytes
from flagsight_core.segments import SegmentMembership, segment_of

from api.eventlog.frames import EVALUATION_BATCH_CODE, encode_frame
from api.eventlog.schema import SOURCE_EVALUATE, EvaluationBatch
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


@pytest.mark.parametrize("case", HOLDS, ids=[c["name"] for c in HOLDS])
def test_a_case_served_natively_with_its_attributes(case: dict) -> None:
    listed, excluded = SegmentMembership.build(["listed"]), SegmentMembership.build(["excluded"])
    segment = segment_of(listed, excluded, (condition_from_json(case["condition"]),))
    segments = {"s": segment}
    ids = EvaluationIdIssuer(os.urandom(32))
    for user in (case["userIdentifier"], "listed", "excluded"):
        attributes = case["attributes"]
        outcome, rule, prefix, frame = fastpath.serve_one(
            FLAG.plan, FLAG.code_table, segments, FLAG.key, user, ids.signing_key,
            environment_id_to_bytes(ENVIRONMENT), ids.nonces, 7, "org", ENVIRONMENT, None,
            "key", SOURCE_EVALUATE, FLAG.split_rule, FLAG.split_percentage, attributes,
        )  # fmt: skip
        expected = decide_one(FLAG, user, segments, attributes)
        assert (bytes([outcome]), bytes([rule])) == expected
        result = RESULTS[outcome]
        if user == case["userIdentifier"]:
            assert (result.value, result.matched_rule_type) == answer(case)
        else:  # the lists decide: listed in, excluded out, whatever the conditions say
            assert result.value is (user == "listed")
        batch = EvaluationBatch(prefix, 7, "org", ENVIRONMENT, FLAG.key, None, "key",
                                SOURCE_EVALUATE, [user], *expected, FLAG.split_rule,
                                FLAG.split_percentage)  # fmt: skip
        assert bytes(frame) == bytes(encode_frame(EVALUATION_BATCH_CODE, batch))
