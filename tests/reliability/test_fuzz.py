"""Schemathesis over ``/openapi.json`` against a real ``flagsight serve``: every public, OFREP,
operations and admin operation; no 5xx and every response as the document describes it.

Bounded to run in ``make test``: one server for the module, a few derandomized examples per
operation. Path parameters are swapped for a real tenant's ids half of the time, so that the
generated bodies reach the handlers behind the 404s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from api.web.jsonio import encode
from api.web.openapi.document import openapi_document
from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin
from tests.support.server import GunicornServer

EXAMPLES_PER_OPERATION = 25

STATE_OR_ORDER_RULES = {
    ("PATCH", "/admin/v1/organizations/{orgId}"): "a limit alone needs the enterprise plan: "
    "it depends on the organization's current plan, which other calls of the run change",
    ("PUT", "/admin/v1/environments/{envId}/flags/{flagKey}/rollout"): "steps increase and end "
    "at 100: an order between items, which JSON Schema cannot state",
    ("POST", "/v1/local/report"): "an evaluation's value, rule type and error type must be an "
    "outcome the core can give, and its id one of a block granted to the key",
    ("POST", "/v1/local/quota/return"): "at most what the grant held, whose count is signed in "
    "its prefix",
    ("PUT", "/admin/v1/environments/{envId}/flags/{flagKey}/metrics"): "a followed metric must "
    "exist in the organization, and the run's own DELETE of the metric it is aimed at may come "
    "first",
    ("POST", "/admin/v1/organizations/{orgId}/webhooks"): "the host must be one the HTTP client "
    "can use (labels of at most 63 characters, as it decodes and encodes them) and no private, "
    "loopback or reserved address (also spelled in IPv6, or percent-encoded): rules on what the "
    "host means, which a pattern cannot state",
}
"""Operations whose schema-valid bodies the server may still refuse with 400, and why; every
other check (no 5xx, documented statuses and bodies, negative data refused) runs on them."""

# Every default check runs, positive data acceptance included: no 5xx, documented status
# codes, content types, headers and bodies, schema-violating requests refused and schema-valid
# ones accepted. The document states the plan/limit rules and the evaluation id's form; what no
# schema can say (an id must be one this service signed, a rule's segment must exist) is what
# ``aim`` puts into the generated bodies, as a real client would.


@dataclass(frozen=True)
class World:
    """A tenant with a flag, a segment, a metric and insights on, for the fuzzer to aim at."""

    api_key: str
    ids: dict[str, str]
    evaluation_id: str


@pytest.fixture(scope="module")
def world(module_server: GunicornServer, module_server_admin: Admin) -> World:
    tenant = module_server_admin.tenant(plan="enterprise", limit=10**9, environment="fuzz")
    module_server_admin.segment(tenant.organization_id, "beta", ["u1", "u2"])
    module_server_admin.flag(tenant.environment_id, "f", [{"type": "SEGMENT", "segment": "beta"}])
    spare = module_server_admin.request(
        "POST", f"/environments/{tenant.environment_id}/api-keys", {"name": "spare"}, expect=201
    )
    metric = {"name": "M", "event": "m", "kind": "conversion", "windowHours": 1, "better": "higher"}
    module_server_admin.request(
        "PUT", f"/organizations/{tenant.organization_id}/metrics/m", metric, expect=201
    )
    module_server.wait_config_everywhere()  # every worker serves the new keys and flags
    issued = requests.post(
        f"{module_server.url}/v1/evaluate",
        json={"flagKey": "f", "userIdentifier": "u1"},
        headers={"Authorization": f"ApiKey {tenant.api_key}"},
        timeout=10,
    ).json()["evaluationId"]
    ids = {
        "orgId": tenant.organization_id,
        "envId": tenant.environment_id,
        "keyId": spare["id"],
        "segmentKey": "beta",
        "flagKey": "f",
        "key": "f",
        "metricKey": "m",
    }
    return World(tenant.api_key, ids, issued)


# Loaded when pytest collects the module, before any server exists (schemathesis' lazy
# ``from_fixture`` fails on this pytest); the first test shows the server serves this document.
schema = schemathesis.openapi.from_dict(openapi_document()).exclude(path_regex=r"/stream$")
"""Event streams never end, so no answer can be validated whole: ``tests/sdk/test_local_mode.py``
and ``tests/ofrep`` test them over sockets."""

schema.config.checks.negative_data_rejection.expected_statuses = [
    *schema.config.checks.negative_data_rejection.expected_statuses,
    "413",
]
"""A schema-violating body may also be refused for its size before it is read whole: 413, the
body limit's answer (a generated context of long arrays, in OFREP's own error body)."""


def test_the_server_serves_the_fuzzed_document(module_server: GunicornServer) -> None:
    served = requests.get(f"{module_server.url}/openapi.json", timeout=10).json()
    assert served == json.loads(encode(openapi_document()))
    assert any(path.startswith("/ofrep/") for path in served["paths"])
    assert any(path.startswith("/admin/") for path in served["paths"])


def negative(case: Any, location: str) -> bool:
    """Whether schemathesis made this part of the request invalid on purpose."""
    component = case.meta.components.get(location) if case.meta else None
    return component is not None and component.mode.value == "negative"


def aim(case: Any, world: World) -> None:
    """Replace each path parameter by the real one when its generated value hashes even
    (never one made invalid on purpose: the check expects it refused)."""
    if not negative(case, "body") and isinstance(case.body, dict):
        aim_body(case.body, world)
    if negative(case, "path"):
        return
    for name, value in (case.path_parameters or {}).items():
        digest = hashlib.blake2b(repr(value).encode(), digest_size=1).digest()[0]
        if name in world.ids and digest % 2 == 0:
            case.path_parameters[name] = world.ids[name]


def aim_body(body: dict[str, Any], world: World) -> None:
    """Evaluation ids this service issued, segments and metrics that exist, tracked events of
    the last 24 hours: the checks no schema states."""
    if "evaluationId" in body:
        body["evaluationId"] = world.evaluation_id
    if isinstance(body.get("idPrefix"), str):  # a local grant's block: a bulk id's prefix
        body["idPrefix"] = world.evaluation_id[:42]
    for row in body.get("evaluations") or []:
        if isinstance(row, list) and row and isinstance(row[0], str):
            row[0] = world.evaluation_id
    for item in body.get("feedbacks") or []:
        if isinstance(item, dict) and "evaluationId" in item:
            item["evaluationId"] = world.evaluation_id
    for event in body.get("events") or []:  # a tracked event's time, from a client's clock
        if isinstance(event, dict) and isinstance(event.get("at"), str):
            event["at"] = datetime.now(UTC).isoformat()
    for rule in body.get("rules") or []:
        if isinstance(rule, dict) and (rule.get("type") == "SEGMENT" or "segment" in rule):
            rule["segment"] = world.ids["segmentKey"]  # a percentage's segment too
    if isinstance(body.get("metrics"), list) and body["metrics"]:  # the metrics a flag follows
        body["metrics"] = [world.ids["metricKey"]]
    if isinstance(body.get("flag"), dict):  # a schedule's flag: the same rules, one level down
        aim_body(body["flag"], world)
    users, attributes = body.get("userIdentifiers"), body.get("attributes")
    if isinstance(users, list) and isinstance(attributes, dict):  # a bulk evaluate's: each
        users += [user for user in attributes if user not in users]  # user one of the request


def credentials(case: Any, world: World) -> dict[str, str]:
    """The tenant's API key or the admin token, unless the headers are negative on purpose."""
    path = case.operation.path
    if negative(case, "header"):
        return {}
    if path.startswith("/admin/"):
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    if path.startswith(("/v1/", "/ofrep/")):
        return {"Authorization": f"ApiKey {world.api_key}"}
    return {}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(
    case: Any, module_server: GunicornServer, world: World
) -> None:
    aim(case, world)
    operation = (case.operation.method.upper(), case.operation.path)
    excluded = [positive_data_acceptance] if operation in STATE_OR_ORDER_RULES else []
    with requests.Session() as session:
        case.call_and_validate(
            base_url=module_server.url,
            session=session,
            headers=credentials(case, world),
            excluded_checks=excluded,
            timeout=30,
        )


