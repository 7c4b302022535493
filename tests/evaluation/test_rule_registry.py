"""A rule type is one class registered in one place: this module registers a throwaway one
(users whose identifier starts with a prefix) without touching any source file, and the whole
service takes it: evaluation of one user and many, the admin API's validation, the OpenAPI
document, the public and OFREP answers, the event log, the dashboard's editor, and the native
fast path, which declines it so the Python path serves it with the same answers.

A rule that reads more of the user than the identifier is one class too: every rule receives
the user's evaluation context (``flagsight_core.context``). Two more throwaway ones (users
whose attribute has a value; evaluations from an instant on) are served with the attributes
and the clock through the engine, ``api.serving`` and the SDK's local mode."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import falcon.testing
import numpy as np
import pytest
from flagsight_core import (
    RESULTS,
    RULE_TYPES,
    EvaluationContext,
    EvaluationContexts,
    Flag,
    Result,
    Rule,
    RuleError,
    RuleField,
    StaticRule,
    decide,
    decide_one,
    evaluate,
    evaluate_many,
    register_rule_type,
    rule_from_json,
    rule_to_json,
    unregister_rule_type,
)
from flagsight_core.contract import OfrepReason
from flagsight_core.registry import Segments, rule_value
from flagsight_sdk import FlagsightClient
from flagsight_sdk.provider import FlagsightProvider
from openfeature.evaluation_context import EvaluationContext as OpenFeatureContext

from api.eventlog.frames import EVALUATION_BATCH_CODE, encode_frame
from api.eventlog.schema import EVALUATION, SOURCE_EVALUATE
from api.eventlog.sealing import build_table, read_segment
from api.serving.evaluations import EvaluationServer
from api.serving.services import Services
from tests.api.test_serving import Recording
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin
from tests.support.attribute_rule import AttributeIsRule
from tests.support.in_process_session import in_process_session
from tests.support.openapi import OpenApiChecker

PREFIX_MAX = 64


@dataclass(frozen=True, slots=True)
class PrefixRule(Rule):
    """Matches users whose identifier starts with ``prefix``."""

    prefix: str
    value: bool = True
    type: ClassVar[str] = "PREFIX"
    ofrep_reason: ClassVar[str] = OfrepReason.TARGETING_MATCH
    description: ClassVar[str] = "matches identifiers that start with a prefix"
    fields: ClassVar[tuple[RuleField, ...]] = (
        RuleField(
            "prefix",
            {"type": "string", "minLength": 1, "maxLength": PREFIX_MAX},
            "Prefix",
            prompt="Identifier prefix",
        ),
    )

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        return ctx.user.startswith(self.prefix)

    def to_json(self) -> dict[str, Any]:
        return {"type": "PREFIX", "prefix": self.prefix, "value": self.value}

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> PrefixRule:
        prefix = raw.get("prefix")
        if not isinstance(prefix, str) or not 1 <= len(prefix) <= PREFIX_MAX:
            raise RuleError(f"{where}.prefix must be a string of 1 to {PREFIX_MAX} characters")
        return cls(prefix, rule_value(raw, where))


RULES = [
    {"type": "PREFIX", "prefix": "vip-", "value": True},
    {"type": "STATIC", "value": False},
]
USERS = ["vip-1", "guest-1", "vip-2", "vip", "ünï", "vip-ü", "x", "vip-3", "y", "vip-4"]


@pytest.fixture(scope="module", autouse=True)
def prefix_rule() -> Iterator[type[PrefixRule]]:
    """Registered for this module only (set up before, torn down after every service)."""
    before = list(RESULTS)
    register_rule_type(PrefixRule)
    yield PrefixRule
    unregister_rule_type("PREFIX")
    assert before == RESULTS  # as if it had never been registered


def expected(user: str) -> tuple[bool, str]:
    return (True, "PREFIX") if user.startswith("vip-") else (False, "STATIC")


def test_it_parses_serializes_and_evaluates_one_user_and_many() -> None:
    rules = tuple(rule_from_json(raw, f"rules[{i}]") for i, raw in enumerate(RULES))
    assert rules == (PrefixRule("vip-"), StaticRule(False))
    assert [rule_to_json(rule) for rule in rules] == RULES
    flag = Flag("f", True, False, rules)
    for user in USERS:
        assert evaluate(flag, user, {}) == Result(*expected(user))
    assert len(USERS) >= 8  # the array path of ``decide``, not one by one
    assert evaluate_many(flag, USERS, {}) == [evaluate(flag, user, {}) for user in USERS]
    codes, rule_bytes = decide(flag, USERS, {})
    assert [decide_one(flag, u, {}) for u in USERS] == [
        (bytes([c]), bytes([r])) for c, r in zip(codes, rule_bytes, strict=True)
    ]
    assert {RESULTS[code] for code in codes} == {Result(True, "PREFIX"), Result(False, "STATIC")}


def test_its_rule_json_is_validated_naming_the_field() -> None:
    with pytest.raises(RuleError, match=r"^rules\[3\]\.prefix must be a string of 1 to 64"):
        rule_from_json({"type": "PREFIX", "prefix": ""}, "rules[3]")
    with pytest.raises(RuleError, match="type must be one of STATIC, SEGMENT, PERCENTAGE, PREFIX"):
        rule_from_json({"type": "GEO"})


class CountingNative:
    """The native module, counting the single evaluations it was asked to serve."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.calls = 0

    def serve_one(self, *args: Any) -> Any:
        self.calls += 1
        return self._inner.serve_one(*args)


