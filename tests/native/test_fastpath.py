"""The native fast path against the Python path it replaces: for the same inputs, the same
outcome and rule, the same signed id prefix, the same frame bytes, and the same answers and
events through ``EvaluationServer.serve_one``."""

from __future__ import annotations

import itertools
import os
import random
import string

import numpy as np
import pytest
from flagsight_core import Flag, decide_one, rule_from_json
from flagsight_core.conditions import conditions_from_json
from flagsight_core.hashing import batch_hashing, bucket, buckets, use_batch_hashing
from flagsight_core.ids import EvaluationIdIssuer, environment_id_to_bytes
from flagsight_core.segments import DefinedSegment, SegmentMembership, identifier_hash, segment_of
from hypothesis import given
from hypothesis import strategies as st

from api.eventlog.frames import EVALUATION_BATCH_CODE, decode_evaluation_frame, encode_frame
from api.eventlog.schema import SOURCE_EVALUATE, SOURCE_OFREP, EvaluationBatch
from api.native import fastpath
from api.serving.evaluations import EvaluationServer
from tests.api.test_serving import RULES, Recording
from tests.support.admin import Admin

pytestmark = pytest.mark.skipif(
    os.environ.get("FLAGSIGHT_NATIVE") == "0", reason="the native path is switched off"
)

ENVIRONMENT = "env_00ff10ee20dd30cc"
ALPHABETS = [
    string.ascii_letters + string.digits + "-_.@",
    'éüßøñ漢字🙂\u0301 \t"\\',
    "\x00\x1f\x7f",
]


def test_make_install_built_the_module() -> None:
    assert fastpath is not None, "make install compiles api/native/fastpath.c (api.native.build)"


def random_text(rng: random.Random, low: int, high: int) -> str:
    alphabet = rng.choice(ALPHABETS)
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def random_flag(rng: random.Random, segment_keys: list[str], within: float = 0.0) -> Flag:
    """A flag of up to four rules; a percentage rule names a segment with probability
    ``within`` (contract 12: such a flag is the Python path's)."""
    rules = []
    for _ in range(rng.randint(0, 4)):
        kind = rng.choice(["STATIC", "SEGMENT", "PERCENTAGE"])
        raw: dict[str, object] = {"type": kind, "value": rng.random() < 0.6}
        if kind == "SEGMENT":
            raw["segment"] = rng.choice(segment_keys)
        if kind == "PERCENTAGE":
            raw["percentage"] = rng.choice([0, 0.01, 12.34, 50, 99.99, 100])
            if rng.random() < within:
                raw["segment"] = rng.choice(segment_keys)
        rules.append(rule_from_json(raw))
    return Flag(
        random_text(rng, 1, 40), rng.random() < 0.85, rng.random() < 0.1, tuple(rules)
    )  # fmt: skip


def test_bucket_is_murmur3_of_the_python_path() -> None:
    rng = random.Random(1)
    for _ in range(5_000):
        key, user = random_text(rng, 1, 20), random_text(rng, 0, 300)
        data = f"{key}:{user}".encode()
        assert fastpath.bucket(data) == bucket(key, user)


@given(st.text(min_size=1, max_size=30), st.lists(st.text(max_size=300), max_size=40))
def test_batch_hashing_is_the_python_paths(flag_key: str, users: list[str]) -> None:
    """The service hashes a bulk request's identifiers in one native call each for its
    percentage rules and its segments' tables (``hashing.use_batch_hashing``): the same
    buckets and keys as mmh3 over each identifier, lone surrogates and non-ASCII included."""
    before = batch_hashing()
    try:
        use_batch_hashing(None)
        wanted_buckets = buckets(flag_key, users).tolist()
        wanted_keys = SegmentMembership.build(users).keys().tolist()
        assert wanted_buckets == [bucket(flag_key, user) for user in users]
        use_batch_hashing(fastpath)
        assert buckets(flag_key, users).tolist() == wanted_buckets
        assert SegmentMembership.build(users).keys().tolist() == wanted_keys
        assert [identifier_hash(u) for u in users] == np.frombuffer(
            fastpath.identifier_hashes(users), np.uint64
        ).tolist()
    finally:
        use_batch_hashing(before)


def test_the_service_hashes_in_batches(services) -> None:  # noqa: ANN001 - the fixture's
    """``build_services`` plugs the native module in, as it does RE2."""
    assert batch_hashing() is fastpath


def test_batch_hashing_refuses_what_is_not_a_list_of_str() -> None:
    with pytest.raises(TypeError):
        fastpath.identifier_hashes(["a", b"b"])
    with pytest.raises(TypeError):
        fastpath.buckets("f:", ("a",))
    assert fastpath.buckets("f:", []) == b"" and fastpath.identifier_hashes([]) == b""


