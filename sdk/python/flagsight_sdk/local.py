"""Local evaluation: decide in the application from a pushed ruleset, and still be metered,
logged and attributable (contract section 11; ``docs/sdk.md``, "Local evaluation").

Three background parts, each on a daemon thread, none on the application's path:

* ``RulesetFollower`` fetches ``GET /v1/ruleset`` and follows ``GET /v1/stream``; each
  ``ruleset`` event with a version it does not hold fetches again (``If-None-Match``). A lost
  stream is reconnected with jittered exponential backoff (0.5 s doubling to 30 s), and every
  reconnection fetches again, so a change made while it was away is never missed. 401/403 means
  the key is refused: from then on every evaluation answers ``REQUEST_REFUSED``.
* ``QuotaPool`` holds the quota the service granted (``POST /v1/local/quota``), each grant with
  its block of signed evaluation ids; it asks for the next grant in the background when a
  quarter of the current one is left, and synchronously (within the timeout) when none is.
  ``close()`` gives back what was not spent.
* ``ReportBatcher`` sends each evaluation to ``POST /v1/local/report`` within about a second.

Deciding is the service's own core (``flagsight_core``): same rules, bucketing, segments and
outcomes, so an answer here equals the service's for the same ruleset.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping

import requests
from flagsight_core import ERROR_MESSAGES, RESULTS, ErrorType, decide_one
from flagsight_core.attribute_rules import attributes_problem
from flagsight_core.context import context_of
from flagsight_core.contract import FLAG_KEY_MAX, LOCAL_GRANT_MAX, USER_IDENTIFIER_MAX
from flagsight_core.engine import arm as arm_in
from flagsight_core.model import NOT_EVALUATED, arm_of
from flagsight_core.ruleset import InvalidRuleset, Ruleset, ruleset_from_json

from flagsight_sdk.attributes import Attributes, for_core
from flagsight_sdk.batcher import ReportBatcher
from flagsight_sdk.model import (
    FAILURE_CONNECTION,
    FAILURE_REFUSED,
    FAILURE_TIMEOUT,
    Evaluation,
)
from flagsight_sdk.transport import HttpAnswer, new_session, post_json, request

log = logging.getLogger("flagsight_sdk")

REFILL_AT = 0.5
"""Ask for the next grant when this share of the current one is left: early enough that it
arrives before the current one runs out even when the application keeps the GIL busy."""
BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0
STREAM_READ_TIMEOUT_S = 20.0
"""No byte for this long (the service sends a comment every 5 s): the stream is dead."""
RULESET_TIMEOUT_S = 30.0
"""A large ruleset (segments of a million) may take longer than an evaluation's timeout."""
CATCH_UP_S = 5.0
CATCH_UP_RETRY_S = 0.05
_REFUSED = (401, 403)
GIVE_BACK_RETRIES_S = (0.25, 0.5, 1.0)
"""Pauses between tries of a give-back the service could not record (503) or not be reached
for: ``close()`` waits at most their sum for it."""


class KeyRefused(Exception):
    """The service refused the API key (401 or 403)."""


class _Grant:
    """One grant: ``count`` evaluations and the signed prefix of their ids. Indexes come from
    an ``itertools.count``, whose ``next`` is atomic: threads take ids without a lock."""

    __slots__ = ("count", "indexes", "prefix", "refill_at")

    def __init__(self, prefix: str, count: int):
        self.prefix, self.count = prefix, count
        self.indexes = itertools.count()
        self.refill_at = int(count * (1 - REFILL_AT))
        """The index whose taker asks for the next grant (exactly one thread takes it)."""

    def unused(self) -> int:
        return max(0, self.count - next(self.indexes))