def test_the_native_path_declines_it_and_the_python_path_answers_and_logs_alike(
    services: Services, admin: Admin, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from api.serving import evaluations

    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "prefixed", RULES)
    admin.flag(tenant.environment_id, "plain", [{"type": "STATIC", "value": True}])
    services.config.refresh()
    caller = services.config.caller(tenant.api_key)
    assert caller.environment.flags["prefixed"].plan is None  # no native kind: no plan
    services.event_log = Recording(services.event_log)
    services.clock = lambda: 1_800_000_000.25
    server = EvaluationServer(services)
    logged: dict[bool, list] = {}
    for native in (True, False):
        spy = CountingNative(evaluations.fastpath) if evaluations.fastpath else None
        monkeypatch.setattr(evaluations, "fastpath", spy if native else None)
        answers = [
            server.serve_one(caller, caller.environment, "prefixed", u, sdk=None, source=SOURCE_EVALUATE)
            for u in USERS
        ]  # fmt: skip
        assert [RESULTS[code][:2] for code, _prefix in answers] == [expected(u) for u in USERS]
        if spy is not None and native:
            assert spy.calls == 0
            server.serve_one(
                caller, caller.environment, "plain", "u", sdk=None, source=SOURCE_EVALUATE
            )
            assert spy.calls == 1  # the flags it knows still take the native path
            services.event_log.batches.pop()
        batches = services.event_log.batches[-len(USERS) :]
        logged[native] = [b._replace(evaluation_id_prefix="") for b in batches]
    assert logged[True] == logged[False]

    segment = tmp_path / "segment"
    segment.write_bytes(b"".join(encode_frame(EVALUATION_BATCH_CODE, b) for b in batches))
    invalid: list[Exception] = []
    table = build_table(EVALUATION, read_segment(segment, invalid.append)[EVALUATION])
    assert invalid == []
    columns = (table["value"].to_pylist(), table["matched_rule_type"].to_pylist())
    assert list(zip(*columns, strict=True)) == [expected(u) for u in USERS]


def test_the_admin_api_validates_it_and_the_openapi_document_describes_it(
    client: falcon.testing.TestClient, admin: Admin
) -> None:
    tenant = admin.tenant()
    path = f"/admin/v1/environments/{tenant.environment_id}/flags/prefixed"
    headers = {"Authorization": admin._headers["Authorization"]}
    checker = OpenApiChecker(client.simulate_get("/openapi.json").json)

    good = client.simulate_put(path, json={"enabled": True, "rules": RULES}, headers=headers)
    assert good.status_code == 201, good.text
    assert good.json["rules"] == RULES
    checker.check(path, "PUT", 201, good.json, good.content)

    bad_rules = [RULES[1], {"type": "PREFIX", "prefix": "x" * 65}]
    bad = client.simulate_put(path, json={"enabled": True, "rules": bad_rules}, headers=headers)
    assert bad.status_code == 400
    assert bad.json["message"] == "Field 'rules[1].prefix' must be a string of 1 to 64 characters"

    schemas = checker.document["components"]["schemas"]
    assert schemas["PrefixRule"] == {
        "type": "object",
        "required": ["type", "prefix"],
        "properties": {
            "type": {"const": "PREFIX"},
            "prefix": {"type": "string", "minLength": 1, "maxLength": 64},
            "value": {"type": "boolean", "default": True},
        },
    }
    mapping = schemas["Rule"]["discriminator"]["mapping"]
    assert mapping["PREFIX"] == "#/components/schemas/PrefixRule"
    assert "PREFIX" in schemas["EvaluateResponse"]["properties"]["matchedRuleType"]["enum"]


