"""The feedback batcher: batches of at most 500, retries, bounded queue, delivery at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from flagsight_sdk import Evaluation, FlagsightClient
from flagsight_sdk.batcher import (
    DROP_QUEUE_FULL,
    DROP_REFUSED,
    DROP_RETRIES_EXHAUSTED,
    DROP_UNSENT_AT_EXIT,
)

from devtools.engines.ports import free_port
from tests.sdk.fake_server import FakeServer, json_reply
from tests.support.server import REPO

BULK = "/v1/feedback/bulk"
NO_CONTENT = (204, {}, b"")


def evaluation(i: int) -> Evaluation:
    return Evaluation("f", f"user-{i}", True, f"id-{i}", "STATIC")


@pytest.fixture
def accepting() -> FakeServer:
    server = FakeServer(lambda path, body: NO_CONTENT)
    yield server
    server.close()


def sent_ids(server: FakeServer) -> list[str]:
    return [item["evaluationId"] for body in server.bodies(BULK) for item in body["feedbacks"]]


def test_batches_of_at_most_500_and_nothing_lost(accepting) -> None:
    client = FlagsightClient("key", accepting.url, interval_s=60)
    for i in range(1201):
        assert client.report(
            evaluation(i), i % 3 != 0, latency_ms=float(i), error_type="E" if i % 3 == 0 else None
        )
    assert client.flush(10)
    assert sorted(len(body["feedbacks"]) for body in accepting.bodies(BULK)) == [201, 500, 500]
    assert sorted(sent_ids(accepting)) == sorted(f"id-{i}" for i in range(1201))
    first = next(
        item
        for body in accepting.bodies(BULK)
        for item in body["feedbacks"]
        if item["evaluationId"] == "id-3"
    )
    assert first == {"evaluationId": "id-3", "result": False, "latencyMs": 3.0, "errorType": "E"}
    stats = client.batcher.stats
    assert (stats.submitted, stats.sent, stats.dropped, stats.pending) == (1201, 1201, {}, 0)


def test_sent_on_the_interval_without_flush(accepting) -> None:
    client = FlagsightClient("key", accepting.url, interval_s=0.2)
    client.report(evaluation(1), True)
    deadline = time.monotonic() + 3
    while not accepting.bodies(BULK) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sent_ids(accepting) == ["id-1"]


def test_503_and_network_errors_are_retried_with_backoff() -> None:
    answers = iter(
        [
            json_reply(503, {}, {"Retry-After": "0"}),
            json_reply(503, {}),
            json_reply(500, {}),
            NO_CONTENT,
        ]
    )
    server = FakeServer(lambda path, body: next(answers))
    try:
        client = FlagsightClient("key", server.url, backoff_s=0.01)
        client.report(evaluation(1), True)
        assert client.flush(10)
        assert sent_ids(server) == ["id-1"] * 4
        assert (client.batcher.stats.retries, client.batcher.stats.sent) == (3, 1)
    finally:
        server.close()


def test_server_down_then_up_loses_nothing() -> None:
    port = free_port()  # nothing listens yet: connection refused
    client = FlagsightClient(
        "key", f"http://127.0.0.1:{port}", backoff_s=0.1, max_backoff_s=0.3, max_attempts=50
    )
    client.report(evaluation(1), False)
    assert not client.flush(0.8)
    assert client.batcher.stats.retries >= 1
    server = FakeServer(lambda path, body: NO_CONTENT, port=port)
    try:
        assert client.flush(10)
    finally:
        server.close()
    assert sent_ids(server) == ["id-1"]
    assert (client.batcher.stats.sent, client.batcher.stats.dropped) == (1, {})


def test_a_refused_batch_is_a_reported_drop(caplog) -> None:
    server = FakeServer(
        lambda path, body: json_reply(400, {"status": 400, "message": "Field 'feedbacks[0]' ..."})
    )
    drops: list[tuple[str, int]] = []
    try:
        client = FlagsightClient(
            "key", server.url, on_drop=lambda reason, n: drops.append((reason, n))
        )
        client.report(evaluation(1), True)
        client.report(evaluation(2), True)
        assert client.flush(5)
    finally:
        server.close()
    assert drops == [(DROP_REFUSED, 2)]
    assert client.batcher.stats.dropped == {DROP_REFUSED: 2}
    assert "feedback batch of 2 refused (HTTP 400" in caplog.text


def test_retries_exhausted_is_a_reported_drop() -> None:
    server = FakeServer(lambda path, body: json_reply(503, {}))
    try:
        client = FlagsightClient("key", server.url, backoff_s=0.01, max_attempts=3)
        client.report(evaluation(1), True)
        assert client.flush(5)
    finally:
        server.close()
    assert len(server.bodies(BULK)) == 3
    assert client.batcher.stats.dropped == {DROP_RETRIES_EXHAUSTED: 1}


def test_the_queue_is_bounded_and_reports_drops(caplog) -> None:
    server = FakeServer(lambda path, body: json_reply(503, {}))
    drops: list[tuple[str, int]] = []
    try:
        client = FlagsightClient(
            "key", server.url, max_queue=3, interval_s=60, on_drop=lambda r, n: drops.append((r, n))
        )
        accepted = [client.report(evaluation(i), True) for i in range(5)]
        client.close(0.2)  # the 503s never end: the three queued are dropped, and reported
    finally:
        server.close()
    assert accepted == [True, True, True, False, False]
    assert drops == [(DROP_QUEUE_FULL, 1), (DROP_QUEUE_FULL, 1), (DROP_UNSENT_AT_EXIT, 3)]
    assert "feedback item(s) dropped (queue_full)" in caplog.text


def test_invalid_latency_is_sent_as_null_and_error_type_truncated(accepting) -> None:
    client = FlagsightClient("key", accepting.url)
    client.report(evaluation(1), True, latency_ms=float("nan"), error_type="x" * 300)
    client.report(evaluation(2), False, latency_ms=-1)
    client.report(evaluation(3), True, latency_ms=True)  # an int to Python; the server refuses it
    assert client.flush(5)
    items = {
        item["evaluationId"]: item for body in accepting.bodies(BULK) for item in body["feedbacks"]
    }
    assert (items["id-1"]["latencyMs"], len(items["id-1"]["errorType"])) == (None, 256)
    assert items["id-2"]["latencyMs"] is items["id-3"]["latencyMs"] is None


@pytest.mark.parametrize(
    ("options", "error"),
    [({"max_batch_size": 10}, TypeError), ({"max_batch": 501}, ValueError)],
)
def test_a_wrong_feedback_option_fails_at_construction(options, error) -> None:
    """Not on the first report, where it could only be logged while every report is lost."""
    with pytest.raises(error):
        FlagsightClient("key", "http://127.0.0.1:9", **options)


def test_retry_after_is_waited_for_even_past_the_longest_backoff() -> None:
    answers = iter([(429, {"Retry-After": "1"}, b""), NO_CONTENT])
    server = FakeServer(lambda path, body: next(answers))
    try:
        client = FlagsightClient("key", server.url, backoff_s=0.01, max_backoff_s=0.05)
        client.report(evaluation(1), True)
        started = time.monotonic()
        assert client.flush(5)
        assert time.monotonic() - started >= 1.0
        assert client.batcher.stats.sent == 1
    finally:
        server.close()


def test_an_unexpected_failure_of_a_send_is_retried_not_fatal(accepting, monkeypatch) -> None:
    """A failure outside requests' own exceptions (an old urllib3, a bug) must not end the
    sending thread: everything queued after it would be neither sent nor counted."""
    from flagsight_sdk import batcher as batcher_module

    real, calls = batcher_module.post_json, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise AttributeError("'HTTPResponse' object has no attribute 'read1'")
        return real(*args, **kwargs)

    monkeypatch.setattr(batcher_module, "post_json", flaky)
    client = FlagsightClient("key", accepting.url, backoff_s=0.01)
    client.report(evaluation(1), True)
    assert client.flush(5)
    client.report(evaluation(2), True)
    assert client.flush(5)
    assert sent_ids(accepting) == ["id-1", "id-2"]
    assert client.batcher.stats.retries == 1


def test_outcome_context_manager_measures_latency_and_failures(accepting) -> None:
    client = FlagsightClient("key", accepting.url)
    ok = Evaluation("f", "a", True, "id-ok", "STATIC")
    time.sleep(0.05)
    with client.outcome(ok):
        pass
    with pytest.raises(KeyError), client.outcome(Evaluation("f", "b", True, "id-raised", "STATIC")):
        raise KeyError("boom")
    with client.outcome(Evaluation("f", "c", True, "id-marked", "STATIC")) as outcome:
        outcome.failure("PaymentDeclined")
    assert client.flush(5)
    items = {
        item["evaluationId"]: item for body in accepting.bodies(BULK) for item in body["feedbacks"]
    }
    assert items["id-ok"]["result"] is True and items["id-ok"]["latencyMs"] >= 50
    assert (items["id-raised"]["result"], items["id-raised"]["errorType"]) == (False, "KeyError")
    assert (items["id-marked"]["result"], items["id-marked"]["errorType"]) == (
        False,
        "PaymentDeclined",
    )


def test_reports_are_delivered_at_interpreter_exit(accepting) -> None:
    program = textwrap.dedent(f"""
        from flagsight_sdk import Evaluation, FlagsightClient
        client = FlagsightClient("key", {accepting.url!r}, interval_s=3600)
        for i in range(700):
            client.report(Evaluation("f", f"u{{i}}", True, f"id-{{i}}"), True)
        # no flush, no close: the process just ends
    """)
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert sorted(len(body["feedbacks"]) for body in accepting.bodies(BULK)) == [200, 500]


@pytest.mark.parametrize(
    "base_url", ["flags.example.com", "localhost:8000", "http://", "ftp://flags.example.com", ""]
)
def test_a_base_url_without_scheme_or_host_fails_at_construction(base_url: str) -> None:
    """Like a misspelled option: otherwise every call would quietly answer False."""
    with pytest.raises(ValueError, match="base_url must be an http:// or https:// URL"):
        FlagsightClient("key", base_url)


def test_a_base_url_with_a_trailing_slash_reaches_the_same_paths() -> None:
    server = FakeServer(lambda path, body: (204, {}, b""))
    try:
        client = FlagsightClient("key", server.url + "/")
        assert client.report(evaluation(1), True)
        assert client.flush(5)
        assert [len(body["feedbacks"]) for body in server.bodies(BULK)] == [1]
    finally:
        server.close()


def test_what_the_application_passes_is_written_as_json_writes_it(accepting) -> None:
    """A numpy scalar or a ``str`` subclass from the application is sent as before: only the
    local client's own reports are written by msgspec, which refuses subclasses of builtins."""
    import numpy as np

    class Label(str):
        pass

    client = FlagsightClient("key", accepting.url, interval_s=60)
    ours = Evaluation("f", Label("user-1"), True, Label("id-1"), "STATIC")
    assert client.report(ours, True, latency_ms=np.float64(12.5))
    assert client.flush(10)
    assert [item for body in accepting.bodies(BULK) for item in body["feedbacks"]] == [
        {"evaluationId": "id-1", "result": True, "latencyMs": 12.5, "errorType": None}
    ]
    assert client.batcher.stats.dropped == {}


def test_a_body_not_of_the_sdks_making_is_written_all_the_same() -> None:
    """``sdk_made_body`` (msgspec) falls back to ``json_body`` for what msgspec refuses."""
    import numpy as np
    from flagsight_sdk.transport import json_body, sdk_made_body

    made = {"evaluations": [["id", 1, "f", "u", True, None, 0.5]]}
    assert sdk_made_body(made) == json_body(made)
    odd = {"evaluations": [[np.float64(0.25), "\ud800"]]}
    assert sdk_made_body(odd) == json_body(odd) == b'{"evaluations":[[0.25,"\\ud800"]]}'