class QuotaPool:
    """Quota and evaluation ids granted by the service; ``take`` is the hot path."""

    def __init__(self, post: Callable[[str, object], HttpAnswer], timeout_s: float):
        self._post = post
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._current: _Grant | None = None
        self._next: _Grant | None = None
        self._refill_done = threading.Event()
        self._refill_done.set()
        self._closed = False
        self.exhausted = False
        """True when the service last granted nothing: the plan's hard threshold."""
        self.refused = False

    def take(self) -> str | None:
        """The id of one more evaluation the service granted, or None (none left, or the
        service cannot be asked: ``exhausted`` and ``refused`` say which)."""
        grant = self._current
        if grant is not None:
            index = next(grant.indexes)
            if index < grant.count:
                if index == grant.refill_at:
                    self._start_refill()
                return f"{grant.prefix}{index:04x}"
        return self._take_slowly()

    def _take_slowly(self) -> str | None:
        with self._lock:
            while True:
                grant = self._current
                if grant is not None:
                    index = next(grant.indexes)
                    if index < grant.count:
                        return f"{grant.prefix}{index:04x}"
                if self._closed:
                    return None
                if self._next is not None:
                    self._current, self._next = self._next, None
                    self._start_refill()
                    continue
                # Nothing left: wait for a refill in flight, else ask now, within the timeout.
                if not self._refill_done.is_set():
                    self._refill_done.wait(self._timeout_s)
                    if self._next is not None:
                        continue
                grant = self._ask()
                if grant is None:
                    return None
                self._current = grant

    def _start_refill(self) -> None:
        if self._closed or self._next is not None or not self._refill_done.is_set():
            return
        self._refill_done.clear()
        threading.Thread(target=self._refill, name="flagsight-quota", daemon=True).start()

    def _refill(self) -> None:
        try:
            grant = self._ask()
        except Exception:  # noqa: BLE001 - a background refill must not die loudly
            grant = None
        if grant is not None and self._next is None and not self._closed:
            self._next = grant
        elif grant is not None:
            self._give_back(grant)
        self._refill_done.set()

    def _ask(self) -> _Grant | None:
        try:
            answer = self._post("/v1/local/quota", {"want": LOCAL_GRANT_MAX})
        except requests.RequestException:
            return None
        if answer.status in _REFUSED:
            self.refused = True
            return None
        if answer.status != 200:
            return None
        body = answer.json()
        granted, prefix = body.get("granted"), body.get("idPrefix")
        if not isinstance(granted, int) or granted <= 0 or not isinstance(prefix, str):
            self.exhausted = True
            return None
        self.exhausted = False
        return _Grant(prefix, granted)

    def _give_back(self, grant: _Grant) -> None:
        """Give the grant's unspent quota back. A 503 or an unreachable service is tried again
        a few times (the service refuses what it cannot record rather than drop it); what is
        still not given back counts as served this month."""
        unused = grant.unused()
        if unused <= 0:
            return
        body = {"idPrefix": grant.prefix, "unused": unused}
        for delay in (*GIVE_BACK_RETRIES_S, None):
            try:
                answer = self._post("/v1/local/quota/return", body)
            except requests.RequestException:
                answer = None
            if answer is not None and answer.status != 503:
                if answer.status != 200:
                    log.warning(
                        "flagsight: %d granted evaluations not given back (HTTP %d)",
                        unused, answer.status,
                    )  # fmt: skip
                return
            if delay is not None:
                time.sleep(delay)
        log.warning("flagsight: %d granted evaluations not given back (service away)", unused)

    def close(self) -> None:
        """Give back every unspent grant; later ``take`` calls get None."""
        with self._lock:
            self._closed = True
            grants = [g for g in (self._current, self._next) if g is not None]
            self._current = self._next = None
        for grant in grants:
            self._give_back(grant)


