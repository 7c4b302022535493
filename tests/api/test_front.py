"""``api.web.front``: a valid single evaluate answered before Falcon, answer for answer as Falcon's.

Every request below goes twice through one set of services: once to the Falcon app alone and
once to the front. The two answers must be the same status, the same header fields in the
same order and the same body (the evaluation id aside: each answer has its own, and both must
verify), with the same metering and the same request tally. The requests a valid evaluate
must not reach Falcon; every other one must, with its body intact.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field

import msgspec
import pytest

from api.metering.meter import month_of
from api.web.app import create_asgi_app
from api.web.errors import FRONT_FAILURE, HandedOn, ServiceUnavailable
from tests.support.admin import Admin, Tenant

NOW = 1_800_000_000.5
ID = re.compile(rb'"evaluationId":"([A-Za-z0-9_-]+)"')


@dataclass
class Ask:
    """One HTTP request as an ASGI server hands it over."""

    body: bytes = b'{"flagKey":"on","userIdentifier":"u-1"}'
    headers: list[tuple[bytes, bytes]] | None = None
    """None: the key's ``Authorization``, JSON and the body's length."""
    chunks: list[bytes] | None = None
    """The body's events; None: one event with all of it."""
    method: str = "POST"
    path: str = "/v1/evaluate"
    query: bytes = b""
    extra: list[tuple[bytes, bytes]] = field(default_factory=list)


@dataclass
class Answer:
    status: int | None
    headers: list[tuple[bytes, bytes]]
    body: bytes


class CountingApp:
    """The Falcon app, counting what reaches it."""

    def __init__(self, app) -> None:
        self.app = app
        self.calls = 0

    async def __call__(self, scope, receive, send) -> None:
        self.calls += 1
        await self.app(scope, receive, send)


def default_headers(ask: Ask, api_key: str) -> list[tuple[bytes, bytes]]:
    """The key's ``Authorization``, JSON and the body's length."""
    return [
        (b"host", b"localhost"),
        (b"authorization", b"ApiKey " + api_key.encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(ask.body)).encode()),
    ]


def call(app, ask: Ask, api_key: str, failure: Exception | None = None) -> Answer:
    """``failure``: the request comes as the worker hands on one ``answer_now`` failed on."""
    headers = ask.headers if ask.headers is not None else default_headers(ask, api_key)
    chunks = ask.chunks if ask.chunks is not None else [ask.body]
    events = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": ask.method,
        "scheme": "http",
        "path": ask.path,
        "raw_path": ask.path.encode(),
        "query_string": ask.query,
        "root_path": "",
        "headers": headers + ask.extra,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    if failure is not None:
        scope[FRONT_FAILURE] = failure
    sent: list[dict] = []

    async def receive() -> dict:
        return events.pop(0) if events else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    if not sent:
        return Answer(None, [], b"")
    start, body = sent
    return Answer(start["status"], list(start["headers"]), body.get("body", b""))


@pytest.fixture
def setup(services, admin: Admin):
    tenant = admin.tenant(plan="enterprise", limit=1_000)
    env = tenant.environment_id
    admin.segment(tenant.organization_id, "beta", ["member"])
    admin.flag(env, "on", [{"type": "STATIC", "value": True}])
    admin.flag(
        env,
        "rollout",
        [
            {"type": "SEGMENT", "segment": "beta", "value": True},
            {"type": "PERCENTAGE", "percentage": 50, "value": True},
        ],
    )
    admin.flag(env, "off", [{"type": "STATIC", "value": True}], enabled=False)
    services.config.refresh()
    services.clock = lambda: NOW
    front = create_asgi_app(services)
    falcon_app = CountingApp(front.app)
    front._app = falcon_app
    return services, tenant, front, falcon_app


def usage(services, tenant: Tenant) -> int:
    return services.meter.usage(tenant.organization_id, month_of(NOW))


def answered(services) -> Counter[tuple[str, str]]:
    """Every answer tallied so far, by route and status, as ``/metrics`` shows them. Flushed
    here: the worker's housekeeping thread flushes too, at any moment, so what is pending is
    no measure."""
    services.tallies.flush()
    return Counter(
        {
            (sample.labels["route"], sample.labels["status"]): int(sample.value)
            for metric in services.metrics.requests.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        }
    )


def tallied(services, since: Counter[tuple[str, str]]) -> Counter[tuple[str, str]]:
    """The answers tallied since ``since`` (an ``answered`` reading)."""
    return answered(services) - since


