"""An OpenFeature provider (``openfeature-sdk`` 0.10) over ``FlagsightClient``.

Needs the ``openfeature`` extra: ``pip install "flagsight-sdk[openfeature]"``.

Evaluation: the context's targeting key is the user identifier, its other fields the user's
attributes (those of a shape contract 12 takes; others are ignored, as OFREP ignores them:
``flagsight_sdk.attributes.from_openfeature``); flags are boolean. Reasons
are OpenFeature's: STATIC, TARGETING_MATCH (segment), SPLIT (percentage), DEFAULT (no rule),
DISABLED (disabled or archived flag); ``flag_metadata["evaluationId"]`` is the service's id.
A flag that does not exist is ``FLAG_NOT_FOUND``; the plan limit and any transport failure are
``GENERAL`` errors, so OpenFeature answers the caller's default value.

Tracking (contract 13): ``client.track(event_name, context,
TrackingEventDetails(value=59.9))`` is the SDK's ``track(event_name, targeting key, value)``:
a tracked event, stored with source ``provider``, for the metrics release health compares.

Feedback: details whose attributes carry ``success`` are outcome feedback instead, as before
tracked events existed: ``client.track(flag_key, context, TrackingEventDetails(value=latency_ms,
attributes={"success": bool, "errorType": str}))`` reports the outcome of the latest
evaluation of that flag for that targeting key. Without ``value`` the latency is measured
from that evaluation to the ``track`` call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from openfeature.evaluation_context import EvaluationContext
from openfeature.exception import (
    FlagNotFoundError,
    GeneralError,
    TargetingKeyMissingError,
    TypeMismatchError,
)
from openfeature.flag_evaluation import FlagResolutionDetails, FlagValueType, Reason
from openfeature.provider import AbstractProvider, Metadata
from openfeature.track import TrackingEventDetails

from flagsight_sdk.attributes import from_openfeature
from flagsight_sdk.client import FlagsightClient
from flagsight_sdk.model import RULE_REASONS, Evaluation
from flagsight_sdk.tracking import SOURCE_PROVIDER

log = logging.getLogger("flagsight_sdk")

TRACK_SUCCESS = "success"
TRACK_ERROR_TYPE = "errorType"
_REASONS = {
    **{rule_type: Reason(reason) for rule_type, reason in RULE_REASONS.items()},
    None: Reason.DEFAULT,
}
_DISABLED = frozenset({"FLAG_DISABLED", "FLAG_ARCHIVED"})


class FlagsightProvider(AbstractProvider):
    """Boolean flags from flagsight; ``track`` sends tracked events, or outcome feedback.

    Args:
        client: the application's ``FlagsightClient`` (shared: one session, one batcher);
            or none, and the provider makes its own from ``api_key``, ``base_url``, ``local``
            and ``options``.
        remember: how many (flag, targeting key) latest evaluations ``track`` can find.
        local: decide in this process from the pushed ruleset (``FlagsightClient``'s
            ``local``; ``docs/openfeature.md``).
    """

    def __init__(
        self,
        client: FlagsightClient | None = None,
        remember: int = 10_000,
        *,
        api_key: str | None = None,
        base_url: str = "http://127.0.0.1:8000",
        local: bool = False,
        **options: object,
    ):
        super().__init__()
        if client is None:
            if api_key is None:
                raise ValueError("FlagsightProvider needs a client or an api_key")
            client = FlagsightClient(api_key, base_url, local=local, **options)  # type: ignore[arg-type]
        elif local and client.local is None:
            raise ValueError("local=True needs a FlagsightClient made with local=True")
        self.client = client
        self._remember = remember
        self._latest: OrderedDict[tuple[str, str], Evaluation] = OrderedDict()
        self._lock = threading.Lock()

    def get_metadata(self) -> Metadata:
        return Metadata(name="flagsight")

    def shutdown(self) -> None:
        self.client.close()

    # -- evaluation ----------------------------------------------------------------------------

    def resolve_boolean_details(
        self,
        flag_key: str,
        default_value: bool,
        evaluation_context: EvaluationContext | None = None,
    ) -> FlagResolutionDetails[bool]:
        if evaluation_context is None or not evaluation_context.targeting_key:
            raise TargetingKeyMissingError(
                "flagsight needs the targeting key (the user identifier)"
            )
        user = evaluation_context.targeting_key
        attributes = from_openfeature(evaluation_context.attributes)
        evaluation = self.client.evaluate(flag_key, user, attributes or None)
        if evaluation.failure is not None:
            raise GeneralError(f"flagsight: {evaluation.failure}: {evaluation.error_message}")
        self._remember_latest(evaluation)
        metadata = {"evaluationId": evaluation.evaluation_id or ""}
        if evaluation.error_type == "FLAG_NOT_FOUND":
            raise FlagNotFoundError(evaluation.error_message or "Flag not found")
        if evaluation.error_type == "PLAN_LIMIT_EXCEEDED":
            raise GeneralError(evaluation.error_message or "Plan limit exceeded")
        reason = (
            Reason.DISABLED
            if evaluation.error_type in _DISABLED
            else _REASONS.get(evaluation.matched_rule_type, Reason.UNKNOWN)
        )
        variant = "on" if evaluation.value else "off"
        return FlagResolutionDetails(
            value=evaluation.value, reason=reason, variant=variant, flag_metadata=metadata
        )

    def resolve_string_details(
        self, flag_key: str, default_value: str, evaluation_context: EvaluationContext | None = None
    ) -> FlagResolutionDetails[str]:
        raise TypeMismatchError("flagsight flags are boolean")

    def resolve_integer_details(
        self, flag_key: str, default_value: int, evaluation_context: EvaluationContext | None = None
    ) -> FlagResolutionDetails[int]:
        raise TypeMismatchError("flagsight flags are boolean")

    def resolve_float_details(
        self,
        flag_key: str,
        default_value: float,
        evaluation_context: EvaluationContext | None = None,
    ) -> FlagResolutionDetails[float]:
        raise TypeMismatchError("flagsight flags are boolean")

    def resolve_object_details(
        self,
        flag_key: str,
        default_value: Sequence[FlagValueType] | Mapping[str, FlagValueType],
        evaluation_context: EvaluationContext | None = None,
    ) -> FlagResolutionDetails[Sequence[FlagValueType] | Mapping[str, FlagValueType]]:
        raise TypeMismatchError("flagsight flags are boolean")

    # -- tracking and feedback -----------------------------------------------------------------

    def track(
        self,
        tracking_event_name: str,
        evaluation_context: EvaluationContext | None = None,
        tracking_event_details: TrackingEventDetails | None = None,
    ) -> None:
        """A tracked event ``tracking_event_name`` of the targeting key, with the details'
        ``value``; or, when the details' attributes carry ``success``, the outcome of the
        latest evaluation of flag ``tracking_event_name`` (feedback). Never raises."""
        if tracking_event_details and TRACK_SUCCESS in tracking_event_details.attributes:
            self._report(tracking_event_name, evaluation_context, tracking_event_details)
            return
        user = evaluation_context.targeting_key if evaluation_context else None
        if not user:
            log.warning("flagsight: track(%r) not sent: no targeting key", tracking_event_name)
            return
        value = tracking_event_details.value if tracking_event_details else None
        self.client._track(SOURCE_PROVIDER, tracking_event_name, user, value)

    def _report(
        self, flag_key: str, context: EvaluationContext | None, details: TrackingEventDetails
    ) -> None:
        """Report the outcome of the latest evaluation of ``flag_key`` for the targeting key."""
        at = time.monotonic()
        user = context.targeting_key if context else None
        with self._lock:
            evaluation = self._latest.get((flag_key, user or ""))
        success = details.attributes.get(TRACK_SUCCESS)
        if evaluation is None or not isinstance(success, bool):
            problem = (
                "no evaluation of it for this targeting key"
                if evaluation is None
                else "attribute 'success' is not a boolean"
            )
            log.warning("flagsight: track(%r) not reported: %s", flag_key, problem)
            return
        latency_ms = details.value
        if latency_ms is None:
            latency_ms = (at - evaluation.evaluated_at) * 1000.0
        error_type = details.attributes.get(TRACK_ERROR_TYPE)
        self.client.report(
            evaluation, success, latency_ms, error_type if isinstance(error_type, str) else None
        )

    def _remember_latest(self, evaluation: Evaluation) -> None:
        key = (evaluation.flag_key, evaluation.user)
        with self._lock:
            self._latest[key] = evaluation
            self._latest.move_to_end(key)
            while len(self._latest) > self._remember:
                self._latest.popitem(last=False)
