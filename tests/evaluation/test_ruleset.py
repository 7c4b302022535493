"""The ruleset a local SDK decides from (contract 11): what the service writes, the SDK reads
back into the same flags and segments, so its answers are the service's."""

from __future__ import annotations

import json

import pytest
from flagsight_core import RESULTS, Flag, decide_one, rule_from_json
from flagsight_core.ruleset import InvalidRuleset, Ruleset, ruleset_from_json, ruleset_to_json
from flagsight_core.segments import SegmentMembership, identifier_hash

from tests.evaluation.test_engine import CASES

SALT = bytes(range(16))


def _through_the_wire(case: dict) -> Ruleset:
    """The case's flag as the service serves it, read as the SDK reads it."""
    flags = {}
    if case["flag"] is not None:
        raw = case["flag"]
        rules = tuple(rule_from_json(r) for r in raw["rules"])
        flags[raw["key"]] = Flag(raw["key"], raw["enabled"], raw["archived"], rules)
    segments = {k: SegmentMembership.build(v) for k, v in case["segments"].items()}
    served = ruleset_to_json(Ruleset("env_00112233aabbccdd", 7, flags, segments, SALT))
    return ruleset_from_json(json.loads(json.dumps(served)))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_golden_case_decided_from_the_served_ruleset(case: dict) -> None:
    ruleset = _through_the_wire(case)
    key = case["flag"]["key"] if case["flag"] else "f"
    codes, _rules = decide_one(ruleset.flags.get(key), case["userIdentifier"], ruleset.segments)
    result = RESULTS[codes[0]]
    assert {
        "value": result.value,
        "matchedRuleType": result.matched_rule_type,
        "error": result.error_type,
    } == case["expected"]


def test_only_the_segments_a_flag_names_are_served_as_hashes() -> None:
    """An application gets membership tables, never identifiers, and only what it needs."""
    rules = (rule_from_json({"type": "SEGMENT", "segment": "beta"}),)
    flags = {"f": Flag("f", True, False, rules)}
    segments = {
        "beta": SegmentMembership.build(["alice@example.com", "bob"]),
        "internal": SegmentMembership.build(["carol"]),
    }
    served = ruleset_to_json(Ruleset("env_00112233aabbccdd", 3, flags, segments, SALT))
    assert list(served["segments"]) == ["beta"]
    assert served["segments"]["beta"]["members"] == 2
    assert "alice" not in json.dumps(served)
    read = ruleset_from_json(served)
    assert "alice@example.com" in read.segments["beta"] and "carol" not in read.segments["beta"]


def test_each_environment_ships_its_own_salted_tables() -> None:
    """A table of guessed identifiers' hashes is no use against a shipped table, nor one
    environment's shipped table against another's (docs/operations.md, "Security notes")."""
    rules = (rule_from_json({"type": "SEGMENT", "segment": "beta"}),)
    flags = {"f": Flag("f", True, False, rules)}
    members = [f"user-{i}@example.com" for i in range(1_000)]
    segments = {"beta": SegmentMembership.build(members)}
    tables = []
    for salt in (SALT, bytes(16)):
        served = ruleset_to_json(Ruleset("env_00112233aabbccdd", 3, flags, segments, salt))
        read = ruleset_from_json(json.loads(json.dumps(served)))
        assert all(member in read.segments["beta"] for member in members)
        assert "user-1000@example.com" not in read.segments["beta"]
        assert list(read.segments["beta"].contains_many(members[:3] + ["x"])) == [1, 1, 1, 0]
        tables.append(set(read.segments["beta"].keys().tolist()))
    unsalted = {identifier_hash(member) for member in members}
    assert not tables[0] & unsalted and not tables[1] & unsalted
    assert not tables[0] & tables[1]


@pytest.mark.parametrize(
    "document",
    [
        None,
        {"format": 1, "environmentId": "e", "version": 1, "flags": [], "segments": {}},
        {"format": 2, "environmentId": "e", "version": 1, "flags": [], "segments": {}},
        {"format": 2, "environmentId": "e", "version": 1, "segmentSalt": "AAAA", "flags": [],
         "segments": {}},
        {"format": 2, "environmentId": "e", "version": 1, "segmentSalt": "AAAAAAAAAAAAAAAAAAAAAA==",
         "flags": [{"key": "f"}], "segments": {}},
        {"format": 2, "environmentId": "e", "version": 1, "segmentSalt": "AAAAAAAAAAAAAAAAAAAAAA==",
         "flags": [], "segments": {"s": {"table": "%%"}}},
        {"format": 2, "environmentId": "e", "version": 1, "segmentSalt": "AAAAAAAAAAAAAAAAAAAAAA==",
         "segments": {},
         "flags": [{"key": "f", "enabled": True, "archived": False, "rules": [{"type": "GEO"}]}]},
    ],
)  # fmt: skip
def test_a_ruleset_the_core_cannot_decide_from_is_refused_whole(document: object) -> None:
    with pytest.raises(InvalidRuleset):
        ruleset_from_json(document)