def test_the_public_api_and_ofrep_answer_with_it(
    client: falcon.testing.TestClient, admin: Admin
) -> None:
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "prefixed", RULES)
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    checker = OpenApiChecker(client.simulate_get("/openapi.json").json)
    for user in ("vip-1", "guest"):
        one = client.simulate_post(
            "/v1/evaluate", json={"flagKey": "prefixed", "userIdentifier": user}, headers=auth
        )
        assert (one.json["value"], one.json["matchedRuleType"]) == expected(user)
        checker.check("/v1/evaluate", "POST", 200, one.json, one.content)
    bulk = client.simulate_post(
        "/v1/evaluate/bulk", json={"flagKey": "prefixed", "userIdentifiers": USERS}, headers=auth
    )
    assert {u: (e["value"], e["matchedRuleType"]) for u, e in bulk.json.items()} == {
        u: expected(u) for u in USERS
    }
    checker.check("/v1/evaluate/bulk", "POST", 200, bulk.json, bulk.content)
    ofrep_path = "/ofrep/v1/evaluate/flags/prefixed"
    ofrep = client.simulate_post(
        ofrep_path, json={"context": {"targetingKey": "vip-7"}}, headers=auth
    )
    assert (ofrep.json["value"], ofrep.json["reason"]) == (True, "TARGETING_MATCH")
    checker.check(ofrep_path, "POST", 200, ofrep.json, ofrep.content)


# -- rules that read the evaluation context: an attribute, the clock --------------------------


@dataclass(frozen=True, slots=True)
class AfterTimeRule(Rule):
    """Matches every evaluation from the instant ``after`` (Unix seconds) on: a launch."""

    after: int
    value: bool = True
    type: ClassVar[str] = "AFTER_TIME"
    ofrep_reason: ClassVar[str] = OfrepReason.TARGETING_MATCH
    description: ClassVar[str] = "matches from an instant on"
    fields: ClassVar[tuple[RuleField, ...]] = (
        RuleField("after", {"type": "integer", "minimum": 0}, "After", input="number"),
    )

    def matches(self, flag_key: str, ctx: EvaluationContext, segments: Segments) -> bool:
        return ctx.at is not None and ctx.at >= self.after

    def matches_many(
        self, flag_key: str, contexts: EvaluationContexts, segments: Segments
    ) -> np.ndarray:
        """One time for the whole batch: no context made per user."""
        launched = contexts.at is not None and contexts.at >= self.after
        return np.full(len(contexts), launched, dtype=bool)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "after": self.after, "value": self.value}

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> AfterTimeRule:
        after = raw.get("after")
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise RuleError(f"{where}.after must be a whole number of Unix seconds")
        return cls(after, rule_value(raw, where))


LAUNCH = 1_800_000_000
CONTEXT_RULES = [
    {"type": "ATTRIBUTE_IS", "attribute": "plan", "equals": "pro", "value": True},
    {"type": "AFTER_TIME", "after": LAUNCH, "value": True},
    {"type": "STATIC", "value": False},
]
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "pro-1": {"plan": "pro", "country": "DE"},
    "free-1": {"plan": "free"},
    "pro-2": {"plan": "pro", "tags": ("beta", "staff")},
    "odd-1": {"plan": ("pro",)},  # an array is not the string: no match
    "pro-3": {"plan": "pro"},
}
CONTEXT_USERS = [*ATTRIBUTES, "none-1", "none-2", "none-3", "none-4"]


@pytest.fixture
def context_rules() -> Iterator[None]:
    """ATTRIBUTE_IS and AFTER_TIME for one test: registered after PREFIX, forgotten before it
    (list it first among a test's fixtures: set up before the services, torn down after)."""
    register_rule_type(AttributeIsRule)
    register_rule_type(AfterTimeRule)
    yield
    unregister_rule_type("AFTER_TIME")
    unregister_rule_type("ATTRIBUTE_IS")


def context_expected(attributes: dict[str, Any] | None, at: float | None) -> tuple[bool, str]:
    if (attributes or {}).get("plan") == "pro":
        return True, "ATTRIBUTE_IS"
    if at is not None and at >= LAUNCH:
        return True, "AFTER_TIME"
    return False, "STATIC"