def both(setup, ask: Ask) -> tuple[Answer, Answer, bool]:
    """Falcon's answer, the front's, and whether the front handed the request to Falcon."""
    services, tenant, front, falcon_app = setup
    before, counted = usage(services, tenant), answered(services)
    by_falcon = call(falcon_app.app, ask, tenant.api_key)
    falcon_metered = usage(services, tenant) - before
    falcon_tally = tallied(services, counted)
    calls = falcon_app.calls
    counted = answered(services)
    by_front = call(front, ask, tenant.api_key)
    assert usage(services, tenant) - before - falcon_metered == falcon_metered
    assert tallied(services, counted) == falcon_tally
    return by_falcon, by_front, falcon_app.calls > calls


def same(services, by_falcon: Answer, by_front: Answer) -> None:
    """Equal but for the evaluation ids, which must each verify."""
    assert by_front.status == by_falcon.status
    assert by_front.headers == by_falcon.headers
    ids = [ID.search(answer.body) for answer in (by_falcon, by_front)]
    assert (ids[0] is None) == (ids[1] is None)
    if ids[0] is not None:
        for found in ids:
            services.ids.verify(found.group(1).decode())
        assert ids[0].group(1) != ids[1].group(1)
    assert ID.sub(b"", by_front.body) == ID.sub(b"", by_falcon.body)


def fields(
    authorization: bytes | None = b"ApiKey {key}",
    content_type: bytes = b"application/json",
    length: bytes | None = b"39",
) -> list[tuple[bytes, bytes]]:
    """Request header fields (``{key}``: the tenant's key); None leaves a field out."""
    named = [(b"authorization", authorization), (b"content-type", content_type)]
    return [(n, v) for n, v in [*named, (b"content-length", length)] if v is not None]


ANSWERED_BY_THE_FRONT = {
    "static": Ask(),
    "with an sdk": Ask(body=b'{"flagKey":"on","userIdentifier":"u-1","sdk":"py/1.0"}'),
    "segment": Ask(body=b'{"flagKey":"rollout","userIdentifier":"member"}'),
    "percentage": Ask(body=b'{"flagKey":"rollout","userIdentifier":"u-7"}'),
    "disabled": Ask(body=b'{"flagKey":"off","userIdentifier":"u-1"}'),
    "no such flag": Ask(body=b'{"flagKey":"nope","userIdentifier":"u-1"}'),
    "unknown fields": Ask(body=b'{"flagKey":"on","userIdentifier":"u-1","x":[1,{}]}'),
    "attributes": Ask(
        body=b'{"flagKey":"rollout","userIdentifier":"u-7","attributes":'
        b'{"plan":"pro","seats":12,"beta":true,"tags":["a","b"]}}'
    ),  # the Python path decides (the native code reads no attributes), through the front
    "attributes of a segment member": Ask(
        body=b'{"flagKey":"rollout","userIdentifier":"member","attributes":{"plan":"pro"}}'
    ),
    "empty attributes": Ask(body=b'{"flagKey":"on","userIdentifier":"u-1","attributes":{}}'),
    "null attributes": Ask(body=b'{"flagKey":"on","userIdentifier":"u-1","attributes":null}'),
    "unicode user": Ask(body='{"flagKey":"rollout","userIdentifier":"ü-✓-𝄞"}'.encode()),
    "json with a charset": Ask(headers=fields(content_type=b"application/json; charset=utf-8")),
    "a +json type": Ask(headers=fields(content_type=b"application/vnd.flagsight+json")),
    "spaces after the key": Ask(headers=fields(b"ApiKey {key}  ", length=b"0039")),
    "a query string": Ask(query=b"debug=1"),
    "other fields": Ask(extra=[(b"accept", b"*/*"), (b"x-request-id", b"r-1")]),
}


def with_key(ask: Ask, api_key: str) -> Ask:
    """A copy of ``ask`` (shared by every test it is a parameter of) with the tenant's key."""
    if ask.headers is None:
        return ask
    headers = [(n, v.replace(b"{key}", api_key.encode())) for n, v in ask.headers]
    return dataclasses.replace(ask, headers=headers)


@pytest.mark.parametrize("ask", ANSWERED_BY_THE_FRONT.values(), ids=ANSWERED_BY_THE_FRONT)
def test_a_valid_evaluate_is_answered_by_the_front_as_falcon_would(setup, ask: Ask) -> None:
    services, tenant, _, _ = setup
    by_falcon, by_front, handed_on = both(setup, with_key(ask, tenant.api_key))
    assert by_falcon.status == 200
    assert not handed_on
    same(services, by_falcon, by_front)
    assert [name for name, _ in by_front.headers] == [
        b"content-type",
        b"ratelimit-policy",
        b"ratelimit",
        b"content-length",
    ]


