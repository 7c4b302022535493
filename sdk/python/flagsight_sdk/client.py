"""The flagsight client: evaluations that never raise, outcome feedback and tracked events.

The service's fail-safe rule (spec 7): when it is unreachable or answers unexpectedly, the
flag is off and the application goes on. So ``evaluate`` and ``evaluate_bulk`` catch every
failure and answer False within the timeout, logged as ``FailureLog`` says (a warning when
failures start, at most one per interval after it); ``report`` and ``track`` never raise either.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING

import requests

from flagsight_sdk.attributes import Attributes, body_attributes
from flagsight_sdk.batcher import FeedbackBatcher, TrackBatcher
from flagsight_sdk.failure_log import WARNING_INTERVAL_S, FailureLog
from flagsight_sdk.model import (
    FAILURE_CLOSED,
    FAILURE_CONNECTION,
    FAILURE_INTERNAL,
    FAILURE_REFUSED,
    FAILURE_SERVER,
    FAILURE_TIMEOUT,
    FAILURE_UNEXPECTED,
    Evaluation,
    UnexpectedResponse,
    parse_evaluation,
)
from flagsight_sdk.tracking import SOURCE_SDK, TRACK_SOURCE_HEADER, track_item
from flagsight_sdk.transport import HttpAnswer, checked_base_url, new_session, post_json
from flagsight_sdk.version import __version__

if TYPE_CHECKING:
    from flagsight_sdk.local import LocalEvaluator

log = logging.getLogger("flagsight_sdk")

SDK_NAME = f"flagsight-sdk-python/{__version__}"
BULK_MAX_USERS = 10_000
CLOSED_MESSAGE = "the client is closed"
ERROR_TYPE_MAX = 256


class FlagsightClient:
    """One per process (it holds a keep-alive session and the feedback thread).

    Args:
        api_key: the environment's API key (``Authorization: ApiKey <key>``).
        base_url: where the service answers, e.g. ``https://flags.example.com``.
        timeout_s: the most an evaluation may take, connect to last byte (default 1 s).
        local: decide in this process from the environment's ruleset, pushed by the service
            (``docs/sdk.md``, "Local evaluation"); every evaluation is still metered, reported
            and attributable. Needs the ``local`` extra (``flagsight-sdk[local]``).
        warning_interval_s: the least time between two warnings of one kind of failed
            evaluation (the first is logged at once; the next says how many were not).
        feedback: options for the ``FeedbackBatcher`` made on the first ``report`` (and for
            the ``TrackBatcher`` made on the first ``track``).
    """

    def __init__(
        self,
        api_key: str,
        base_url: str = "http://127.0.0.1:8000",
        *,
        timeout_s: float = 1.0,
        session: requests.Session | None = None,
        local: bool = False,
        warning_interval_s: float = WARNING_INTERVAL_S,
        **feedback: object,
    ):
        self._base_url = checked_base_url(base_url)
        self._headers = {"Authorization": f"ApiKey {api_key}", "User-Agent": SDK_NAME}
        self._timeout_s = timeout_s
        self._session = session or new_session()
        FeedbackBatcher.check_options(feedback)  # now: on the first report it could only be logged
        self._feedback_options = feedback
        self._batcher: FeedbackBatcher | None = None
        self._batcher_lock = threading.Lock()
        self._track_batchers: dict[str, TrackBatcher] = {}
        """By source (``sdk``, or ``provider`` for the OpenFeature provider): one a header."""
        self._failures = FailureLog(warning_interval_s)
        self._closed = False
        self._local = None
        if local:
            from flagsight_sdk.local import LocalEvaluator  # flagsight_core: the local extra

            self._local = LocalEvaluator(
                self._base_url, self._headers, self._session, timeout_s, SDK_NAME
            )

    @property
    def local(self) -> LocalEvaluator | None:
        """The local evaluator (``local=True``): its ``reports`` stats, ``wait_ready``."""
        return self._local

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self, flag: str, user: str, attributes: Attributes | None = None) -> Evaluation:
        """The flag for ``user``: truthy when on; False (with a logged warning) on any failure.

        ``attributes``: what the application knows of the user, by name (contract 12: a
        string, a finite number, a boolean or a list of strings each), for rules that read them.
        """
        if self._local is not None:
            return self._evaluate_locally(flag, user, attributes)
        try:
            body: dict[str, object] = {"flagKey": flag, "userIdentifier": user, "sdk": SDK_NAME}
            if attributes is not None:
                body["attributes"] = body_attributes(attributes)
            answer = self._post("/v1/evaluate", body)
            evaluation = parse_evaluation(flag, user, self._expect_200(answer), time.monotonic())
        except Exception as exc:  # noqa: BLE001 - the fail-safe rule: nothing reaches the app
            failure, message = _classify(exc)
            self._failures.failed(failure, flag, message)
            return Evaluation.failed(flag, user, failure, message)
        self._failures.answered()
        return evaluation

    def _evaluate_locally(
        self, flag: str, user: str, attributes: Attributes | None = None
    ) -> Evaluation:
        if self._closed:  # closing is not an outage: nothing to warn about
            return Evaluation.failed(str(flag), str(user), FAILURE_CLOSED, CLOSED_MESSAGE)
        try:
            evaluation = self._local.evaluate(flag, user, attributes)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - the fail-safe rule
            failure, message = _classify(exc)
            evaluation = Evaluation.failed(str(flag), str(user), failure, message)
        if evaluation.failure is not None:
            if self._closed:  # closed while it ran: its quota was going back, not away
                return Evaluation.failed(str(flag), str(user), FAILURE_CLOSED, CLOSED_MESSAGE)
            self._failures.failed(evaluation.failure, flag, evaluation.error_message)
        elif self._failures.in_outage:  # an attribute read on the hot path
            self._failures.answered()
        return evaluation

    def evaluate_bulk(
        self,
        flag: str,
        users: Iterable[str],
        attributes: Mapping[str, Attributes] | None = None,
    ) -> dict[str, Evaluation]:
        """One flag for many users (repeats answered once), 10,000 per request.

        ``attributes``: by user identifier, the attributes of the users that have any (as
        ``evaluate``'s; an identifier not among ``users`` is not sent). A request that fails
        answers False for its users; the others keep their answers.
        """
        if isinstance(users, str):  # one user, not one per character
            users = [users]
        try:
            distinct = list(dict.fromkeys(users))
        except Exception as exc:  # noqa: BLE001 - the fail-safe rule, for the argument too
            log.warning("flagsight: users for flag %r are not a list of strings (%s)", flag, exc)
            return {}
        if attributes is not None and not isinstance(attributes, Mapping):
            log.warning("flagsight: attributes for flag %r are not a mapping by user", flag)
            return {}
        answers: dict[str, Evaluation] = {}
        for start in range(0, len(distinct), BULK_MAX_USERS):
            chunk = distinct[start : start + BULK_MAX_USERS]
            if self._local is not None:
                answers.update(self._evaluate_chunk_locally(flag, chunk, attributes))
            else:
                answers.update(self._evaluate_chunk(flag, chunk, attributes))
        return answers

    def _evaluate_chunk_locally(
        self, flag: str, users: list[str], attributes: Mapping[str, Attributes] | None
    ) -> dict[str, Evaluation]:
        """A request's users decided here, as the service would answer them: all refused when
        one user's attributes are (the service refuses the whole request)."""
        if not attributes:
            return {user: self._evaluate_locally(flag, user) for user in users}
        refused = self._local.bulk_problem(users, attributes)  # type: ignore[union-attr]
        if refused is not None:
            self._failures.failed(FAILURE_REFUSED, flag, refused, len(users))
            return {user: Evaluation.failed(flag, user, FAILURE_REFUSED, refused) for user in users}
        return {user: self._evaluate_locally(flag, user, attributes.get(user)) for user in users}

    def _evaluate_chunk(
        self, flag: str, users: list[str], attributes: Mapping[str, Attributes] | None
    ) -> dict[str, Evaluation]:
        body: dict[str, object] = {"flagKey": flag, "userIdentifiers": users, "sdk": SDK_NAME}
        try:
            if attributes:  # contract 12: by identifier, only this request's users
                sent = {u: body_attributes(attributes[u]) for u in users if u in attributes}
                if sent:
                    body["attributes"] = sent
            entries = self._expect_200(self._post("/v1/evaluate/bulk", body))
            if not isinstance(entries, dict) or set(entries) != set(users):
                raise UnexpectedResponse("the answer does not have one entry per user")
            now = time.monotonic()
            answers = {user: parse_evaluation(flag, user, entries[user], now) for user in users}
        except Exception as exc:  # noqa: BLE001 - the fail-safe rule
            failure, message = _classify(exc)
            self._failures.failed(failure, flag, message, len(users))
            return {user: Evaluation.failed(flag, user, failure, message) for user in users}
        self._failures.answered()
        return answers

    def _post(self, path: str, body: object) -> HttpAnswer:
        return post_json(self._session, self._base_url + path, body, self._headers, self._timeout_s)

    @staticmethod
    def _expect_200(answer: HttpAnswer) -> object:
        if answer.status >= 500:
            raise _ServerError(f"HTTP {answer.status}")
        if answer.status != 200:
            raise _Refused(f"HTTP {answer.status}: {answer.body[:300].decode('utf-8', 'replace')}")
        try:
            return answer.json()
        except ValueError:
            raise UnexpectedResponse(f"the answer is not JSON: {answer.body[:80]!r}") from None

    # -- feedback ------------------------------------------------------------------------------

    def report(
        self,
        evaluation: Evaluation,
        success: bool,
        latency_ms: float | None = None,
        error_type: str | None = None,
    ) -> bool:
        """Queue the outcome of ``evaluation`` for ``/v1/feedback/bulk``; never blocks or raises.

        Returns whether it was queued: not when the evaluation has no id (the SDK got no
        answer) or the queue is full (the batcher counts and logs that drop).
        """
        try:
            item = _feedback_item(evaluation, success, latency_ms, error_type)
            if item is None:
                return False
            return self.batcher.submit(item)
        except Exception:  # noqa: BLE001 - feedback must never break the application
            log.warning("flagsight: feedback not queued", exc_info=True)
            return False

    def outcome(self, evaluation: Evaluation) -> Outcome:
        """``with client.outcome(ev) as o:`` reports success on exit, failure on an exception
        (or ``o.failure(...)``), with the latency from the evaluation to the outcome."""
        return Outcome(self, evaluation)

    @property
    def batcher(self) -> FeedbackBatcher:
        """The feedback batcher, started on first use."""
        with self._batcher_lock:
            if self._batcher is None:
                self._batcher = FeedbackBatcher(
                    self._session,
                    self._base_url + "/v1/feedback/bulk",
                    self._headers,
                    **self._feedback_options,  # type: ignore[arg-type]
                )
            return self._batcher

    # -- tracked events ------------------------------------------------------------------------

    def track(self, name: str, user: str, value: float | None = None) -> bool:
        """Queue that ``user`` did ``name`` (now) for ``/v1/track``; never blocks or raises.

        ``name`` is what a metric's ``event`` names (1 to 128 letters, digits, ``.``, ``_``
        or ``-``); ``value`` an optional finite number (an amount, a duration) that metrics of
        kind sum and mean add up. Sent in batches of at most 500 as feedback is, in both modes
        (a local client's events go to the service too). Returns whether it was queued: not
        when the name or user would be refused (logged), the queue is full (counted) or the
        client is closed.
        """
        return self._track(SOURCE_SDK, name, user, value)

    def _track(self, source: str, name: str, user: str, value: float | None) -> bool:
        """``track`` as ``source`` says it (the OpenFeature provider's own)."""
        if self._closed:  # as a closed client's evaluations: nothing is sent any more
            return False
        try:
            item = track_item(name, user, value)
            return item is not None and self.track_batcher(source).submit(item)
        except Exception:  # noqa: BLE001 - tracking must never break the application
            log.warning("flagsight: tracked event not queued", exc_info=True)
            return False

    def track_batcher(self, source: str = SOURCE_SDK) -> TrackBatcher:
        """The batcher of the events tracked as ``source``, started on first use."""
        with self._batcher_lock:
            batcher = self._track_batchers.get(source)
            if batcher is None:
                batcher = self._track_batchers[source] = TrackBatcher(
                    self._session,
                    self._base_url + "/v1/track",
                    {**self._headers, TRACK_SOURCE_HEADER: source},
                    **self._feedback_options,  # type: ignore[arg-type]
                )
            return batcher

    def _batchers(self) -> list[FeedbackBatcher | TrackBatcher]:
        with self._batcher_lock:
            feedback = [self._batcher] if self._batcher is not None else []
            return [*feedback, *self._track_batchers.values()]

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Send everything reported and tracked so far; True when nothing is left pending."""
        deadline = time.monotonic() + timeout_s
        return all([b.flush(max(deadline - time.monotonic(), 0.0)) for b in self._batchers()])

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush and stop the feedback and tracking threads (it also happens at interpreter
        exit); a local client also sends its unreported evaluations and gives back its unspent
        quota, and from then on answers False (``CLIENT_CLOSED``) without a warning."""
        self._closed = True
        if self._local is not None:
            self._local.close(timeout_s)
        deadline = time.monotonic() + timeout_s  # one bound for them all
        for batcher in self._batchers():
            batcher.close(max(deadline - time.monotonic(), 0.0))

    def __enter__(self) -> FlagsightClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Outcome:
    """Measures from the evaluation to the outcome, then reports it (see ``client.outcome``)."""

    def __init__(self, client: FlagsightClient, evaluation: Evaluation):
        self._client = client
        self.evaluation = evaluation
        self._success: bool | None = None
        self._error_type: str | None = None
        self._at: float | None = None

    def success(self) -> None:
        self._settle(True, None)

    def failure(self, error_type: str | None = None) -> None:
        self._settle(False, error_type)

    def _settle(self, success: bool, error_type: str | None) -> None:
        self._success, self._error_type, self._at = success, error_type, time.monotonic()

    def __enter__(self) -> Outcome:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and self._success is not False:
            self._settle(False, exc_type.__name__)
        elif self._success is None:
            self._settle(True, None)
        latency_ms = ((self._at or time.monotonic()) - self.evaluation.evaluated_at) * 1000.0
        self._client.report(self.evaluation, bool(self._success), latency_ms, self._error_type)
        # the application's own exception, if any, goes on


class _ServerError(Exception):
    pass


class _Refused(Exception):
    pass


def _classify(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, requests.Timeout):
        return FAILURE_TIMEOUT, str(exc) or "timed out"
    if isinstance(exc, requests.ConnectionError):
        return FAILURE_CONNECTION, str(exc)
    if isinstance(exc, _ServerError):
        return FAILURE_SERVER, str(exc)
    if isinstance(exc, _Refused):
        return FAILURE_REFUSED, str(exc)
    if isinstance(exc, UnexpectedResponse | requests.RequestException):
        return FAILURE_UNEXPECTED, str(exc)
    return FAILURE_INTERNAL, f"{type(exc).__name__}: {exc}"


def _feedback_item(
    evaluation: Evaluation, success: bool, latency_ms: float | None, error_type: str | None
) -> dict[str, object] | None:
    """The FeedbackEvent, cleaned so the server cannot refuse the batch it goes in."""
    if evaluation.evaluation_id is None:
        log.warning(
            "flagsight: no feedback for flag %r: the evaluation got no answer", evaluation.flag_key
        )
        return None
    if latency_ms is not None and (
        isinstance(latency_ms, bool)  # an int to Python, refused by the server
        or not isinstance(latency_ms, int | float)
        or not math.isfinite(latency_ms)
        or latency_ms < 0
    ):
        log.warning("flagsight: latency %r is not a finite number >= 0; sent as null", latency_ms)
        latency_ms = None
    if error_type is not None:
        error_type = str(error_type)[:ERROR_TYPE_MAX]
    return {
        "evaluationId": evaluation.evaluation_id,
        "result": bool(success),
        "latencyMs": latency_ms,
        "errorType": error_type,
    }