def context_flag(rules: list[dict[str, Any]] = CONTEXT_RULES) -> Flag:
    return Flag("ctx", True, False, tuple(rule_from_json(r) for r in rules))


@pytest.mark.parametrize("at", [None, LAUNCH - 1, LAUNCH, LAUNCH + 0.5])
def test_rules_read_the_attributes_and_the_time_of_one_user_and_many(
    context_rules: None, at: float | None
) -> None:
    flag = context_flag()
    assert [rule_to_json(rule) for rule in flag.rules] == CONTEXT_RULES
    assert flag.plan is None  # no native kind: the Python path serves it
    wanted = [context_expected(ATTRIBUTES.get(u), at) for u in CONTEXT_USERS]
    one_by_one = [evaluate(flag, u, {}, ATTRIBUTES.get(u), at=at) for u in CONTEXT_USERS]
    assert [result[:2] for result in one_by_one] == wanted
    assert len(CONTEXT_USERS) >= 8  # the array path of ``decide``, rule by rule
    assert evaluate_many(flag, CONTEXT_USERS, {}, ATTRIBUTES, at=at) == one_by_one
    codes, rule_bytes = decide(flag, CONTEXT_USERS, {}, ATTRIBUTES, at=at)
    assert [decide_one(flag, u, {}, ATTRIBUTES.get(u), at=at) for u in CONTEXT_USERS] == [
        (bytes([c]), bytes([r])) for c, r in zip(codes, rule_bytes, strict=True)
    ]
    few = CONTEXT_USERS[:3]  # one at a time below ``SMALL_BATCH``
    assert evaluate_many(flag, few, {}, ATTRIBUTES, at=at) == one_by_one[:3]


def test_without_attributes_or_time_such_rules_do_not_match(context_rules: None) -> None:
    flag = context_flag()
    assert evaluate(flag, "pro-1", {}) == Result(False, "STATIC")
    assert evaluate_many(flag, CONTEXT_USERS, {}) == [Result(False, "STATIC")] * len(CONTEXT_USERS)


def test_the_service_serves_them_with_the_request_attributes_and_its_clock(
    context_rules: None, services: Services, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``api.serving`` passes a request's attributes and its own clock to the rules; the
    native path serves a flag it has a plan for with attributes or without (it reads none:
    the segments it asks are decided for the user's context)."""
    from api.serving import evaluations

    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "ctx", CONTEXT_RULES)
    admin.flag(tenant.environment_id, "plain", [{"type": "STATIC", "value": True}])
    services.config.refresh()
    caller = services.config.caller(tenant.api_key)
    environment = caller.environment
    spy = CountingNative(evaluations.fastpath) if evaluations.fastpath else None
    monkeypatch.setattr(evaluations, "fastpath", spy)
    server = EvaluationServer(services)
    for at in (LAUNCH - 1.0, LAUNCH + 1.0):
        services.clock = lambda at=at: at
        singles = [
            server.serve_one(caller, environment, "ctx", u, sdk=None, source=SOURCE_EVALUATE,
                             attributes=ATTRIBUTES.get(u))
            for u in CONTEXT_USERS
        ]  # fmt: skip
        wanted = [context_expected(ATTRIBUTES.get(u), at) for u in CONTEXT_USERS]
        assert [RESULTS[code][:2] for code, _prefix in singles] == wanted
        bulk = server.serve(
            caller.key, environment, "ctx", CONTEXT_USERS, sdk=None, source=SOURCE_EVALUATE,
            attributes=ATTRIBUTES,
        )  # fmt: skip
        assert [result[:2] for result in bulk.results] == wanted
    if spy is not None:
        assert spy.calls == 0  # a flag without a plan
        plain = [
            server.serve_one(caller, environment, "plain", "u", sdk=None, source=SOURCE_EVALUATE,
                             attributes=attributes)
            for attributes in ({"plan": "pro"}, None, {})
        ]  # fmt: skip
        assert spy.calls == 3  # native with attributes, without, or with none
        assert {RESULTS[code] for code, _prefix in plain} == {Result(True, "STATIC")}


def test_the_sdks_local_mode_decides_them_with_attributes_and_its_clock(
    context_rules: None, client: falcon.testing.TestClient, admin: Admin
) -> None:
    """The SDK against this process's service (its ruleset, quota and reports), deciding
    with the registered rules: the attributes given, the time it evaluates at."""
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "ctx", CONTEXT_RULES)  # the launch is in 2027
    admin.flag(tenant.environment_id, "launched", [{"type": "AFTER_TIME", "after": 1_000_000_000}])
    session = in_process_session(client)
    sdk = FlagsightClient(tenant.api_key, "http://flagsight.test", session=session, local=True)
    try:
        assert sdk.local is not None and sdk.local.wait_ready(10)
        for user in CONTEXT_USERS:
            answer = sdk.evaluate("ctx", user, ATTRIBUTES.get(user))
            assert answer.evaluation_id is not None, answer
            wanted = context_expected(ATTRIBUTES.get(user), None)
            assert (answer.value, answer.matched_rule_type) == wanted
        bulk = sdk.evaluate_bulk("ctx", CONTEXT_USERS, ATTRIBUTES)
        assert {u: (e.value, e.matched_rule_type) for u, e in bulk.items()} == {
            u: context_expected(ATTRIBUTES.get(u), None) for u in CONTEXT_USERS
        }
        launched = sdk.evaluate("launched", "anyone")
        assert (launched.value, launched.matched_rule_type) == (True, "AFTER_TIME")

        provider = FlagsightProvider(sdk, local=True)
        fields = {"plan": "pro", "odd": {"nested": 1}, "nothing": None, "mixed": ["a", 1]}
        details = provider.resolve_boolean_details("ctx", False, OpenFeatureContext("u", fields))
        assert details.value is True  # its reason: UNKNOWN, not being in the SDK's RULE_REASONS
        assert details.reason == "UNKNOWN"
        plain = provider.resolve_boolean_details("ctx", True, OpenFeatureContext("u", {}))
        assert plain.value is False
    finally:
        sdk.close()
    stats = sdk.local.reports.stats
    assert (stats.sent, stats.pending, stats.dropped) == (stats.submitted, 0, {})


