"""OpenFeature Remote Evaluation Protocol 0.3: ``/ofrep/v1/evaluate/flags[/{key}]`` (contract 7).

OFREP is another way of asking the same question as ``/v1/evaluate``: the same API keys, the
same evaluation (``EvaluationServer``), the same events and the same metering. Only the wire
format differs, and the outcomes that ``/v1`` reports in the body become HTTP statuses here.
The context's ``targetingKey`` is the user and its other fields are the user's attributes
(contract 12, ``api.web.attributes.context_attributes``): a field of a shape an attribute
cannot have is ignored, and only a context over the attributes' limits is refused
(``INVALID_CONTEXT``).

* a served evaluation is 200 ``{key, value, reason, variant, metadata: {evaluationId}}``;
* flag not found is 404 and the plan's hard threshold is 429 with ``Retry-After``; both are
  still evaluation events, so their bodies carry ``metadata.evaluationId`` too;
* a request that cannot be evaluated (body, context, targeting key) is 400 with OFREP's
  ``{key, errorCode, errorDetails}`` *and* the contract's ``{status, error, message}``: OFREP
  providers read the first, generic clients the second; each ignores the other's fields.

Bulk answers every flag of the key's environment, disabled and archived flags included (value
false, reason ``DISABLED``), each flag one metered evaluation event. Its strong ETag is the
environment's configuration version plus a hash of the context, so it changes whenever any
answer could; a matching ``If-None-Match`` is answered 304 without evaluating, recording or
metering anything (unless the organization is blocked: then the answer did change, to 429).
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import falcon
import falcon.asgi
from flagsight_core import RULE_TYPES, Attributes, Result
from flagsight_core.contract import (
    ERROR_MESSAGES,
    FLAG_KEY_MAX,
    USER_IDENTIFIER_MAX,
    ErrorType,
    OfrepErrorCode,
    OfrepReason,
)

from api.controlplane.cache import EnvironmentConfig
from api.controlplane.model import KeyContext
from api.eventlog.schema import SOURCE_OFREP, SOURCE_OFREP_BULK
from api.metering.meter import seconds_until_next_month
from api.serving.evaluations import EvaluationServer
from api.serving.services import Services
from api.web.attributes import OverLimit, context_attributes
from api.web.auth import authenticate_api_key
from api.web.errors import ApiError, BadRequest, error_body
from api.web.jsonio import decode_json_overflowing, encode, read_body
from api.web.public.evaluate import key_environment
from api.web.public.quota import QuotaHeaders
from api.web.public.ruleset import OfrepStreamResource

# OpenFeature's reasons and error codes (https://openfeature.dev/specification/types) are the
# contract's (``flagsight_core.contract``); a rule's reason is its type's ``ofrep_reason``.
PARSE_ERROR = OfrepErrorCode.PARSE_ERROR
TARGETING_KEY_MISSING = OfrepErrorCode.TARGETING_KEY_MISSING
INVALID_CONTEXT = OfrepErrorCode.INVALID_CONTEXT
GENERAL = OfrepErrorCode.GENERAL
FLAG_NOT_FOUND = OfrepErrorCode.FLAG_NOT_FOUND

VARIANT_ON = "on"
VARIANT_OFF = "off"

_DISABLED = frozenset({ErrorType.FLAG_DISABLED, ErrorType.FLAG_ARCHIVED})
_ETAG_FORMAT = "1"  # bump when the answer's shape changes, so old ETags stop matching


class OfrepRequestError(Exception):
    """A request OFREP cannot evaluate: its status, OpenFeature error code and details."""

    def __init__(
        self, status: int, error_code: str, details: str, headers: dict[str, str] | None = None
    ):
        super().__init__(details)
        self.status = status
        self.error_code = error_code
        self.details = details
        self.headers = headers or {}


def add_ofrep_routes(app: falcon.asgi.App, services: Services) -> None:
    """Serve OFREP on ``app``; ``create_app`` calls this next to the ``/v1`` routes."""
    app.add_route("/ofrep/v1/evaluate/flags/{key}", OfrepFlagResource(services))
    app.add_route("/ofrep/v1/evaluate/flags", OfrepBulkResource(services))
    app.add_route(STREAM_PATH, OfrepStreamResource(services))


# -- the request: body, context, targeting key ------------------------------------------------


class OfrepRequest(NamedTuple):
    """What an OFREP body asks for: the user, its attributes, and the whole context (the
    bulk answer's ETag hashes it)."""

    user: str
    attributes: Attributes
    context: dict[str, Any]

    def attributes_by_user(self) -> dict[str, Attributes] | None:
        """``EvaluationServer.serve``'s ``attributes``: the user's, when it has any."""
        return {self.user: self.attributes} if self.attributes else None


async def read_request(req: falcon.asgi.Request, limit: int) -> OfrepRequest:
    """The context's ``targetingKey`` (our user identifier), its attributes (contract 12: the
    other fields, ``api.web.attributes.context_attributes``) and the whole context.

    An empty body counts as ``{}``: OFREP's context is optional, only we need the key.
    """
    if req.content_length == 0:
        return _request({})
    try:
        body = decode_json_overflowing(await read_body(req, limit))  # a number no double
        # holds is a field of a shape contract 12 does not take: ignored, not a parse error
    except BadRequest as exc:
        raise OfrepRequestError(
            400, PARSE_ERROR, exc.description or "Malformed JSON body"
        ) from None
    except ApiError as exc:  # 413, 415
        raise OfrepRequestError(
            exc.status_code, GENERAL, exc.description or "Invalid request"
        ) from None
    if not isinstance(body, dict):
        raise OfrepRequestError(400, PARSE_ERROR, "The body must be a JSON object")
    return _request(body)


def _request(body: dict[str, Any]) -> OfrepRequest:
    context = body.get("context")
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise OfrepRequestError(400, INVALID_CONTEXT, "Field 'context' must be a JSON object")
    key = context.get("targetingKey")
    if key is None or key == "":
        raise OfrepRequestError(
            400,
            TARGETING_KEY_MISSING,
            "Field 'context.targetingKey' is required (the user identifier)",
        )
    if not isinstance(key, str) or len(key) > USER_IDENTIFIER_MAX:
        raise OfrepRequestError(
            400,
            INVALID_CONTEXT,
            f"Field 'context.targetingKey' must be a string of 1 to {USER_IDENTIFIER_MAX} characters",
        )
    try:
        attributes = context_attributes(context)
    except OverLimit as exc:
        raise OfrepRequestError(400, INVALID_CONTEXT, str(exc)) from None
    return OfrepRequest(key, attributes, context)


def check_flag_key(key: str) -> None:
    if not 1 <= len(key) <= FLAG_KEY_MAX:
        raise OfrepRequestError(
            400, GENERAL, f"Flag key (path) must be 1 to {FLAG_KEY_MAX} characters long"
        )


# -- answers -----------------------------------------------------------------------------------


def success_object(flag_key: str, result: Result, evaluation_id: str) -> dict[str, Any]:
    """OFREP's evaluationSuccess for a served (or disabled/archived) flag."""
    if result.error_type in _DISABLED:
        reason: str = OfrepReason.DISABLED
    elif result.matched_rule_type is None:
        reason = OfrepReason.DEFAULT
    else:
        reason = RULE_TYPES[result.matched_rule_type].ofrep_reason
    return {
        "key": flag_key,
        "value": result.value,
        "reason": reason,
        "variant": VARIANT_ON if result.value else VARIANT_OFF,
        "metadata": {"evaluationId": evaluation_id},
    }


def failure_object(
    flag_key: str | None, error_code: str, details: str, evaluation_id: str | None
) -> dict[str, Any]:
    """OFREP's evaluationFailure; ``key`` is absent for a bulk request's own failure."""
    body: dict[str, Any] = {} if flag_key is None else {"key": flag_key}
    body["errorCode"] = error_code
    body["errorDetails"] = details
    if evaluation_id is not None:
        body["metadata"] = {"evaluationId": evaluation_id}
    return body


def request_error_body(flag_key: str | None, exc: OfrepRequestError) -> dict[str, Any]:
    """The OFREP failure plus the contract's error fields (section 3) for the same status."""
    return {
        **failure_object(flag_key, exc.error_code, exc.details, None),
        **error_body(exc.status, exc.details),
    }


def write(
    resp: falcon.asgi.Response,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    resp.status = status
    resp.data = encode(body)
    resp.content_type = falcon.MEDIA_JSON
    for name, value in (headers or {}).items():
        resp.set_header(name, value)


def retry_after(services: Services) -> dict[str, str]:
    """Blocked until the next UTC month: ``Retry-After`` in whole seconds."""
    return {"Retry-After": str(seconds_until_next_month(services.clock()))}


# -- resources ---------------------------------------------------------------------------------


class OfrepFlagResource:
    """``POST /ofrep/v1/evaluate/flags/{key}``: one flag for the context's targeting key."""

    def __init__(self, services: Services):
        self._services = services
        self._server = EvaluationServer(services)
        self._quota = QuotaHeaders(services)
        self._limit = services.settings.body_limits.single

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, key: str) -> None:
        api_key = authenticate_api_key(req, self._services.config)
        try:
            check_flag_key(key)
            asked = await read_request(req, self._limit)
        except OfrepRequestError as exc:
            write(resp, exc.status, request_error_body(key, exc), exc.headers)
            return
        environment = key_environment(self._services, api_key)
        served = self._server.serve(
            api_key, environment, key, [asked.user], sdk=None, source=SOURCE_OFREP,
            attributes=asked.attributes_by_user(),
        )  # fmt: skip
        result, evaluation_id = served.results[0], served.evaluation_ids[0]
        self._quota.apply(resp, api_key.organization_id)
        if result.error_type is ErrorType.FLAG_NOT_FOUND:
            write(
                resp,
                404,
                failure_object(
                    key, FLAG_NOT_FOUND, ERROR_MESSAGES[result.error_type], evaluation_id
                ),
            )
        elif result.error_type is ErrorType.PLAN_LIMIT_EXCEEDED:
            body = failure_object(key, GENERAL, ERROR_MESSAGES[result.error_type], evaluation_id)
            write(resp, 429, body, retry_after(self._services))
        else:
            write(resp, 200, success_object(key, result, evaluation_id))


class OfrepBulkResource:
    """``POST /ofrep/v1/evaluate/flags``: every flag of the environment for one targeting key.

    Disabled and archived flags are in it as ``DISABLED`` (value false), as the single-flag
    call answers them (contract section 7): a flag answers the same through either call, so
    the web provider (one bulk request) and the server provider (one call per flag) agree.
    """

    def __init__(self, services: Services):
        self._services = services
        self._server = EvaluationServer(services)
        self._quota = QuotaHeaders(services)
        self._limit = services.settings.body_limits.single

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        api_key = authenticate_api_key(req, self._services.config)
        try:
            asked = await read_request(req, self._limit)
        except OfrepRequestError as exc:
            write(resp, exc.status, request_error_body(None, exc), exc.headers)
            return
        environment = key_environment(self._services, api_key)
        etag = bulk_etag(environment, asked.context)
        self._answer(req, resp, api_key, environment, asked, etag)
        self._quota.apply(resp, api_key.organization_id)  # on 200, 304 and 429 alike

    def _answer(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        api_key: KeyContext,
        environment: EnvironmentConfig,
        asked: OfrepRequest,
        etag: str,
    ) -> None:
        if self._blocked(environment):
            body = failure_object(
                None, GENERAL, ERROR_MESSAGES[ErrorType.PLAN_LIMIT_EXCEEDED], None
            )
            write(resp, 429, body, retry_after(self._services))
            return
        if etag_matches(req, etag):
            resp.status = 304
            resp.etag = etag
            return
        flags, refused = self._evaluate(api_key, environment, asked)
        self._quota.spent(api_key.organization_id, len(flags) - refused)
        if flags and refused == len(flags):  # the threshold was reached by a concurrent request
            body = failure_object(
                None, GENERAL, ERROR_MESSAGES[ErrorType.PLAN_LIMIT_EXCEEDED], None
            )
            write(resp, 429, body, retry_after(self._services))
            return
        write(resp, 200, {"flags": flags, "eventStreams": [event_stream(req)]})
        if not refused:  # a partly refused answer must not be revalidated into a client's cache
            resp.etag = etag

    def _blocked(self, environment: EnvironmentConfig) -> bool:
        """Whether the organization is at its hard threshold: read only, nothing metered.

        The figure may be a second old; a request that passes here while the threshold was
        just reached is refused by the meter itself (``_answer``'s concurrent case)."""
        if self._services.config.organization(environment.organization_id) is None:
            return True
        return self._quota.remaining(environment.organization_id) <= 0

    def _evaluate(
        self, api_key: KeyContext, environment: EnvironmentConfig, asked: OfrepRequest
    ) -> tuple[list[dict[str, Any]], int]:
        """Each flag is served (and metered) on its own, in key order, until the threshold.

        Returns the answers and how many the plan refused; a refused flag is a GENERAL
        failure entry with its evaluation id (it is still an evaluation event).
        """
        answers: list[dict[str, Any]] = []
        refused = 0
        users, attributes = [asked.user], asked.attributes_by_user()
        for flag_key in sorted(environment.flags):
            served = self._server.serve(
                api_key, environment, flag_key, users, sdk=None, source=SOURCE_OFREP_BULK,
                attributes=attributes,
            )  # fmt: skip
            result, evaluation_id = served.results[0], served.evaluation_ids[0]
            if result.error_type is ErrorType.PLAN_LIMIT_EXCEEDED:
                refused += 1
                details = ERROR_MESSAGES[result.error_type]
                answers.append(failure_object(flag_key, GENERAL, details, evaluation_id))
            else:
                answers.append(success_object(flag_key, result, evaluation_id))
        return answers, refused


STREAM_PATH = "/ofrep/v1/stream"


def event_stream(req: falcon.asgi.Request) -> dict[str, str]:
    """The bulk answer's ``eventStreams`` entry (ADR-0008): this host's OFREP stream, as the
    client reached it (``Forwarded``/``X-Forwarded-*`` behind a proxy)."""
    return {"type": "sse", "url": req.forwarded_prefix + STREAM_PATH}


def bulk_etag(environment: EnvironmentConfig, context: dict[str, Any]) -> str:
    """Strong ETag: answer format, environment, its configuration version, and the context.

    The whole context is hashed (canonically, keys sorted at every depth), not only the
    targeting key: its other fields are the user's attributes (contract 12), so an answer that
    reads one is never revalidated for another context. Fields the evaluation ignores are
    hashed too: another ETag for the same answers costs one 200, never a stale one.
    """
    digest = hashlib.sha256(encode(context, order="sorted")).hexdigest()[:32]
    return f'"{_ETAG_FORMAT}.{environment.id}.{environment.version}.{digest}"'


def etag_matches(req: falcon.asgi.Request, etag: str) -> bool:
    """``If-None-Match`` uses the weak comparison (RFC 9110 13.1.2): ``W/`` is ignored."""
    candidates = req.if_none_match
    if not candidates:
        return False
    opaque = etag.strip('"')
    return any(candidate == "*" or str(candidate) == opaque for candidate in candidates)
