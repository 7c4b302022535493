"""What the SDK logs when evaluations fail: a warning when an outage starts, then at most one
per interval saying how many were not logged, an info line when the service answers again;
and nothing at all once the client is closed (closing is not an outage)."""

from __future__ import annotations

import logging
import re
import socket
import threading

import pytest
from flagsight_sdk import FlagsightClient
from flagsight_sdk.failure_log import FailureLog
from flagsight_sdk.model import FAILURE_CLOSED, FAILURE_CONNECTION, FAILURE_REFUSED
from flagsight_sdk.transport import new_session

from tests.sdk.fake_server import FakeServer, json_reply

GOOD = {"value": True, "matchedRuleType": "STATIC", "error": None, "evaluationId": "abc"}


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def sdk_records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "flagsight_sdk"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_one_warning_then_one_info_line_when_the_service_answers(caplog) -> None:
    port = unused_port()
    session = new_session()
    client = FlagsightClient("key", f"http://127.0.0.1:{port}", session=session)
    with caplog.at_level(logging.INFO, logger="flagsight_sdk"):
        failed = [client.evaluate("f", f"u{n}") for n in range(50)]
        failed += client.evaluate_bulk("f", ["a", "b"]).values()
        assert {e.failure for e in failed} == {FAILURE_CONNECTION} and not any(failed)
        ((level, message),) = sdk_records(caplog)
        assert level == "WARNING"
        assert message.startswith("flagsight: CONNECTION_ERROR for flag 'f': ")
        assert message.endswith("; using False (more of these: one line every 60 s)")

        caplog.clear()
        server = FakeServer(lambda path, body: json_reply(200, GOOD), port=port)
        try:
            assert client.evaluate("f", "u") and client.evaluate("f", "u")
        finally:
            server.close()
            session.close()  # its kept-alive connection would still reach the handler
        ((level, message),) = sdk_records(caplog)
        assert level == "INFO"
        assert re.fullmatch(
            r"flagsight: the service answers again; 52 evaluations failed in the \d+ s "
            r"before, each answered False",
            message,
        )

        caplog.clear()
        assert client.evaluate("f", "u").failure == FAILURE_CONNECTION  # a new outage: told
    assert [level for level, _ in sdk_records(caplog)] == ["WARNING"]


def test_a_warning_each_interval_says_how_many_were_not_logged(caplog) -> None:
    """The interval is a parameter: a short one, and evaluations until the second warning."""
    client = FlagsightClient("key", f"http://127.0.0.1:{unused_port()}", warning_interval_s=0.05)
    with caplog.at_level(logging.WARNING, logger="flagsight_sdk"):
        client.evaluate("f", "u")
        evaluations = 0
        while len(sdk_records(caplog)) < 2 and evaluations < 1_000_000:
            client.evaluate("f", "u")
            evaluations += 1
    first, second = (message for _, message in sdk_records(caplog))
    assert first.endswith("(more of these: one line every 0.05 s)")
    not_logged = re.search(r"\(and (\d+) more evaluations not logged in the last \d+ s\)$", second)
    assert not_logged is not None, second
    assert int(not_logged.group(1)) == evaluations - 1


def test_the_interval_and_counts_by_the_clock(caplog) -> None:
    clock = Clock()
    failures = FailureLog(60.0, clock)
    with caplog.at_level(logging.INFO, logger="flagsight_sdk"):
        for second in range(61):  # one failed evaluation a second, then 5 at once
            clock.now = 1000.0 + second
            failures.failed(FAILURE_CONNECTION, "f", "down")
        failures.failed(FAILURE_CONNECTION, "f", "down", evaluations=5)
        failures.failed(FAILURE_REFUSED, "g", "HTTP 400")  # another kind: told at once
        clock.now = 1070.0
        failures.answered()
        failures.answered()  # once over, said once
        failures.failed(FAILURE_REFUSED, "g", "HTTP 400")  # not an outage: still limited
    assert sdk_records(caplog) == [
        (
            "WARNING",
            "flagsight: CONNECTION_ERROR for flag 'f': down; "
            "using False (more of these: one line every 60 s)",
        ),
        (
            "WARNING",
            "flagsight: CONNECTION_ERROR for flag 'f': down; "
            "using False (and 59 more evaluations not logged in the last 60 s)",
        ),
        (
            "WARNING",
            "flagsight: REQUEST_REFUSED for flag 'g': HTTP 400; "
            "using False (more of these: one line every 60 s)",
        ),
        (
            "INFO",
            "flagsight: the service answers again; 66 evaluations failed in the 70 s before, "
            "each answered False",
        ),
    ]


def test_a_closed_local_client_answers_false_and_logs_nothing(caplog) -> None:
    before = set(threading.enumerate())
    client = FlagsightClient("key", f"http://127.0.0.1:{unused_port()}", local=True)
    client.close()
    with caplog.at_level(logging.DEBUG, logger="flagsight_sdk"):
        caplog.clear()
        evaluation = client.evaluate("f", "u")
        bulk = client.evaluate_bulk("f", ["a", "b"])
    assert (evaluation.value, evaluation.failure) == (False, FAILURE_CLOSED)
    assert evaluation.error_message == "the client is closed"
    assert [e.failure for e in bulk.values()] == [FAILURE_CLOSED, FAILURE_CLOSED]
    assert sdk_records(caplog) == []
    # and no thread of the client is left to log anything later
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