def editor_rows(page: str) -> Sequence[str]:
    return page.split('<li class="rule')[1:]


def test_the_dashboard_editor_offers_shows_and_saves_it(
    client: falcon.testing.TestClient, admin: Admin
) -> None:
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "prefixed", RULES)
    person = DashClient(client)
    assert person.sign_in().status_code == 303
    path = f"/dashboard/environments/{tenant.environment_id}/flags/prefixed"

    page = person.get(path).text
    assert 'value="add:PREFIX"' in page
    first = editor_rows(page)[0]
    assert "matches identifiers that start with a prefix" in first
    assert '<label for="rule-0-prefix">Identifier prefix</label>' in first
    assert 'name="rule_prefix" value="vip-"' in first

    form = [("enabled", "on"), ("rule_type", "PREFIX"), ("rule_value", "true"),
            ("rule_type", "STATIC"), ("rule_value", "false")]  # fmt: skip
    columns = [("rule_prefix", "beta-"), ("rule_prefix", ""), ("rule_segment", ""),
               ("rule_segment", ""), ("rule_percentage", ""), ("rule_percentage", "")]  # fmt: skip
    added = person.post(path, [*form, *columns, ("op", "add:PREFIX")])
    assert added.status_code == 200
    assert len(editor_rows(added.text)) == 3

    refused = person.post(path, [*form, ("rule_prefix", ""), ("rule_prefix", ""), ("op", "save")])
    assert refused.status_code == 400
    assert "Prefix must be a string of 1 to 64 characters" in refused.text

    saved = person.post(path, [*form, *columns, ("op", "save")])
    assert saved.status_code == 303, saved.text
    stored = admin.request("GET", f"/environments/{tenant.environment_id}/flags/prefixed")
    assert stored["rules"] == [{"type": "PREFIX", "prefix": "beta-", "value": True}, RULES[1]]


def test_registering_it_touched_no_other_table_by_hand() -> None:
    """What the service knows of it came from the class alone."""
    assert RULE_TYPES["PREFIX"] is PrefixRule
    assert Result(True, "PREFIX") in RESULTS and Result(False, "PREFIX") in RESULTS


def test_a_name_is_registered_once_and_only_the_last_type_can_be_forgotten() -> None:
    with pytest.raises(ValueError, match="not a new name"):
        register_rule_type(PrefixRule)
    with pytest.raises(ValueError, match="not the rule type registered last"):
        unregister_rule_type("STATIC")
