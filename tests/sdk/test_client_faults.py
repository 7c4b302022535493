"""The fail-safe rule (spec 7): whatever goes wrong, ``evaluate`` is False within the timeout."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import pytest
from flagsight_sdk import Evaluation, FlagsightClient
from flagsight_sdk.model import (
    FAILURE_CONNECTION,
    FAILURE_REFUSED,
    FAILURE_SERVER,
    FAILURE_TIMEOUT,
    FAILURE_UNEXPECTED,
)

from tests.sdk.fake_server import FakeServer, json_reply, sleeping

TIMEOUT_S = 1.0
MARGIN_S = 1.5
"""Past the timeout, for a loaded machine's scheduling; below the slow fault's 3 s, so a call
that waited for the answer still fails."""
GOOD = {"value": True, "matchedRuleType": "STATIC", "error": None, "evaluationId": "abc"}

FAULTS = {
    "slow": (sleeping(3.0, json_reply(200, GOOD)), FAILURE_TIMEOUT),
    "drip": (lambda path, body: None, FAILURE_TIMEOUT),
    "http-500": (lambda path, body: json_reply(500, {"status": 500}), FAILURE_SERVER),
    "http-503": (lambda path, body: json_reply(503, {"status": 503}), FAILURE_SERVER),
    "http-401": (lambda path, body: json_reply(401, {"status": 401}), FAILURE_REFUSED),
    "not-json": (
        lambda path, body: (200, {"Content-Type": "text/html"}, b"<html>oops</html>"),
        FAILURE_UNEXPECTED,
    ),
    "empty": (lambda path, body: (200, {}, b""), FAILURE_UNEXPECTED),
    "wrong-shape": (lambda path, body: json_reply(200, {"enabled": True}), FAILURE_UNEXPECTED),
    "value-not-bool": (
        lambda path, body: json_reply(200, {**GOOD, "value": "true"}),
        FAILURE_UNEXPECTED,
    ),
    "true-with-error": (
        lambda path, body: json_reply(
            200, {**GOOD, "error": {"type": "FLAG_DISABLED", "message": "x"}}
        ),
        FAILURE_UNEXPECTED,
    ),
    "json-list": (lambda path, body: json_reply(200, [True]), FAILURE_UNEXPECTED),
}


@pytest.fixture
def fault(request) -> Iterator[tuple[FakeServer, str]]:
    behaviour, failure = FAULTS[request.param]
    server = FakeServer(behaviour)
    yield server, failure
    server.close()


def timed(call) -> tuple[object, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def assert_fail_safe(evaluation: Evaluation, failure: str) -> None:
    assert evaluation.value is False and not evaluation
    assert (evaluation.failure, evaluation.evaluation_id) == (failure, None)


@pytest.mark.parametrize("fault", list(FAULTS), indirect=True)
def test_evaluate_is_false_within_the_timeout(fault, caplog) -> None:
    server, failure = fault
    client = FlagsightClient("key", server.url)
    for call in range(2):  # the second call reuses (or replaces) the pooled connection
        with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
            evaluation, elapsed = timed(lambda: client.evaluate("f", "u"))
        assert_fail_safe(evaluation, failure)
        assert elapsed < TIMEOUT_S + MARGIN_S, elapsed
        # warned once; the same failure again is counted, not logged (test_failure_log.py)
        assert (f"flagsight: {failure} for flag 'f'" in caplog.text) == (call == 0)
        caplog.clear()


@pytest.mark.parametrize("fault", ["slow", "http-500", "not-json", "drip"], indirect=True)
def test_evaluate_bulk_is_false_for_everyone_within_the_timeout(fault) -> None:
    server, failure = fault
    answers, elapsed = timed(
        lambda: FlagsightClient("key", server.url).evaluate_bulk("f", ["a", "b", "a"])
    )
    assert list(answers) == ["a", "b"]
    for evaluation in answers.values():
        assert_fail_safe(evaluation, failure)
    assert elapsed < TIMEOUT_S + MARGIN_S


@pytest.mark.parametrize("users", [None, [["a"], ["b"]], 42])
def test_evaluate_bulk_with_users_that_are_not_strings_answers_nothing_and_never_raises(
    users, caplog
) -> None:
    with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
        assert FlagsightClient("key", "http://127.0.0.1:9").evaluate_bulk("f", users) == {}
    assert "users for flag 'f' are not a list of strings" in caplog.text


def test_evaluate_bulk_takes_a_single_string_as_one_user() -> None:
    answers = FlagsightClient("key", "http://127.0.0.1:9", timeout_s=0.2).evaluate_bulk("f", "ab")
    assert list(answers) == ["ab"]


def test_server_down_is_false_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = FlagsightClient("key", f"http://127.0.0.1:{port}")
    evaluation, elapsed = timed(lambda: client.evaluate("f", "u"))
    assert_fail_safe(evaluation, FAILURE_CONNECTION)
    assert elapsed < TIMEOUT_S
    answers = client.evaluate_bulk("f", ["a"])
    assert_fail_safe(answers["a"], FAILURE_CONNECTION)


def test_a_silent_listener_times_out() -> None:
    """Accepts the connection (the kernel does) but never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        client = FlagsightClient(
            "key", f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=0.5
        )
        evaluation, elapsed = timed(lambda: client.evaluate("f", "u"))
    assert_fail_safe(evaluation, FAILURE_TIMEOUT)
    assert 0.5 <= elapsed < 0.5 + MARGIN_S


def test_bulk_answer_missing_a_user_is_unexpected() -> None:
    server = FakeServer(lambda path, body: json_reply(200, {"a": GOOD}))
    try:
        answers = FlagsightClient("key", server.url).evaluate_bulk("f", ["a", "b"])
    finally:
        server.close()
    assert [e.failure for e in answers.values()] == [FAILURE_UNEXPECTED, FAILURE_UNEXPECTED]


def test_report_on_a_failed_evaluation_queues_nothing(caplog) -> None:
    client = FlagsightClient("key", "http://127.0.0.1:9")
    failed = Evaluation.failed("f", "u", FAILURE_CONNECTION, "down")
    with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
        assert client.report(failed, True) is False
    assert "the evaluation got no answer" in caplog.text