LONG = b"x" * 129
HANDED_TO_FALCON = {
    "trailing slash": (Ask(path="/v1/evaluate/"), 200),
    "GET": (Ask(method="GET", body=b""), 405),
    "no Authorization": (Ask(headers=fields(None)), 401),
    "bearer": (Ask(headers=fields(b"Bearer {key}")), 401),
    "empty key": (Ask(headers=fields(b"ApiKey ")), 401),
    "two spaces after the scheme": (Ask(headers=fields(b"ApiKey  {key}")), 401),
    "a tab after the scheme": (Ask(headers=fields(b"ApiKey \t{key}")), 401),
    "a tab for the space": (Ask(headers=fields(b"ApiKey\t{key}")), 401),
    "unknown key": (Ask(headers=fields(b"ApiKey fsk_nope")), 401),
    "Authorization twice": (Ask(headers=[(b"authorization", b"ApiKey {key}"), *fields()]), 401),
    "not JSON": (Ask(headers=fields(content_type=b"text/plain")), 415),
    "no Content-Length": (Ask(headers=fields(length=None)), 200),
    "Content-Length not a number": (Ask(headers=fields(length=b"-39")), 400),
    "over the limit": (Ask(headers=fields(length=b"1000000")), 413),
    "cut short": (Ask(headers=fields(length=b"60")), 400),
    "in two pieces": (Ask(chunks=[b'{"flagKey":"on",', b'"userIdentifier":"u-1"}']), 200),
    "malformed": (Ask(body=b'{"flagKey":"on",'), 400),
    "no user": (Ask(body=b'{"flagKey":"on"}'), 400),
    "empty user": (Ask(body=b'{"flagKey":"on","userIdentifier":""}'), 400),
    "flag key too long": (
        Ask(body=b'{"flagKey":"' + LONG + b'","userIdentifier":"u"}'),
        400,
    ),
    "sdk not a string": (Ask(body=b'{"flagKey":"on","userIdentifier":"u","sdk":3}'), 400),
    "not an object": (Ask(body=b'["on","u-1"]'), 400),
    "attributes not an object": (
        Ask(body=b'{"flagKey":"on","userIdentifier":"u","attributes":"pro"}'),
        400,
    ),
    "a reserved attribute": (
        Ask(body=b'{"flagKey":"on","userIdentifier":"u","attributes":{"userIdentifier":"x"}}'),
        400,
    ),
    "an attribute too long": (
        Ask(body=b'{"flagKey":"on","userIdentifier":"u","attributes":{"a":"%s"}}' % (b"x" * 1025)),
        400,
    ),
    "an attribute no double holds": (
        Ask(body=b'{"flagKey":"on","userIdentifier":"u","attributes":{"a":1e999}}'),
        400,
    ),
    "invalid UTF-8": (Ask(body=b'{"flagKey":"on","userIdentifier":"\xff"}'), 400),
    "lone surrogate": (Ask(body=b'{"flagKey":"rollout","userIdentifier":"\\ud800x"}'), 400),
}


@pytest.mark.parametrize(("ask", "status"), HANDED_TO_FALCON.values(), ids=list(HANDED_TO_FALCON))
def test_every_other_request_is_falcons(setup, ask: Ask, status: int) -> None:
    services, tenant, _, _ = setup
    by_falcon, by_front, handed_on = both(setup, with_key(ask, tenant.api_key))
    assert by_falcon.status == status
    assert handed_on
    same(services, by_falcon, by_front)


def test_a_disconnect_before_the_body_is_falcons(setup) -> None:
    services, tenant, front, falcon_app = setup
    ask = Ask(chunks=[])
    by_falcon, by_front, handed_on = both(setup, ask)
    assert by_falcon.status is None and by_front.status is None
    assert handed_on


def test_a_key_whose_environment_is_gone_is_falcons(setup) -> None:
    services, tenant, front, falcon_app = setup
    caller = services.config.caller(tenant.api_key)  # memoised in the config's snapshot
    gone = dataclasses.replace(caller, environment=None)  # as in a snapshot taken mid-delete
    services.config._snapshot.callers[tenant.api_key] = gone
    by_falcon, by_front, handed_on = both(setup, Ask())
    assert by_falcon.status == 401
    assert handed_on
    same(services, by_falcon, by_front)


