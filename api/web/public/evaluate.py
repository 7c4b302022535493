"""``POST /v1/evaluate`` and ``POST /v1/evaluate/bulk`` (spec 4.1, 4.2; contract 3)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, NamedTuple

import falcon
import falcon.asgi
import msgspec
from flagsight_core import Attributes
from flagsight_core.attribute_rules import known_names, valid_names, valid_names_by_user
from flagsight_core.context import MISSING, AttributeColumns
from flagsight_core.contract import BULK_MAX_USERS, FLAG_KEY_MAX, SDK_MAX, USER_IDENTIFIER_MAX

from api.controlplane.cache import Caller, EnvironmentConfig
from api.controlplane.model import KeyContext
from api.eventlog.schema import SOURCE_EVALUATE, SOURCE_EVALUATE_BULK
from api.native import fastpath
from api.serving.answers import encode_bulk_response, encode_single_response
from api.serving.evaluations import EvaluationServer
from api.serving.services import Services
from api.web.attributes import (
    ATTRIBUTES,
    ATTRIBUTES_BY_USER,
    check_attributes,
    check_attributes_by_user,
    check_users,
)
from api.web.auth import authenticate_api_key, authenticate_caller
from api.web.errors import FRONT_FAILURE, BadRequest, Unauthorized
from api.web.jsonio import (
    MALFORMED,
    decode_json_overflowing,
    optional_str,
    read_body,
    require_list,
    require_object,
    require_str,
    typed_error,
)
from api.web.public.quota import QuotaFields, QuotaHeaders


def key_environment(services: Services, key: KeyContext) -> EnvironmentConfig:
    """The environment a key is scoped to; a key whose environment is gone is not valid."""
    environment = services.config.environment(key.environment_id)
    if environment is None:
        raise Unauthorized()
    return environment


class EvaluateBody(msgspec.Struct, gc=False):
    """A valid EvaluateRequest; unknown fields are ignored.

    ``gc=False``: made on every single evaluate, and it holds no object that could lead back to
    it (strings, floats, booleans, tuples and a dict of them), so the collector need not see it.
    """

    flagKey: Annotated[str, msgspec.Meta(min_length=1, max_length=FLAG_KEY_MAX)]  # noqa: N815
    userIdentifier: Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)]  # noqa: N815
    sdk: Annotated[str, msgspec.Meta(max_length=SDK_MAX)] | None = None
    attributes: ATTRIBUTES | None = None
    """What the application knows of the user (contract 12); None or empty: nothing."""


def validate_evaluate(body: object) -> tuple[str, str, str | None]:
    """The fields of an EvaluateRequest, or the 400 naming the first one that is wrong."""
    body = require_object(body)
    fields = (
        require_str(body, "flagKey", max_len=FLAG_KEY_MAX),
        require_str(body, "userIdentifier", max_len=USER_IDENTIFIER_MAX),
        optional_str(body, "sdk", max_len=SDK_MAX),
    )
    check_attributes(body.get("attributes"))
    return fields


_EVALUATE_BODY = msgspec.json.Decoder(EvaluateBody)
_BAD_NAME = "an attribute's name is not one"
"""The ``ValidationError`` of a body whose only fault is a name (``validate_evaluate`` and
``validate_bulk`` then name it)."""


def decode_evaluate(raw: bytes) -> EvaluateBody:
    """A valid EvaluateRequest body's fields; raises one of ``MALFORMED`` for any other body
    (its attributes' names checked after the decoding: ``valid_names``)."""
    body = _EVALUATE_BODY.decode(raw)
    names = body.attributes
    if names and not known_names(names) and not valid_names(names):
        raise msgspec.ValidationError(_BAD_NAME)
    return body


class EvaluateResource:
    def __init__(self, services: Services):
        self._services = services
        self._server = EvaluationServer(services)
        self._quota = QuotaHeaders(services)
        self._limit = services.settings.body_limits.single

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        failure = req.scope.get(FRONT_FAILURE)
        if failure is not None:  # serving failed in ``api.web.front``: Falcon answers the error
            raise failure
        caller = authenticate_caller(req, self._services.config)
        raw = await read_body(req, self._limit)
        try:  # ``decode_typed``, written out
            body = decode_evaluate(raw)
        except MALFORMED as exc:
            raise typed_error(raw, exc, validate_evaluate, decode_json_overflowing) from None
        environment = caller.environment
        if environment is None:  # a key whose environment is gone is not valid
            raise Unauthorized()
        resp.data, quota = self.answer(caller, environment, body)
        resp.content_type = falcon.MEDIA_JSON
        resp.set_header("RateLimit-Policy", quota.policy)
        resp.set_header("RateLimit", quota.limit)

    def answer(
        self, caller: Caller, environment: EnvironmentConfig, body: EvaluateBody
    ) -> tuple[bytes, QuotaFields]:
        """Serve a valid request: the answer's body, and its ``RateLimit`` fields.

        The one place a single evaluate is served, whether Falcon routed the request here
        or ``api.web.front`` answered it before Falcon. With attributes too, the native path
        decides when it knows the flag's rules (``EvaluationServer.serve_one``).
        """
        outcome, prefix = self._server.serve_one(
            caller,
            environment,
            body.flagKey,
            body.userIdentifier,
            sdk=body.sdk,
            source=SOURCE_EVALUATE,
            attributes=body.attributes,
        )
        return encode_single_response(outcome, prefix), self._quota.fields(
            caller.key.organization_id
        )


class BulkEvaluateResource:
    def __init__(self, services: Services):
        self._services = services
        self._server = EvaluationServer(services)
        self._quota = QuotaHeaders(services)
        self._limit = services.settings.body_limits.bulk_evaluate

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        started = time.perf_counter()
        key = authenticate_api_key(req, self._services.config)
        raw = await read_body(req, self._limit)
        try:  # ``decode_typed``, with the names checked after the decoding
            body = decode_bulk(raw)
        except MALFORMED as exc:
            raise typed_error(raw, exc, validate_bulk, decode_json_overflowing) from None
        users = body.users
        environment = key_environment(self._services, key)
        served = self._server.serve(
            key, environment, body.flag_key, users, sdk=body.sdk, source=SOURCE_EVALUATE_BULK,
            attributes=body.attributes,
        )  # fmt: skip
        resp.data = encode_bulk_response(served.users, served.outcomes, served.evaluation_id_prefix)
        resp.content_type = falcon.MEDIA_JSON
        self._quota.apply(resp, key.organization_id)
        metrics = self._services.metrics
        metrics.bulk_evaluate_seconds.observe(time.perf_counter() - started)
        metrics.bulk_evaluate_users.inc(len(users))


class BulkEvaluateBody(msgspec.Struct):
    """A valid BulkEvaluateRequest; unknown fields are ignored."""

    flagKey: Annotated[str, msgspec.Meta(min_length=1, max_length=FLAG_KEY_MAX)]  # noqa: N815
    userIdentifiers: Annotated[  # noqa: N815
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)]],
        msgspec.Meta(max_length=BULK_MAX_USERS),
    ]
    sdk: Annotated[str, msgspec.Meta(max_length=SDK_MAX)] | None = None
    attributes: ATTRIBUTES_BY_USER | None = None
    """By user identifier (each one of ``userIdentifiers``), the attributes of the users
    that have any (contract 12)."""


