"""A single evaluate with attributes is served natively too (the native code reads none: it is
given the segments as the user sees them), and gives what it gives without them wherever no
rule reads an attribute: the same answers and the same events, through the app as a server
runs it (the front, then Falcon), for random flags and users. Bulk and OFREP with the same
attributes answer alike. With segments of conditions, answers and events are the same with
the native path and without it."""

from __future__ import annotations

import random
from typing import Any

import falcon.testing
import pytest

from api.serving import evaluations
from api.serving.services import Services
from tests.api.test_serving import Recording
from tests.native.test_fastpath import random_flag, random_text
from tests.support.admin import Admin

ATTRIBUTES = {"plan": "pro", "country": "DE", "seats": 12, "beta": True, "tags": ["a", "b"]}


class CountingNative:
    """The native module, counting the single evaluations it served."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.calls = 0

    def serve_one(self, *args: Any) -> Any:
        self.calls += 1
        return self._inner.serve_one(*args)


def answer_of(body: dict[str, Any]) -> tuple[Any, ...]:
    return body["value"], body["matchedRuleType"], body["error"]


@pytest.mark.parametrize("seed", range(2))
def test_with_attributes_the_native_path_answers_and_logs_as_without(
    client: falcon.testing.TestClient,
    admin: Admin,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
) -> None:
    rng = random.Random(seed)
    tenant = admin.tenant(plan="enterprise", limit=10**6)
    admin.segment(tenant.organization_id, "beta", ["member", "m-2"])
    admin.segment(tenant.organization_id, "staff", ["member"])
    flags = []
    for index in range(6):
        flag = random_flag(rng, ["beta", "staff"])
        key = f"f{index}"
        rules = [rule.to_json() for rule in flag.rules]
        admin.flag(tenant.environment_id, key, rules, enabled=flag.enabled, archived=flag.archived)
        flags.append(key)
    flags.append("missing")
    services.config.refresh()
    services.event_log = Recording(services.event_log)
    services.clock = lambda: 1_800_000_000.25
    spy = CountingNative(evaluations.fastpath) if evaluations.fastpath else None
    monkeypatch.setattr(evaluations, "fastpath", spy)
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    users = ["member", "m-2", *(random_text(rng, 1, 30) for _ in range(6))]
    asked = [(flag, user) for flag in flags for user in users]

    def single(flag: str, user: str, extra: dict[str, Any]) -> dict[str, Any]:
        body = {"flagKey": flag, "userIdentifier": user, **extra}
        answer = client.simulate_post("/v1/evaluate", json=body, headers=auth)
        assert answer.status_code == 200, answer.text
        return answer.json

    answers, logged = {}, {}
    for extra in ({}, {"attributes": ATTRIBUTES}):
        start = len(services.event_log.batches)
        answers[bool(extra)] = [answer_of(single(f, u, extra)) for f, u in asked]
        batches = services.event_log.batches[start:]
        logged[bool(extra)] = [b._replace(evaluation_id_prefix="") for b in batches]
        if spy is not None and not extra:
            served = spy.calls
    assert answers[True] == answers[False]
    assert logged[True] == logged[False]  # nothing of the attributes in the events
    if spy is not None:
        assert served > 0  # without attributes, the native path served the flags it knows
        assert spy.calls == 2 * served  # with them, the same flags

    by_flag: dict[str, dict[str, tuple[Any, ...]]] = {}
    for (flag, user), answer in zip(asked, answers[True], strict=True):
        by_flag.setdefault(flag, {})[user] = answer
    for flag, wanted in by_flag.items():
        body = {"flagKey": flag, "userIdentifiers": users,
                "attributes": {user: ATTRIBUTES for user in users[::2]}}  # fmt: skip
        many = client.simulate_post("/v1/evaluate/bulk", json=body, headers=auth).json
        assert {user: answer_of(entry) for user, entry in many.items()} == wanted


def test_segments_of_conditions_answer_and_log_alike_with_and_without_the_native_path(
    client: falcon.testing.TestClient,
    admin: Admin,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Single evaluates with random attributes against flags whose segments have conditions
    (listed and excluded users among them): the native path serves each, and answers and
    logs what the Python path does."""
    rng = random.Random(7)
    tenant = admin.tenant(plan="enterprise", limit=10**6)
    admin.request("PUT", f"/organizations/{tenant.organization_id}/segments/pro", {
        "userIdentifiers": ["listed"], "excludedUserIdentifiers": ["excluded"],
        "conditions": [
            {"attribute": "plan", "operator": "IN", "values": ["pro", "team"]},
            {"attribute": "seats", "operator": "GREATER_OR_EQUAL", "values": [5]},
            {"attribute": "email", "operator": "MATCHES", "values": ["@example\\\\.com$"]},
        ],
    }, expect=200)  # fmt: skip
    admin.request("PUT", f"/organizations/{tenant.organization_id}/segments/v2", {
        "conditions": [{"attribute": "version", "operator": "SEMVER_GREATER_THAN",
                        "values": ["2.0.0"]}],
    }, expect=200)  # fmt: skip
    admin.flag(tenant.environment_id, "a", [{"type": "SEGMENT", "segment": "pro"},
                                            {"type": "PERCENTAGE", "percentage": 50}])  # fmt: skip
    admin.flag(tenant.environment_id, "b", [{"type": "SEGMENT", "segment": "v2"},
                                            {"type": "SEGMENT", "segment": "pro"}])  # fmt: skip
    services.config.refresh()
    services.event_log = Recording(services.event_log)
    services.clock = lambda: 1_800_000_000.25
    auth = {"Authorization": f"ApiKey {tenant.api_key}"}
    asked = []
    for index in range(120):
        attributes = {
            "plan": rng.choice(["pro", "team", "free", 3, True]),
            "seats": rng.choice([4, 5, 5.5, 100, "5"]),
            "email": rng.choice(["a@example.com", "b@example.org", ["x@example.com"]]),
            "version": rng.choice(["1.9.0", "2.0.0", "2.0.1", "2.1.0-rc.1", "x"]),
        }
        for name in rng.sample(sorted(attributes), rng.randint(0, 2)):
            del attributes[name]
        user = rng.choice(["listed", "excluded", f"user-{index}"])
        asked.append((rng.choice(["a", "b"]), user, attributes))
    seen = {}
    for native in (True, False):
        spy = CountingNative(evaluations.fastpath) if native and evaluations.fastpath else None
        monkeypatch.setattr(evaluations, "fastpath", spy)
        start = len(services.event_log.batches)
        answers = []
        for flag, user, attributes in asked:
            body = {"flagKey": flag, "userIdentifier": user, "attributes": attributes}
            answer = client.simulate_post("/v1/evaluate", json=body, headers=auth)
            assert answer.status_code == 200, answer.text
            answers.append(answer_of(answer.json))
        batches = services.event_log.batches[start:]
        seen[native] = (answers, [b._replace(evaluation_id_prefix="") for b in batches])
        if spy is not None:
            assert spy.calls == len(asked)
    assert seen[True] == seen[False]
    decided = {answer[:2] for answer in seen[True][0]}
    assert decided >= {(True, "SEGMENT"), (True, "PERCENTAGE"), (False, None)}
