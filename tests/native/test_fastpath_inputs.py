"""What the native fast path refuses, fed to it directly: plans of the wrong shape or size,
integers out of range, arguments of the wrong type.

``serve_one`` raises TypeError for an argument of the wrong type and ValueError for what it does
not serve (the caller then serves the request on the Python path), in both cases before it takes
a nonce. Each call runs in a forked child, so that a crash fails its test instead of ending the
run: before the C code checked its inputs, several of these read past a table or a tuple.
"""

from __future__ import annotations

import itertools
import os
import pickle
import signal
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from flagsight_core import NO_RULE, NOT_EVALUATED, Flag, decide_one, rule_from_json
from flagsight_core.conditions import conditions_from_json
from flagsight_core.ids import EvaluationIdIssuer, environment_id_to_bytes
from flagsight_core.segments import DefinedSegment, SegmentMembership, segment_of

from api.eventlog.frames import EVALUATION_BATCH_CODE, encode_frame
from api.eventlog.schema import SOURCE_EVALUATE, EvaluationBatch
from api.native import fastpath
from tests.support.needs import needs

pytestmark = needs(fastpath is not None, "the native module (make install builds it)")

ENVIRONMENT = "env_00ff10ee20dd30cc"
SIGNING_KEY = bytes(range(32))
FIRST_NONCE = 1_000
STATIC, SEGMENT, PERCENTAGE = 0, 1, 2
"""The rule kinds of a plan (``RULE_KINDS``; ``fastpath.c`` has the same numbers)."""
NEVER = (PERCENTAGE, 0)
"""A rule no user matches (no bucket is below 0)."""
MAX_RULES = NOT_EVALUATED - 1


def arguments(**changed: object) -> dict[str, Any]:
    """A valid ``serve_one`` call's arguments, in order, with ``changed`` ones replaced."""
    values: dict[str, Any] = {
        "plan": ((STATIC, None),),
        "code_table": bytes(range(256)),
        "segments": {"beta": frozenset({"u"})},
        "flag_key": "f",
        "user": "u",
        "signing_key": SIGNING_KEY,
        "environment": environment_id_to_bytes(ENVIRONMENT),
        "nonces": itertools.count(FIRST_NONCE),
        "evaluated_at_us": 0,
        "organization_id": "org",
        "environment_id": ENVIRONMENT,
        "sdk": None,
        "api_key_id": "key",
        "source": SOURCE_EVALUATE,
        "split_rule": -1,
        "split_percentage": None,
    }
    assert set(changed) <= set(values), set(changed) - set(values)
    return values | changed


def in_child(call: Callable[[], object]) -> tuple:
    """What ``call()`` does in a forked child: ``("returned", value)``, ``("raised", the
    exception's type, its message, its notes)`` or ``("crashed", the signal's name)``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports, then leaves without the parent's cleanup
        try:
            os.close(read)
            try:
                report: tuple = ("returned", call())
            except Exception as exc:
                report = ("raised", type(exc), str(exc), getattr(exc, "__notes__", []))
            with os.fdopen(write, "wb") as pipe:
                pickle.dump(report, pipe)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        reported = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("crashed", signal.Signals(os.WTERMSIG(status)).name)
    return pickle.loads(reported)


def serve(**changed: object) -> tuple:
    """``in_child`` of ``serve_one`` with ``changed`` arguments; what it raised comes with
    whether it took a nonce from the issuer's counter."""
    values = arguments(**changed)

    def call() -> object:
        nonces = values["nonces"]
        try:
            return fastpath.serve_one(*values.values())
        except Exception as exc:
            if isinstance(nonces, itertools.count):
                exc.add_note(f"nonce taken: {next(nonces) != FIRST_NONCE}")
            raise

    return in_child(call)


def assert_refused(outcome: tuple, expected: type[Exception]) -> None:
    assert outcome[0] == "raised", outcome
    assert issubclass(outcome[1], expected), outcome


def many(count: int) -> tuple:
    """A plan of ``count`` rules whose last one, a static rule, decides."""
    return (NEVER,) * (count - 1) + ((STATIC, None),)


DECLINED = {
    # more rules than a rule byte can name (254 and 255 are NOT_EVALUATED and NO_RULE)
    "one rule too many": many(MAX_RULES + 1),
    "rule 254 is NOT_EVALUATED": many(NOT_EVALUATED + 1),
    "rule 255 is NO_RULE": many(NO_RULE + 1),
    "past the 256-byte code table": many(301),
    "more rules than the table, none matching": (NEVER,) * 1000,
    # result codes that are no byte
    "code 256": 256,
    "code -1": -1,
    "code 2**64": 2**64,
    # rules that are no (kind, parameter) pair
    "a rule that is an int": (5,),
    "a rule that is a list": ([STATIC, None],),
    "a static rule without parameter": ((STATIC,),),
    "a segment rule without parameter": ((SEGMENT,),),
    "a percentage rule without parameter": ((PERCENTAGE,),),
    "a rule of three": ((PERCENTAGE, 50, 1),),
    # kinds
    "kind 3": ((3, None),),
    "kind -1": ((-1, None),),
    "kind 2**70": ((2**70, None),),
    "kind as a str": (("0", None),),
    "kind None": ((None, None),),
    # parameters
    "threshold as a str, then a static rule": ((PERCENTAGE, "50"), (STATIC, None)),
    "threshold 2**70": ((PERCENTAGE, 2**70),),
    "threshold -2**70, then a static rule": ((PERCENTAGE, -(2**70)), (STATIC, None)),
    "threshold as a float": ((PERCENTAGE, 50.0),),
    "threshold None": ((PERCENTAGE, None),),
    "segment None": ((SEGMENT, None),),
    "segment as bytes": ((SEGMENT, b"beta"),),
    "segment as a tuple": ((SEGMENT, ("beta",)),),
}