class BulkEvaluateFields(msgspec.Struct):
    """``BulkEvaluateBody`` with its attributes left as JSON, for the native decoder to read
    into columns (``decode_bulk``)."""

    flagKey: Annotated[str, msgspec.Meta(min_length=1, max_length=FLAG_KEY_MAX)]  # noqa: N815
    userIdentifiers: Annotated[  # noqa: N815
        list[Annotated[str, msgspec.Meta(min_length=1, max_length=USER_IDENTIFIER_MAX)]],
        msgspec.Meta(max_length=BULK_MAX_USERS),
    ]
    sdk: Annotated[str, msgspec.Meta(max_length=SDK_MAX)] | None = None
    attributes: msgspec.Raw = msgspec.Raw()


class BulkRequest(NamedTuple):
    """A valid BulkEvaluateRequest, as it is served."""

    flag_key: str
    users: list[str]
    """The distinct identifiers, in order of first appearance."""
    sdk: str | None
    attributes: Mapping[str, Attributes] | None
    """By identifier, the attributes of the users that have any (``AttributeColumns`` when
    the native decoder read them); None: none."""


def validate_bulk(body: object) -> None:
    """Raise the 400 naming the first wrong field of a BulkEvaluateRequest."""
    body = require_object(body)
    require_str(body, "flagKey", max_len=FLAG_KEY_MAX)
    users = distinct_user_identifiers(
        require_list(body, "userIdentifiers", max_items=BULK_MAX_USERS)
    )
    optional_str(body, "sdk", max_len=SDK_MAX)
    check_attributes_by_user(body.get("attributes"), frozenset(users))