def defined_segment(members: list[str]) -> DefinedSegment:
    """A segment with conditions (contract 12) that decides users without attributes too: by
    their identifier (a condition on ``userIdentifier``), with members listed and excluded."""
    conditions = conditions_from_json(
        [{"attribute": "userIdentifier", "operator": "MATCHES", "values": ["^[a-m]"]}]
    )
    segment = segment_of(
        SegmentMembership.build(members[50:80]), SegmentMembership.build(members[80:200]),
        conditions,
    )  # fmt: skip
    assert isinstance(segment, DefinedSegment)
    return segment


@pytest.mark.parametrize("seed", range(4))
def test_serve_one_gives_what_the_python_path_builds(seed: int) -> None:
    """Segments with conditions are asked through their ``__contains__`` (the native path
    serves only requests without attributes, where it decides as ``includes`` does); a flag
    with a percentage within a segment has no plan, so the Python path serves it."""
    rng = random.Random(seed)
    members = [random_text(rng, 1, 12) for _ in range(300)]
    segments = {
        "beta": SegmentMembership.build(members),
        "gamma": frozenset(members[:50]),
        "delta": defined_segment(members),
    }
    signing_key = os.urandom(32)
    start = rng.getrandbits(63)
    native_ids, python_ids = EvaluationIdIssuer(signing_key), EvaluationIdIssuer(signing_key)
    native_ids._nonces = itertools.count(start)
    python_ids._nonces = itertools.count(start)
    times = [0, 127, 128, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 1_764_000_000_123_456]
    for _ in range(2_000):
        flag = random_flag(rng, ["beta", "gamma", "delta", "gone"], within=0.2)
        user = rng.choice(members) if rng.random() < 0.3 else random_text(rng, 1, 1024)
        refused = rng.random() < 0.05  # the plan's limit decided
        plan = 10 if refused else flag.plan
        if plan is None:  # a percentage within a segment: handed on to the Python path
            assert flag.enabled and not flag.archived
            assert any(
                getattr(rule, "segment", None) for rule in flag.rules if rule.type == "PERCENTAGE"
            )
            continue
        sdk = rng.choice([None, "", "flagsight-python/1.2", random_text(rng, 0, 256)])
        at = rng.choice(times)
        fields = ("org_0123456789abcdef", ENVIRONMENT, flag.key, sdk, "key_fedcba9876543210",
                  rng.choice([SOURCE_EVALUATE, SOURCE_OFREP]))  # fmt: skip
        outcome, rule, prefix, frame = fastpath.serve_one(
            plan, flag.code_table, segments, flag.key, user, native_ids.signing_key,
            environment_id_to_bytes(ENVIRONMENT), native_ids.nonces, at, fields[0], fields[1],
            fields[3], fields[4], fields[5], flag.split_rule, flag.split_percentage,
        )  # fmt: skip
        expected = (bytes([10]), bytes([254])) if refused else decide_one(flag, user, segments)
        assert (bytes([outcome]), bytes([rule])) == expected, (flag, user)
        expected_prefix = python_ids.issue_prefix(ENVIRONMENT, 1)
        assert prefix == expected_prefix
        batch = EvaluationBatch(prefix, at, fields[0], fields[1], fields[2], fields[3],
                                fields[4], fields[5], [user], *expected, flag.split_rule,
                                flag.split_percentage)  # fmt: skip
        assert bytes(frame) == bytes(encode_frame(EVALUATION_BATCH_CODE, batch))
        assert decode_evaluation_frame(frame) == batch
    python_ids.verify(prefix + "0000")


def test_an_identifier_without_utf8_is_left_to_the_python_path() -> None:
    flag = Flag("f", True, False, (rule_from_json({"type": "STATIC"}),))
    ids = EvaluationIdIssuer(os.urandom(32))
    with pytest.raises(ValueError):
        fastpath.serve_one(
            flag.plan, flag.code_table, {}, "f", "lone \ud800", ids.signing_key,
            environment_id_to_bytes(ENVIRONMENT), ids.nonces, 0, "org", ENVIRONMENT, None,
            "key", SOURCE_EVALUATE, -1, None,
        )  # fmt: skip