@pytest.mark.parametrize("plan", DECLINED.values(), ids=DECLINED.keys())
def test_a_malformed_plan_is_declined_before_a_nonce_is_taken(plan: object) -> None:
    outcome = serve(plan=plan)
    assert_refused(outcome, ValueError)
    assert outcome[3] == ["nonce taken: False"], outcome


REFUSED: dict[str, tuple[dict[str, object], type[Exception]]] = {
    "nonces that are a list": ({"nonces": [FIRST_NONCE]}, TypeError),
    "nonces that are an int": ({"nonces": FIRST_NONCE}, TypeError),
    "a nonce that is a str": ({"nonces": iter(["1"])}, TypeError),
    "nonces that ran out": ({"nonces": iter([])}, ValueError),
    "a time past int64": ({"evaluated_at_us": 2**63}, ValueError),
    "a time as a str": ({"evaluated_at_us": "0"}, TypeError),
    "a split rule past a long": ({"split_rule": 2**70}, ValueError),
    "a split rule that is a bool": ({"split_rule": True}, TypeError),
    "a split percentage as a str": ({"split_percentage": "50"}, TypeError),
    "a split percentage that is a bool": ({"split_percentage": True}, TypeError),
    "a split percentage past int64": ({"split_percentage": 2**64}, ValueError),
    "a code table of 255 bytes": ({"code_table": bytes(255)}, TypeError),
    "environment bytes that are 7": ({"environment": bytes(7)}, TypeError),
    "an organization id as bytes": ({"organization_id": b"org"}, TypeError),
    "an sdk that is an int": ({"sdk": 1}, TypeError),
    "a source that is None": ({"source": None}, TypeError),
    "a plan that is a list": ({"plan": [(STATIC, None)]}, TypeError),
    "a plan that is a float": ({"plan": 1.0}, TypeError),
    "an empty signing key": ({"signing_key": b""}, ValueError),
    "a signing key of 65 bytes": ({"signing_key": bytes(65)}, ValueError),
    "a user without UTF-8": ({"user": "lone \ud800"}, ValueError),
    "an sdk without UTF-8": ({"sdk": "\udfff"}, ValueError),
    "a frame past the native buffer": ({"organization_id": "o" * 20_000}, ValueError),
}


@pytest.mark.parametrize(("changed", "expected"), REFUSED.values(), ids=REFUSED.keys())
def test_an_argument_out_of_its_type_or_range_is_refused(
    changed: dict[str, object], expected: type[Exception]
) -> None:
    outcome = serve(**changed)
    assert_refused(outcome, expected)
    if "nonces" not in changed:
        assert outcome[3] == ["nonce taken: False"], outcome


def test_a_segment_container_that_raises_is_reported() -> None:
    class Broken:
        def __contains__(self, user: object) -> bool:
            raise RuntimeError("broken")

    outcome = serve(plan=((SEGMENT, "beta"),), segments={"beta": Broken()})
    assert_refused(outcome, RuntimeError)


def expected_frame(flag: Flag, user: str, split_percentage: object) -> tuple:
    issuer = EvaluationIdIssuer(SIGNING_KEY)
    issuer._nonces = itertools.count(FIRST_NONCE)
    outcome, rule = decide_one(flag, user, {})
    prefix = issuer.issue_prefix(ENVIRONMENT, 1)
    batch = EvaluationBatch(prefix, 0, "org", ENVIRONMENT, flag.key, None, "key",
                            SOURCE_EVALUATE, [user], outcome, rule, flag.split_rule,
                            split_percentage)  # fmt: skip
    return outcome[0], rule[0], prefix, bytes(encode_frame(EVALUATION_BATCH_CODE, batch))


def test_the_longest_plan_is_served_as_the_python_path_serves_it() -> None:
    rules = (rule_from_json({"type": "PERCENTAGE", "percentage": 0}),) * (MAX_RULES - 1)
    flag = Flag("f", True, False, (*rules, rule_from_json({"type": "STATIC"})))
    outcome = serve(plan=flag.plan, code_table=flag.code_table, split_rule=flag.split_rule,
                    split_percentage=flag.split_percentage)  # fmt: skip
    assert outcome[0] == "returned", outcome
    code, rule, prefix, frame = outcome[1]
    assert (code, rule, prefix, bytes(frame)) == expected_frame(flag, "u", flag.split_percentage)
    assert rule == MAX_RULES - 1