def test_an_integral_number_is_an_integer_limit(client: Any) -> None:
    """Fuzz finding: JSON Schema (and JSON) call 12073.0 an integer; the API refused it."""
    answer = client.simulate_post(
        "/admin/v1/organizations",
        json={"name": "n", "plan": "enterprise", "monthlyEvaluationLimit": 12073.0},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert answer.status_code == 201, answer.text
    assert answer.json["monthlyEvaluationLimit"] == 12073
    fraction = client.simulate_post(
        "/admin/v1/organizations",
        json={"name": "n", "plan": "enterprise", "monthlyEvaluationLimit": 12073.5},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert fraction.status_code == 400


# -- malformed bodies and forms on every route, against the real server ------------------------

DEEP = 3_000
MALFORMED_BODIES: dict[str, tuple[str, bytes]] = {
    "empty": ("application/json", b""),
    "truncated": ("application/json", b'{"flagKey": "f", "userIdentifier": '),
    "invalid UTF-8 in a string": ("application/json", b'{"flagKey":"\xff\xfe","key":"\xc3"}'),
    "invalid UTF-8 in a name": ("application/json", b'{"\xff":1}'),
    "lone surrogate escape": ("application/json", b'{"flagKey":"\\ud800","name":"\\udfff"}'),
    "NUL bytes": ("application/json", b'{"flagKey":"a\\u0000b","name":"\\u0000"}'),
    "arrays 3,000 deep": ("application/json", b"[" * DEEP + b"]" * DEEP),
    "objects 3,000 deep": ("application/json", b'{"a":' * DEEP + b"1" + b"}" * DEEP),
    "400-digit numbers": (
        "application/json",
        b'{"percentage":%s,"latencyMs":%s,"monthlyEvaluationLimit":%s,"result":true}'
        % ((b"9" * 400,) * 3),
    ),
    "out-of-range exponent": ("application/json", b'{"latencyMs":1e999,"percentage":-1e999}'),
    "NaN and Infinity": ("application/json", b'{"latencyMs":NaN,"percentage":Infinity}'),
    "every type wrong": (
        "application/json",
        b'{"flagKey":1,"userIdentifier":[],"userIdentifiers":"u","feedbacks":{},"enabled":"yes",'
        b'"rules":"none","plan":7,"name":{},"key":null,"context":[],"evaluationId":false}',
    ),
    "rules of every wrong shape": (
        "application/json",
        b'{"enabled":true,"rules":[1,null,{},{"type":"NOPE"},{"type":"SEGMENT"},'
        b'{"type":"PERCENTAGE","percentage":"50"},{"type":"STATIC","value":"true"}]}',
    ),
    "a top-level string": ("application/json", b'"just a string"'),
    "a top-level number": ("application/json", b"1" * 500),
    "duplicate keys": ("application/json", b'{"flagKey":"a","flagKey":1,"name":"x","name":[]}'),
    "10,001 user identifiers": (
        "application/json",
        b'{"flagKey":"f","userIdentifiers":[%s]}' % b",".join([b'"u"'] * 10_001),
    ),
    "501 feedbacks": ("application/json", b'{"feedbacks":[%s]}' % b",".join([b"{}"] * 501)),
    "a form where JSON is expected": ("application/x-www-form-urlencoded", b"a=1&b=%ZZ"),
    "JSON with a charset and junk": ("application/json; charset=latin-1; x", b"{\xe9}"),
    "a form with bad percent-escapes": ("application/x-www-form-urlencoded", b"name=%ff%fe%&key=%"),
    "a form of 2,001 fields": (
        "application/x-www-form-urlencoded",
        b"&".join(b"f%d=x" % i for i in range(2_001)),
    ),
    "a form with a 5,000-digit limit": (
        "application/x-www-form-urlencoded",
        b"name=n&plan=enterprise&monthly_limit=" + b"9" * 5_000,
    ),
    "a form with CR/LF in next": (
        "application/x-www-form-urlencoded",
        b"admin_token=x&next=%2Fdashboard%2Fa%0D%0ASet-Cookie%3A%20x%3D1",
    ),
    "a form with unicode digits": (
        "application/x-www-form-urlencoded",
        b"name=n&plan=enterprise&monthly_limit=%C2%B2&percentage=%D9%A3",
    ),
    "multipart without a boundary": ("multipart/form-data", b"--x\r\n\r\n--x--"),
    "multipart cut short": (
        "multipart/form-data; boundary=b",
        b'--b\r\nContent-Disposition: form-data; name="key"\r\n\r\nabc',
    ),
    "multipart with a non-UTF-8 file": (
        "multipart/form-data; boundary=b",
        b'--b\r\nContent-Disposition: form-data; name="key"\r\n\r\nk\r\n'
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\n\r\n'
        b"\xff\xfe\xfd\r\n--b--\r\n",
    ),
    "binary noise": ("application/octet-stream", bytes(range(256)) * 4),
    "no content type": ("", b'{"flagKey":"f","userIdentifier":"u"}'),
}


DASHBOARD_FORMS: dict[str, bytes] = {
    "an op out of range": b"op=up%3A99999999999999999999&enabled=on&rule_type=STATIC&rule_value=true",
    "an op of a negative index": b"op=remove%3A-1&rule_type=STATIC&rule_segment=&rule_percentage=",
    "an op of an unknown kind": b"op=add%3ANOPE&op=add%3ASEGMENT&op=",
    "an op of unicode digits": b"op=down%3A%D9%A3&rule_type=PERCENTAGE&rule_percentage=%C2%B2",
    "rule rows of unequal lengths": (
        b"op=save&rule_type=SEGMENT&rule_type=PERCENTAGE&rule_type=STATIC"
        b"&rule_segment=nope&rule_percentage=1e999&rule_value=maybe"
    ),
    "a percentage of NaN": b"op=save&rule_type=PERCENTAGE&rule_percentage=NaN&rule_value=true",
    "steps that go nowhere": b"steps=1%2C%2C100%2C-5%2C1e400&step_minutes=-1&metric=%00",
    "minutes of 5,000 digits": b"steps=1%2C100&step_minutes=" + b"9" * 5_000,
    "a 10,000-character key": b"key=" + b"k" * 10_000 + b"&name=" + b"n" * 10_000,
    "NUL and control characters": b"key=a%00b&name=%07%1b%5B2J&identifiers=u%00%0Du",
    "a boolean that is neither": b"enabled=perhaps&archived=%FF&insights=2",
    "a plan that does not exist": b"name=n&plan=platinum&monthly_limit=-1",
    "every field twice": b"key=a&key=b&name=a&name=b&plan=free&plan=enterprise&op=save&op=save",
}
"""Dashboard form fields with values no form offers, posted to every dashboard form route."""

BAD_COOKIES: dict[str, str] = {
    "a forged session": "flagsight_session=forged.value.here",
    "a session of 4,000 characters": "flagsight_session=" + "a" * 4_000,
    "a session of unicode digits": "flagsight_session=%C2%B2%D9%A3",
    "a sign-in cookie of junk": "flagsight_signin=%ff%fe; flagsight_session=",
    "two sessions": "flagsight_session=a; flagsight_session=b",
    "a cookie header of noise": ";;=;=x; \x7f=\x00",
}
"""Cookie headers sent with a well-formed request to every dashboard route."""


def dashboard_session(url: str, session: requests.Session) -> str:
    """Sign ``session`` in to the dashboard; the session's CSRF token."""
    page = session.get(f"{url}/dashboard/sign-in", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]*)"', page).group(1)
    session.post(
        f"{url}/dashboard/sign-in",
        data={"admin_token": ADMIN_TOKEN, "csrf_token": token},
        timeout=10,
        allow_redirects=False,
    )
    page = session.get(f"{url}/dashboard/organizations", timeout=10).text
    return re.search(r'name="csrf_token" value="([^"]*)"', page).group(1)


def every_route(services: Any) -> list[tuple[str, str]]:
    """(method, path template) of every responder of the app, from its own router."""
    from falcon.inspect import inspect_routes

    from api.web.app import create_app

    found = []
    for route in inspect_routes(create_app(services)):
        for method in route.methods:
            if method.method in ("GET", "POST", "PUT", "PATCH", "DELETE") and not method.internal:
                found.append((method.method, route.path))
    return sorted(found)


def test_malformed_bodies_and_forms_on_every_route_never_make_a_5xx(
    module_server: GunicornServer, world: World, services: Any
) -> None:
    """Every route gets every malformed body; the dashboard's routes also get forms with
    values no form offers and cookies no browser was given. Only the requests a handler
    reads a body from count towards the thousand: a GET ignores the body it is sent."""
    url = module_server.url
    routes = every_route(services)
    assert len(routes) >= 45
    workers = sorted(module_server.worker_pids())
    api = requests.Session()
    api.headers["Authorization"] = f"ApiKey {world.api_key}"
    admin = requests.Session()
    admin.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    person = requests.Session()
    csrf = dashboard_session(url, person)
    names = {**world.ids, "env_id": world.ids["envId"], "org_id": world.ids["orgId"],
             "flag_key": "f", "segment_key": "beta", "key_id": "key_00000000000000ff",
             "name": "dashboard.css"}  # fmt: skip
    with_body = 0
    server_errors: list[str] = []

    def send(session: requests.Session, method: str, path: str, label: str, **kwargs: Any) -> None:
        nonlocal with_body
        streaming = path.endswith("/stream")  # never ends: read the status, then hang up
        answer = session.request(
            method, url + path, timeout=30, allow_redirects=False, stream=streaming, **kwargs
        )  # fmt: skip
        if streaming:
            with contextlib.suppress(AttributeError, OSError):  # no drain of the stream
                answer.raw._fp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
            answer.close()
        with_body += method in ("POST", "PUT", "PATCH") and bool(kwargs.get("data"))
        if answer.status_code >= 500:
            server_errors.append(f"{method} {path} [{label}] -> {answer.status_code}")

    for method, template in routes:
        path = re.sub(r"\{(\w+)\}", lambda m: names.get(m.group(1), "x1"), template)
        dashboard = path.startswith("/dashboard")
        session = admin if path.startswith("/admin/") else person if dashboard else api
        for name, (media, body) in MALFORMED_BODIES.items():
            if dashboard and "x-www" in media:
                body += b"&csrf_token=" + csrf.encode()
            headers = {"Content-Type": media} if media else {}
            send(session, method, path, name, data=body, headers=headers)
        if not dashboard:
            continue
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        if method == "POST":
            for name, fields in DASHBOARD_FORMS.items():
                body = fields + b"&csrf_token=" + csrf.encode()
                send(person, method, path, name, data=body, headers=form)
        for name, cookie in BAD_COOKIES.items():
            body = b"name=n&key=k&csrf_token=" + csrf.encode() if method == "POST" else None
            with requests.Session() as stranger:
                send(stranger, method, path, name, data=body, headers={**form, "Cookie": cookie})
    assert with_body >= 1_000
    assert server_errors == []
    assert requests.get(f"{url}/healthz", timeout=10).status_code == 200
    assert sorted(module_server.worker_pids()) == workers  # no worker died on the way
