"""Explain (contract 12): what each rule of a flag made of one user, and the answer evaluation
gives that user now.

``POST /admin/v1/environments/{envId}/flags/{flagKey}/explain`` with ``{"userIdentifier",
"attributes"?}``. The flag and the segments are the worker's config cache's
(``services.config``), the ones evaluation reads, and the time is the services' clock, so the
answer is the one ``/v1/evaluate`` would give this user now; the core's ``explanation`` walks
the rules (``flagsight_core.explanation``), each rule explaining itself (``Rule.explain``).
Nothing is metered and no event is logged. The plan's limit is not consulted: explain says
what the flag decides, an organization's usage is its own resource.

``explained`` is the one computation: this resource answers it, the dashboard's "try a user"
form shows it (``api/web/dashboard/try_user.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from flagsight_core import ERROR_MESSAGES, ErrorType, Flag
from flagsight_core.context import AttributeValue as ContextValue
from flagsight_core.context import context_of
from flagsight_core.contract import (
    ATTRIBUTE_ARRAY_MAX,
    ATTRIBUTE_NAME_SPEC,
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTES_MAX,
    USER_IDENTIFIER_ATTRIBUTE,
)
from flagsight_core.explanation import Explanation as CoreExplanation
from flagsight_core.explanation import explain
from flagsight_core.registry import Segments
from msgspec import UNSET, Meta, UnsetType

from api.serving.services import Services
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Place, convert, one_of
from api.web.admin.environments import existing_environment
from api.web.admin.segments import UserIdentifier
from api.web.admin.slices import Answer, Operation, Route, Slice, key_param
from api.web.attributes import check_attributes
from api.web.jsonio import decode_json_overflowing, read_body, write_json

LARGEST = sys.float_info.max
"""A finite number is within the largest double either way (a JSON integer has no limit of
its own: one of 400 digits is no double, and contract 12 takes finite numbers only)."""
NO_SEGMENTS: Segments = MappingProxyType({})
FLAG_ERRORS = (ErrorType.FLAG_NOT_FOUND, ErrorType.FLAG_ARCHIVED, ErrorType.FLAG_DISABLED)
"""The errors explain answers: the flag's state (the plan's limit is not consulted)."""

# -- the request ---------------------------------------------------------------------------------

AttributeName = Annotated[
    str,
    Meta(pattern=f"^{ATTRIBUTE_NAME_SPEC}$",
         extra_json_schema={"not": {"const": USER_IDENTIFIER_ATTRIBUTE}}),
]  # fmt: skip
Text = Annotated[str, Meta(max_length=ATTRIBUTE_STRING_MAX)]
Number = Annotated[float, Meta(ge=-LARGEST, le=LARGEST)]
AttributeValue = Annotated[
    Text | Number | bool | Annotated[list[Text], Meta(max_length=ATTRIBUTE_ARRAY_MAX)],
    Meta(description="A string, a finite number, a boolean, or an array of strings"),
]
Attributes = Annotated[
    dict[AttributeName, AttributeValue],
    Meta(max_length=ATTRIBUTES_MAX,
         description="What the application knows of the user, by attribute name (contract 12);"
                     " userIdentifier is reserved"),
]  # fmt: skip
"""One user's attributes as contract 12 takes them: the rules the document states. They are
checked, and a refusal worded, by the public API's validator (``api.web.attributes``), so
explain refuses what ``POST /v1/evaluate`` refuses, in its words."""


def _check_attributes(raw: Any, place: Place) -> None:
    check_attributes(raw, place.label("attributes"))


class ExplainRequest(Body, kw_only=True):
    """One user, as POST /v1/evaluate takes it: the identifier and, optionally, attributes."""

    userIdentifier: UserIdentifier
    attributes: Attributes | None = None

    prechecks = {"attributes": _check_attributes}

    def context_attributes(self) -> Mapping[str, ContextValue]:
        """The attributes as a rule reads them (an array as a tuple)."""
        return {
            name: tuple(value) if isinstance(value, list) else value
            for name, value in (self.attributes or {}).items()
        }


# -- the answer ----------------------------------------------------------------------------------


class ExplainedCondition(msgspec.Struct):
    attribute: str
    operator: str
    held: bool


class ExplainedRule(msgspec.Struct):
    index: Annotated[int, Meta(ge=0, description="The rule's place in the flag, from 0")]
    type: str
    matched: bool
    conditions: (
        Annotated[
            list[ExplainedCondition],
            Meta(
                description="The conditions the rule asks (its segment's), each held or not;"
                " absent for a rule that asks none"
            ),
        ]  # fmt: skip
        | UnsetType
    ) = UNSET


class ExplainedError(msgspec.Struct):
    """As an evaluate answer's error: the flag's state decided."""

    type: one_of(FLAG_ERRORS)
    message: str


class Explanation(msgspec.Struct):
    """What evaluation answers the user now, and each rule reached, in order, up to the
    deciding one (none when the flag's state decides)."""

    value: bool
    matchedRuleType: str | None
    error: ExplainedError | None
    rules: list[ExplainedRule]


@dataclass(frozen=True)
class Explained:
    """One user's explanation, with the flag and segments it was made from (as the worker
    served them at that moment: the dashboard words the rules from them)."""

    flag: Flag | None
    segments: Segments
    explanation: CoreExplanation

    def answer(self) -> Explanation:
        """The admin API's answer."""
        result, rules = self.explanation
        error = None
        if result.error_type is not None:
            error = ExplainedError(str(result.error_type), ERROR_MESSAGES[result.error_type])
        rule_type = result.matched_rule_type
        return Explanation(
            value=result.value,
            matchedRuleType=None if rule_type is None else str(rule_type),
            error=error,
            rules=[msgspec.convert(rule, ExplainedRule) for rule in rules],
        )


def explained(services: Services, env_id: str, flag_key: str, request: ExplainRequest) -> Explained:
    """``flag_key`` explained for the user of ``request`` as this worker serves the environment
    now (a flag it does not serve, or of an environment it does not serve, is
    ``FLAG_NOT_FOUND``, as evaluation answers). No I/O: the config cache and the clock."""
    environment = services.config.environment(env_id)
    flag = environment.flags.get(flag_key) if environment is not None else None
    segments = environment.segments if environment is not None else NO_SEGMENTS
    ctx = context_of(request.userIdentifier, request.context_attributes(), services.clock())
    return Explained(flag, segments, explain(flag, ctx, segments))


@falcon.before(require_admin)
class ExplainResource(AdminResource):
    """``/admin/v1/environments/{env_id}/flags/{flag_key}/explain``: POST explains."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        key_param(flag_key, "flagKey")
        raw = await read_body(req, self.services.settings.body_limits.admin)
        request = convert(ExplainRequest, decode_json_overflowing(raw))  # 1e999: named, as /v1
        if self.services.config.environment(env_id) is None:
            await existing_environment(self, env_id)  # 404 unless created a moment ago
        write_json(resp, explained(self.services, env_id, flag_key, request).answer())


SLICE = Slice(
    Route("/environments/{env_id}/flags/{flag_key}/explain", ExplainResource, {
        "post": Operation("Explain a flag for one user: each rule up to the deciding one, and"
                          " the answer (not metered, no event)",
                          {200: Answer("The answer and each rule reached", Explanation)},
                          body=ExplainRequest),
    }),
)  # fmt: skip