@pytest.mark.parametrize("split_percentage", [50, 50.0, 0, 12.34, None])
def test_a_split_percentage_is_encoded_as_msgspec_encodes_its_type(
    split_percentage: object,
) -> None:
    flag = Flag("f", True, False, (rule_from_json({"type": "PERCENTAGE", "percentage": 50}),))
    outcome = serve(plan=flag.plan, code_table=flag.code_table, split_rule=flag.split_rule,
                    split_percentage=split_percentage)  # fmt: skip
    assert outcome[0] == "returned", outcome
    code, rule, prefix, frame = outcome[1]
    assert (code, rule, prefix, bytes(frame)) == expected_frame(flag, "u", split_percentage)


def frames_view() -> memoryview:
    batch = EvaluationBatch("p" * 42, 0, "org", ENVIRONMENT, "f", None, "key", SOURCE_EVALUATE,
                            ["u"], b"\x00", b"\x00", -1, None)  # fmt: skip
    frames = bytes(encode_frame(EVALUATION_BATCH_CODE, batch)) * 8
    return memoryview(frames + bytes(-len(frames) % 8))


@pytest.mark.parametrize(
    "view",
    [frames_view().cast("Q"), frames_view().cast("B", (8, len(frames_view()) // 8))],
    ids=["eight-byte items", "two dimensions"],
)
def test_batch_bodies_refuses_a_view_that_is_not_of_bytes(view: memoryview) -> None:
    assert_refused(in_child(lambda: fastpath.batch_bodies(view, 0, 1 << 20)), TypeError)


def test_batch_bodies_reads_a_view_of_bytes() -> None:
    outcome = in_child(
        lambda: [bytes(b) for b in fastpath.batch_bodies(frames_view(), 0, 1 << 20)[0]]
    )
    assert outcome[0] == "returned", outcome
    assert len(outcome[1]) == 8


def serve_with(attributes: object, **changed: object) -> tuple:
    """``serve`` with the request's attributes as the last argument."""
    values = arguments(**changed)

    def call() -> object:
        nonces = values["nonces"]
        try:
            return fastpath.serve_one(*values.values(), attributes)
        except Exception as exc:
            exc.add_note(f"nonce taken: {next(nonces) != FIRST_NONCE}")
            raise

    return in_child(call)


def defined(plan: object = None) -> DefinedSegment:
    """A segment of one condition (``plan IN [pro]``), its ``native_plan`` replaced."""
    segment = segment_of(
        SegmentMembership.build(["listed"]), SegmentMembership.build(["excluded"]),
        conditions_from_json([{"attribute": "plan", "operator": "IN", "values": ["pro"]}]),
    )  # fmt: skip
    assert isinstance(segment, DefinedSegment)
    if plan is not None:
        segment.native_plan = plan  # type: ignore[assignment]
    return segment


@pytest.mark.parametrize(
    "attributes", [MappingProxyType({"plan": "pro"}), [("plan", "pro")], "plan"], ids=repr
)
def test_attributes_other_than_a_dict_are_declined_before_a_nonce_is_taken(
    attributes: object,
) -> None:
    outcome = serve_with(attributes, plan=((SEGMENT, "beta"),), segments={"beta": defined()})
    assert_refused(outcome, ValueError)
    assert outcome[3] == ["nonce taken: False"], outcome


def _raises(value: object) -> bool:
    raise RuntimeError("a test that raises")


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        ((), ValueError),
        ((None, None, ()), TypeError),  # no tables: asked as containers, None is none
        ("plan", ValueError),
        ((SegmentMembership.build(()), SegmentMembership.build(()), [("plan",)]), ValueError),
        ((SegmentMembership.build(()), SegmentMembership.build(()), (("plan",),)), ValueError),
        (
            (SegmentMembership.build(()), SegmentMembership.build(()),
             (("plan", _raises, _raises, _raises),)),
            RuntimeError,
        ),
    ],
    ids=["empty", "no tables", "a str", "conditions a list", "a condition of one item",
         "a test that raises"],
)  # fmt: skip
def test_a_malformed_native_plan_is_reported(plan: object, expected: type[Exception]) -> None:
    outcome = serve_with(
        {"plan": "pro"}, plan=((SEGMENT, "beta"),), segments={"beta": defined(plan)}
    )
    assert_refused(outcome, expected)
    assert outcome[3] == ["nonce taken: False"], outcome


@pytest.mark.parametrize(
    ("user", "attributes", "member"),
    [
        ("u", {"plan": "pro"}, True),
        ("u", {"plan": "free"}, False),
        ("u", {}, False),
        ("u", None, False),
        ("listed", None, True),
        ("excluded", {"plan": "pro"}, False),
    ],
)
def test_a_defined_segment_is_decided_by_the_attributes(
    user: str, attributes: dict[str, object] | None, member: bool
) -> None:
    outcome = serve_with(attributes, user=user, plan=((SEGMENT, "beta"),),
                         segments={"beta": defined()})  # fmt: skip
    assert outcome[0] == "returned", outcome
    assert (outcome[1][1] == 0) is member