def test_serve_one_answers_and_logs_alike_with_and_without_the_module(
    services, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = admin.tenant()
    admin.segment(tenant.organization_id, "beta", ["member"])
    for key, state in (("f", {}), ("off", {"enabled": False}), ("old", {"archived": True})):
        admin.flag(tenant.environment_id, key, RULES, **state)
    services.config.refresh()
    services.event_log = Recording(services.event_log)
    services.clock = lambda: 1_800_000_000.25
    caller = services.config.caller(tenant.api_key)
    server = EvaluationServer(services)
    asked = [(flag, user) for flag in ("f", "off", "old", "missing")
             for user in ("member", "u-1", "u-2", "é" * 300)]  # fmt: skip
    logged = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr("api.serving.evaluations.fastpath", None)
        answers = [
            server.serve_one(caller, caller.environment, f, u, sdk="s", source=SOURCE_EVALUATE)
            for f, u in asked
        ]
        batches = services.event_log.batches[-len(asked) :]
        for (outcome, prefix), batch in zip(answers, batches, strict=True):
            assert batch.evaluation_id_prefix == prefix
            assert batch.outcomes == bytes([outcome])
            services.ids.verify(prefix + "0000")
        logged[native] = [b._replace(evaluation_id_prefix="") for b in batches]
    assert logged[True] == logged[False]


def test_a_segment_member_hash_is_the_membership_tables() -> None:
    rng = random.Random(2)
    for _ in range(5_000):
        identifier = random_text(rng, 0, 100)
        assert fastpath.identifier_hash(identifier.encode()) == identifier_hash(identifier)


def test_segment_tables_are_probed_as_the_python_path_does() -> None:
    rng = random.Random(3)
    members = [random_text(rng, 1, 40) for _ in range(2_000)]
    table = SegmentMembership.build(members)
    flag = Flag("f", True, False, (rule_from_json({"type": "SEGMENT", "segment": "s"}),))
    ids = EvaluationIdIssuer(os.urandom(32))
    asked = members[:500] + [random_text(rng, 1, 40) for _ in range(2_000)]
    for user in asked:
        _outcome, rule, _prefix, _frame = fastpath.serve_one(
            flag.plan, flag.code_table, {"s": table}, "f", user, ids.signing_key,
            environment_id_to_bytes(ENVIRONMENT), ids.nonces, 0, "org", ENVIRONMENT, None,
            "key", SOURCE_EVALUATE, -1, None,
        )  # fmt: skip
        assert (rule == 0) == (user in table)


class _Logged(Recording):
    """``Recording``, keeping the events appended as events (a batch with users outside its
    split's segment) and counting the frames the native path encoded."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.events: list = []
        self.frames = 0

    def append_evaluations(self, events) -> None:
        self.events.extend(events)

    def append_evaluation_frame(self, frame, count: int) -> None:
        self.frames += 1
        super().append_evaluation_frame(frame, count)


def test_flags_with_conditions_answer_and_log_alike_with_and_without_the_module(
    services, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SEGMENT rule over a segment with conditions is served natively (a request without
    attributes, decided through the segment's ``__contains__``); a percentage within a segment
    is handed on. Answers and events are the same either way."""
    tenant = admin.tenant()
    admin.request("PUT", f"/organizations/{tenant.organization_id}/segments/delta", {
        "userIdentifiers": ["listed"], "excludedUserIdentifiers": ["bob"],
        "conditions": [{"attribute": "userIdentifier", "operator": "STARTS_WITH", "values": ["b"]}],
    }, expect=200)  # fmt: skip
    admin.flag(tenant.environment_id, "segment", [
        {"type": "SEGMENT", "segment": "delta"}, {"type": "PERCENTAGE", "percentage": 50},
    ])  # fmt: skip
    admin.flag(tenant.environment_id, "within", [
        {"type": "PERCENTAGE", "percentage": 50, "segment": "delta"},
        {"type": "STATIC", "value": False},
    ])  # fmt: skip
    services.config.refresh()
    services.event_log = _Logged(services.event_log)
    services.clock = lambda: 1_800_000_000.25
    caller = services.config.caller(tenant.api_key)
    server = EvaluationServer(services)
    users = ["listed", "bob", "bea", "ben", "carl", "dora", *(f"b-{i}" for i in range(20))]
    asked = [(flag, user) for flag in ("segment", "within") for user in users]
    seen = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr("api.serving.evaluations.fastpath", None)
        log = services.event_log
        log.batches, log.events, log.frames = [], [], 0
        answers = [
            server.serve_one(caller, caller.environment, f, u, sdk="s", source=SOURCE_EVALUATE)[0]
            for f, u in asked
        ]
        batches = [b._replace(evaluation_id_prefix="") for b in log.batches]
        events = [e._replace(evaluation_id="") for e in log.events]
        seen[native] = (answers, batches, events)
        assert log.frames == (len(users) if native else 0)  # "within" never native
    assert seen[True] == seen[False]
    _answers, _batches, events = seen[True]
    assert {e.user_identifier for e in events} == {"bob", "carl", "dora"}  # outside "delta"
    assert all(e.arm is None and e.rollout_percentage is None for e in events)