_BULK_BODY = msgspec.json.Decoder(BulkEvaluateBody)
_BULK_FIELDS = msgspec.json.Decoder(BulkEvaluateFields)
_NULL = b"null"
COLUMNS_MAX = 64
"""Distinct attribute names the native decoder makes columns for (a list of a row per user
each); a request whose users name more is decoded a dict per user."""


def decode_bulk(raw: bytes) -> BulkRequest:
    """A valid BulkEvaluateRequest (``decode_evaluate``'s counterpart); raises one of
    ``MALFORMED`` for a body msgspec refuses, and the 400 for attributes of a user not in
    ``userIdentifiers``.

    The attributes, most of a bulk request's bytes, are read by the native decoder into a
    column per name (``api.native``, ``AttributeColumns``): no dict per user, each limit and
    name checked as it reads, in a third of msgspec's time. A body it hands on (anything
    unusual, a refused one among them) is decoded whole by msgspec, as it always was, every
    user's names checked at once (``valid_names_by_user``), and worded from there."""
    fields = _BULK_FIELDS.decode(raw)
    users, rows = _distinct_rows(fields.userIdentifiers)
    text = fields.attributes
    if not text or (len(text) == len(_NULL) and bytes(text) == _NULL):
        return BulkRequest(fields.flagKey, users, fields.sdk, None)
    if fastpath is not None:
        kinds: dict[str, frozenset[type]] = {}
        coded: dict[str, tuple[tuple[object, ...], bytes]] = {}
        columns = fastpath.attribute_columns(raw, text, rows, MISSING, COLUMNS_MAX, kinds, coded)
        if columns is not None:
            attributes = AttributeColumns(users, rows, columns, kinds, coded) if columns else None
            return BulkRequest(fields.flagKey, users, fields.sdk, attributes)
    body = _BULK_BODY.decode(raw)
    if body.attributes and not valid_names_by_user(body.attributes):
        raise msgspec.ValidationError(_BAD_NAME)
    if body.attributes:
        check_users(body.attributes, rows)
    return BulkRequest(fields.flagKey, users, fields.sdk, body.attributes or None)


def _distinct_rows(identifiers: list[str]) -> tuple[list[str], dict[str, int]]:
    """The distinct identifiers in order of first appearance, and each one's row among them.
    One dict for both when no identifier repeats (nearly every request): a tenth of a
    10,000-user request's decoding otherwise went on building the list and the rows apart."""
    rows = dict(zip(identifiers, range(len(identifiers)), strict=True))
    if len(rows) == len(identifiers):
        return identifiers, rows
    users = list(dict.fromkeys(identifiers))
    return users, dict(zip(users, range(len(users)), strict=True))


def distinct_user_identifiers(items: list[object]) -> list[str]:
    """The identifiers in order of first appearance; each must be a string of 1 to
    ``USER_IDENTIFIER_MAX`` characters."""
    for index, item in enumerate(items):
        if not isinstance(item, str) or not 1 <= len(item) <= USER_IDENTIFIER_MAX:
            raise BadRequest(
                f"Field 'userIdentifiers[{index}]' must be a string of 1 to {USER_IDENTIFIER_MAX} characters"
            )
    return list(dict.fromkeys(items))  # type: ignore[arg-type]