class RulesetFollower:
    """Keeps ``ruleset`` current: fetch, follow the stream, reconnect, fetch again."""

    def __init__(self, base_url: str, headers: dict[str, str], session: requests.Session):
        self._base_url = base_url
        self._headers = headers
        self._session = session
        self.ruleset: Ruleset | None = None
        self.refused = False
        self.ready = threading.Event()
        """Set when the first ruleset arrived, or the key was refused."""
        self.changed = threading.Event()
        self._stopping = threading.Event()
        self._etag: str | None = None
        self._response: requests.Response | None = None
        self._thread = threading.Thread(target=self._run, name="flagsight-ruleset", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self._fetch()
                self._follow()
                failures = 0  # the stream ended cleanly (the service restarted): at once
            except KeyRefused:
                self.refused = True
                self.ready.set()
                log.error("flagsight: the service refused the API key; flags answer False")
                return
            except Exception as exc:  # noqa: BLE001 - the follower must outlive any failure
                failures += 1
                if not self._stopping.is_set():
                    log.warning("flagsight: ruleset stream lost (%s); reconnecting", exc)
            delay = min(BACKOFF_CAP_S, BACKOFF_START_S * 2 ** max(0, failures - 1))
            self._stopping.wait(delay * random.uniform(0.5, 1.0) if failures else 0.05)

    def _fetch(self) -> None:
        headers = dict(self._headers)
        if self._etag is not None and self.ruleset is not None:
            headers["If-None-Match"] = self._etag
        answer = request(
            self._session, "GET", self._base_url + "/v1/ruleset", headers, RULESET_TIMEOUT_S
        )
        if answer.status in _REFUSED:
            raise KeyRefused
        if answer.status == 304:
            return
        if answer.status != 200:
            raise requests.ConnectionError(f"GET /v1/ruleset answered HTTP {answer.status}")
        try:
            ruleset = ruleset_from_json(answer.json())
        except (InvalidRuleset, ValueError) as exc:
            raise requests.ConnectionError(f"unusable ruleset: {exc}") from None
        self.ruleset, self._etag = ruleset, answer.headers.get("ETag")
        self.ready.set()
        self.changed.set()

    def _fetch_at_least(self, version: int | None) -> None:
        """Fetch until the ruleset is at ``version``: the fetch may reach another worker or
        host than the stream's, one that has not reloaded yet (it does within a poll)."""
        deadline = time.monotonic() + CATCH_UP_S
        self._fetch()
        while (
            version is not None
            and self.ruleset is not None
            and self.ruleset.version < version
            and time.monotonic() < deadline
            and not self._stopping.wait(CATCH_UP_RETRY_S)
        ):
            self._fetch()

    def _follow(self) -> None:
        """Read the stream until it ends; fetch again on each version not held."""
        response = self._session.get(
            self._base_url + "/v1/stream",
            headers={**self._headers, "Accept": "text/event-stream"},
            stream=True,
            timeout=(5.0, STREAM_READ_TIMEOUT_S),
        )
        self._response = response
        try:
            if response.status_code in _REFUSED:
                raise KeyRefused
            if response.status_code != 200:
                raise requests.ConnectionError(f"GET /v1/stream answered {response.status_code}")
            event = None
            for line in response.iter_lines():
                if self._stopping.is_set():
                    return
                if line.startswith(b"event:"):
                    event = line[6:].strip()
                elif line.startswith(b"data:") and event == b"ruleset":
                    version = _version(line[5:])
                    held = self.ruleset.version if self.ruleset is not None else None
                    if version is None or version != held:
                        self._fetch_at_least(version)
                elif not line:
                    event = None
        finally:
            response.close()
            self._response = None

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            # A read blocked in another thread returns only when its socket is shut down
            # (closing it is not enough): without this, close() waited out the join.
            sock = getattr(getattr(response.raw, "connection", None), "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            response.close()
        self._thread.join(timeout=2.0)


_PLAIN: dict[object, tuple[bool, str | None, str | None, str | None]] = {}
"""Each core result as the remote client's ``Evaluation`` holds it: plain strings, not the
core's enums (so both modes print and compare alike), made once per result."""


def _plain(result: object) -> tuple[bool, str | None, str | None, str | None]:
    rule_type, error = result.matched_rule_type, result.error_type  # type: ignore[attr-defined]
    return (
        result.value,  # type: ignore[attr-defined]
        None if rule_type is None else str(rule_type),
        None if error is None else str(error),
        None if error is None else ERROR_MESSAGES[error],
    )


def _request_problem(flag_key: object, user: object) -> str | None:
    """Why the service would refuse this evaluate request, or None: a local client answers
    as the remote one would, and never reports what the service would refuse."""
    if not isinstance(flag_key, str) or not 1 <= len(flag_key) <= FLAG_KEY_MAX:
        return f"Field 'flagKey' must be a string of 1 to {FLAG_KEY_MAX} characters"
    if not isinstance(user, str) or not 1 <= len(user) <= USER_IDENTIFIER_MAX:
        return f"Field 'userIdentifier' must be a string of 1 to {USER_IDENTIFIER_MAX} characters"
    return None


def _for_core(
    attributes: object, where: str = "attributes"
) -> tuple[dict[str, object] | None, str | None]:
    """The attributes as the core takes them, and why the service would refuse them (in its
    words), or None; never raises (the SDK fails safe, whatever the application passes)."""
    if not attributes:
        return None, None
    if not isinstance(attributes, Mapping):
        return None, attributes_problem(attributes, where)
    given = for_core(attributes)
    return given, attributes_problem(given, where)


def _version(data: bytes) -> int | None:
    import json

    try:
        version = json.loads(data).get("version")
    except (ValueError, AttributeError):
        return None
    return version if isinstance(version, int) else None


class LocalEvaluator:
    """What ``FlagsightClient(local=True)`` evaluates with; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        session: requests.Session,
        timeout_s: float,
        sdk_name: str,
        **reports: object,
    ):
        self._timeout_s = timeout_s
        self._base_url, self._headers = base_url, headers
        self._start(session)
        reports.setdefault("max_batch", 5_000)
        reports.setdefault("max_attempts", 40)
        self.reports = ReportBatcher(
            session,
            base_url + "/v1/local/report",
            headers,
            extra_body={"sdk": sdk_name},
            **reports,  # type: ignore[arg-type]
        )
        atexit.register(self._at_exit)

    def _start(self, session: requests.Session) -> None:
        """This process's follower and quota: after a fork the child starts its own (the
        parent's thread is not in it, and its ids must not be spent twice)."""
        self._pid = os.getpid()
        base_url, headers, timeout_s = self._base_url, self._headers, self._timeout_s
        self._follower = RulesetFollower(base_url, headers, session)

        def post(path: str, body: object) -> HttpAnswer:
            return post_json(session, base_url + path, body, headers, timeout_s)

        self._quota = QuotaPool(post, timeout_s)

    def _at_exit(self) -> None:
        if self._pid == os.getpid():
            self._quota.close()  # unspent quota back (the reports send themselves at exit)

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether the first ruleset arrived (or the key was refused) within ``timeout_s``."""
        return self._follower.ready.wait(timeout_s)

    @property
    def ruleset_version(self) -> int | None:
        ruleset = self._follower.ruleset
        return None if ruleset is None else ruleset.version

    @staticmethod
    def bulk_problem(users: list[str], attributes: Mapping[str, Attributes]) -> str | None:
        """Why the service would refuse a bulk request of ``users`` with these attributes by
        user (the first user's wrong field), or None: it refuses the whole request."""
        for user in users:
            problem = _for_core(attributes.get(user), f"attributes['{user}']")[1]
            if problem is not None:
                return problem
        return None

    def evaluate(
        self, flag_key: str, user: str, attributes: Attributes | None = None
    ) -> Evaluation:
        if self._pid != os.getpid():  # forked (a pre-forking server): this process's own
            self._start(new_session())
        if not (
            type(flag_key) is str
            and type(user) is str
            and 0 < len(flag_key) <= FLAG_KEY_MAX
            and 0 < len(user) <= USER_IDENTIFIER_MAX
        ):  # what the service would refuse with 400 (the common case costs no call)
            problem = _request_problem(flag_key, user) or "not a string"
            return Evaluation.failed(str(flag_key), str(user), FAILURE_REFUSED, problem)
        given, problem = _for_core(attributes)  # before any quota is spent
        if problem is not None:  # what the service refuses is refused here too, in its words
            return Evaluation.failed(flag_key, user, FAILURE_REFUSED, problem)
        follower = self._follower
        ruleset = follower.ruleset
        if ruleset is None and not follower.refused:
            follower.ready.wait(self._timeout_s)
            ruleset = follower.ruleset
        if follower.refused or self._quota.refused:
            return Evaluation.failed(
                flag_key, user, FAILURE_REFUSED, "the service refused the API key"
            )
        if ruleset is None:
            return Evaluation.failed(
                flag_key, user, FAILURE_TIMEOUT, "no ruleset yet: the service was not reached"
            )
        evaluation_id = self._quota.take()
        if evaluation_id is None:
            if self._quota.refused:
                return Evaluation.failed(
                    flag_key, user, FAILURE_REFUSED, "the service refused the API key"
                )
            if self._quota.exhausted:
                error = ErrorType.PLAN_LIMIT_EXCEEDED
                return Evaluation(
                    flag_key, user, False, None, None, str(error), ERROR_MESSAGES[error]
                )
            return Evaluation.failed(
                flag_key, user, FAILURE_CONNECTION, "no quota granted: the service was not reached"
            )
        flag = ruleset.flags.get(flag_key)
        now = time.time()
        codes, rules = decide_one(flag, user, ruleset.segments, given, at=now)
        result = RESULTS[codes[0]]
        plain = _PLAIN.get(result)
        if plain is None:
            plain = _PLAIN[result] = _plain(result)
        value, rule_type, error_type, message = plain
        rule = rules[0]
        arm = arm_of(rule, flag.split_rule) if flag is not None else None
        if arm is not None and flag is not None and flag.split_segment is not None:
            arm = arm_in(flag, rule, context_of(user, given, now), ruleset.segments)
        self.reports.offer(
            [
                evaluation_id,
                int(now * 1000),
                flag_key,
                user,
                value,
                rule_type,
                error_type,
                rule if rule < NOT_EVALUATED else None,
                arm,
                flag.split_percentage if arm is not None and flag is not None else None,
            ]
        )
        return Evaluation(flag_key, user, value, evaluation_id, rule_type, error_type, message)

    def close(self, timeout_s: float) -> None:
        """Stop following, send what is unreported, give back unspent quota."""
        self._follower.stop()
        self.reports.close(timeout_s)
        self._quota.close()