def test_past_the_hard_threshold_the_front_answers_the_plan_limit(services, admin) -> None:
    tenant = admin.tenant(plan="enterprise", limit=2)
    admin.flag(tenant.environment_id, "on", [{"type": "STATIC", "value": True}])
    services.config.refresh()
    services.clock = lambda: NOW
    front = create_asgi_app(services)
    answers = [msgspec.json.decode(call(front, Ask(), tenant.api_key).body) for _ in range(4)]
    # the hard threshold of a limit of 2 is 110 %: 2 served, then refused
    assert [a["error"] and a["error"]["type"] for a in answers] == [
        None,
        None,
        "PLAN_LIMIT_EXCEEDED",
        "PLAN_LIMIT_EXCEEDED",
    ]
    assert usage(services, tenant) == 2


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        (RuntimeError("broken for the test"), 500),
        (ServiceUnavailable("down for the test", retry_after_s=7), 503),
    ],
    ids=["unhandled", "an HTTP error"],
)
def test_an_error_while_serving_is_answered_by_falcon(
    setup, monkeypatch, caplog, failure: Exception, status: int
) -> None:
    services, tenant, front, falcon_app = setup

    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(front._resource._server, "serve_one", broken)
    counted = answered(services)
    by_falcon, by_front, handed_on = both(setup, Ask())
    assert by_falcon.status == status
    assert handed_on
    same(services, by_falcon, by_front)
    assert tallied(services, counted) == Counter({("/v1/evaluate", str(status)): 2})
    if status == 500:  # logged by Falcon, as every unhandled error
        logged = [r for r in caplog.records if r.name == "falcon" and r.exc_info]
        assert [r.exc_info[1] for r in logged] == [failure, failure]
    else:
        assert (b"retry-after", b"7") in by_front.headers


def test_long_header_values_are_not_remembered(setup) -> None:
    services, tenant, front, falcon_app = setup
    junk = b"ApiKey " + b"k" * 300
    by_falcon, by_front, handed_on = both(setup, Ask(headers=fields(junk)))
    assert by_front.status == 401 and handed_on
    same(services, by_falcon, by_front)
    assert junk not in front._api_keys
    call(front, Ask(), tenant.api_key)
    assert f"ApiKey {tenant.api_key}".encode() in front._api_keys


def call_now(front, ask: Ask, api_key: str) -> Answer | None:
    """The request as the worker hands a whole one to ``answer_now`` (``api.server.http_worker``)."""
    ask = with_key(ask, api_key)
    headers = ask.headers if ask.headers is not None else default_headers(ask, api_key)
    answered = front.answer_now(ask.method, ask.path, headers + ask.extra, ask.body)
    return None if answered is None else Answer(200, answered[0], answered[1])


@pytest.mark.parametrize("ask", ANSWERED_BY_THE_FRONT.values(), ids=ANSWERED_BY_THE_FRONT)
def test_answer_now_answers_a_whole_request_as_the_asgi_front_does(setup, ask: Ask) -> None:
    services, tenant, front, falcon_app = setup
    by_asgi = call(front, with_key(ask, tenant.api_key), tenant.api_key)
    before, counted = usage(services, tenant), answered(services)
    by_now = call_now(front, ask, tenant.api_key)
    assert by_now is not None
    assert usage(services, tenant) - before == 1
    assert tallied(services, counted) == Counter({("/v1/evaluate", "200"): 1})
    same(services, by_asgi, by_now)
    assert falcon_app.calls == 0


ONE_PIECE_HANDED_ON = {
    name: ask for name, (ask, _) in HANDED_TO_FALCON.items() if ask.chunks is None
}


@pytest.mark.parametrize("ask", ONE_PIECE_HANDED_ON.values(), ids=list(ONE_PIECE_HANDED_ON))
def test_answer_now_leaves_every_other_request_to_the_asgi_app(setup, ask: Ask) -> None:
    services, tenant, front, falcon_app = setup
    before, counted = usage(services, tenant), answered(services)
    assert call_now(front, ask, tenant.api_key) is None
    assert (usage(services, tenant), tallied(services, counted)) == (before, Counter())


def test_answer_now_hands_an_error_while_serving_on(setup, monkeypatch) -> None:
    services, tenant, front, falcon_app = setup
    failure = RuntimeError("broken for the test")
    counted = answered(services)

    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(front._resource._server, "serve_one", broken)
    with pytest.raises(HandedOn) as raised:
        call_now(front, Ask(), tenant.api_key)
    assert raised.value.failure is failure
    assert tallied(services, counted) == Counter()  # Falcon counts the answer it gives


def test_the_asgi_front_hands_a_failure_from_answer_now_to_falcon(setup, caplog) -> None:
    """The worker calls the app with the failure in the scope: Falcon answers it, unserved."""
    services, tenant, front, falcon_app = setup
    failure = RuntimeError("broken for the test")
    before, counted = usage(services, tenant), answered(services)
    answer = call(front, Ask(), tenant.api_key, failure)
    assert answer.status == 500 and falcon_app.calls == 1
    assert usage(services, tenant) == before
    assert tallied(services, counted) == Counter({("/v1/evaluate", "500"): 1})
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [failure]
