"""The worker answers a whole request the app can answer at once (``answer_now``) in the
connection's own task, and hands every other to the app through gunicorn's path; against
real gunicorn, over raw sockets, so framing, keep-alive and pipelining are the real ones.

The first tests run a small app that says which door each answer came through
(``tests.support.answer_now_app``); the last runs ``flagsight serve`` and holds its answers
through the two doors to each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.engines.ports import free_port
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.answer_now_app import MARK
from tests.support.server import REPO, GunicornServer


def start_gunicorn(log: Path, *options: str) -> tuple[subprocess.Popen[bytes], int]:
    """gunicorn with flagsight's worker class and configuration over the test app, one
    worker: the master and its port, once the port takes connections (no request made)."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", str(REPO / "api" / "server" / "gunicorn_conf.py"),
             "--bind", f"127.0.0.1:{port}", "--workers", "1", *options,
             "tests.support.answer_now_app:app"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(log.read_text()[-3000:])
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, port = start_gunicorn(tmp_path_factory.mktemp("doors") / "gunicorn.log")
    yield port
    stop(proc)


def request(path: str, body: bytes, *, version: str = "1.1", extra: str = "") -> bytes:
    head = (
        f"POST {path} HTTP/{version}\r\nHost: x\r\nContent-Type: text/plain\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def read_answers(sock: socket.socket, count: int) -> list[tuple[bytes, dict[bytes, bytes], bytes]]:
    """``count`` answers: each status line, header fields (lower-cased names) and body."""
    answers, data = [], b""
    while len(answers) < count:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(answers)} answers"
            data += chunk
        head, data = data.split(b"\r\n\r\n", 1)
        status, *lines = head.split(b"\r\n")
        fields = {n.lower(): v for n, v in (line.split(b": ", 1) for line in lines)}
        length = int(fields[b"content-length"])
        while len(data) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed within an answer"
            data += chunk
        answers.append((status, fields, data[:length]))
        data = data[length:]
    return answers


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(5)
    return sock.recv(1) == b""


def test_a_whole_request_is_answered_at_once_and_the_connection_stays_open(doors: int) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        for body in (b"one", b"two"):
            sock.sendall(request("/now", body))
            ((status, fields, answer),) = read_answers(sock, 1)
            assert (status, answer) == (b"HTTP/1.1 200 OK", b"now:" + body)
            assert b"connection" not in fields and b"date" in fields and b"server" in fields


def test_a_body_that_comes_later_goes_through_the_app(doors: int) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        whole = request("/now", b"late body")
        head, body = whole.split(b"\r\n\r\n", 1)
        sock.sendall(head + b"\r\n\r\n")
        time.sleep(0.3)  # the worker has the head and starts the request without the body
        sock.sendall(body)
        ((status, _, answer),) = read_answers(sock, 1)
        assert (status, answer) == (b"HTTP/1.1 200 OK", b"asgi:late body")


def test_pipelined_requests_are_answered_in_order_through_either_door(doors: int) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        sock.sendall(request("/now", b"1") + request("/other", b"2") + request("/now", b"3"))
        answers = [answer for _, _, answer in read_answers(sock, 3)]
        assert answers == [b"now:1", b"asgi:2", b"now:3"]
        sock.sendall(request("/now", b"4"))  # nothing of the bodies was left behind
        assert [answer for _, _, answer in read_answers(sock, 1)] == [b"now:4"]


@pytest.mark.parametrize(
    ("version", "extra"),
    [("1.1", "Connection: close\r\n"), ("1.0", "")],
    ids=["Connection: close", "HTTP/1.0"],
)
def test_a_request_that_closes_is_answered_at_once_then_closed(
    doors: int, version: str, extra: str
) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        sock.sendall(request("/now", b"last", version=version, extra=extra))
        ((_, fields, answer),) = read_answers(sock, 1)
        assert answer == b"now:last"
        assert fields[b"connection"] == b"close"
        assert closed_by_server(sock)


def test_a_failure_in_answer_now_is_handed_to_the_app_with_that_request_only(doors: int) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        sock.sendall(request("/fail", b"x") + request("/other", b"after") + request("/now", b"3"))
        (status, _, answer), *after = read_answers(sock, 3)
        assert (status, answer) == (b"HTTP/1.1 500 Internal Server Error",
                                    b"failed:broken for the test")  # fmt: skip
        assert [answer for _, _, answer in after] == [b"asgi:after", b"now:3"]


@pytest.mark.parametrize("path", ["/unframed", "/broken"])
def test_an_answer_that_cannot_be_sent_is_a_500_and_a_closed_connection(
    doors: int, path: str
) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        sock.sendall(request(path, b"x"))
        ((status, fields, answer),) = read_answers(sock, 1)
        assert status == b"HTTP/1.1 500 Internal Server Error"
        assert fields[b"connection"] == b"close"
        assert json.loads(answer)["status"] == 500  # the contract's error body
        assert closed_by_server(sock)


def test_a_long_pipeline_is_answered_whole_and_in_order(doors: int) -> None:
    bodies = [b"%d" % i for i in range(300)]
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        sock.sendall(b"".join(request("/now", body) for body in bodies))
        assert [answer for _, _, answer in read_answers(sock, 300)] == [
            b"now:" + body for body in bodies
        ]


def test_a_body_sent_at_once_despite_expect_100_continue_gets_no_interim_answer(
    doors: int,
) -> None:
    with socket.create_connection(("127.0.0.1", doors), timeout=10) as sock:
        sock.sendall(request("/now", b"eager", extra="Expect: 100-continue\r\n"))
        ((status, _, answer),) = read_answers(sock, 1)
        assert (status, answer) == (b"HTTP/1.1 200 OK", b"now:eager")


def test_the_answer_that_reaches_max_requests_closes_the_connection(tmp_path: Path) -> None:
    proc, port = start_gunicorn(tmp_path / "gunicorn.log", "--max-requests", "2")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request("/now", b"1") + request("/now", b"2"))
            (_, first, _), (_, second, answer) = read_answers(sock, 2)
            assert b"connection" not in first
            assert (second[b"connection"], answer) == (b"close", b"now:2")
            assert closed_by_server(sock)
    finally:
        stop(proc)


def test_the_app_gunicorn_loads_for_flagsight_answers_at_once(tmp_path: Path) -> None:
    """What ``flagsight serve`` loads (``api.server.gunicorn_conf.FLAGSIGHT_APP``) offers the worker
    ``answer_now``: the door the tests above hold is the one its evaluates take."""
    check = (
        "import importlib; from api.server.gunicorn_conf import FLAGSIGHT_APP; "
        "module, _, name = FLAGSIGHT_APP.partition(':'); "
        "app = getattr(importlib.import_module(module), name); "
        "print(callable(getattr(app, 'answer_now', None)))"
    )
    env = {**os.environ, "FLAGSIGHT_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", check], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1:] == ["True"], done.stderr[-3000:]


EVALUATION_ID = re.compile(rb'"evaluationId":"[A-Za-z0-9_-]+"')


@pytest.fixture(scope="module")
def flagsight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GunicornServer, Tenant]]:
    """flagsight's app under its gunicorn configuration, its at-once answers marked
    (``tests.support.marked_flagsight_app``), with a tenant and two flags."""
    from tests.conftest import ADMIN_TOKEN

    data: Path = tmp_path_factory.mktemp("flagsight") / "data"
    server = GunicornServer(data, admin_token=ADMIN_TOKEN, workers=1)
    env = {**os.environ, "FLAGSIGHT_DATA_DIR": str(data), "FLAGSIGHT_ADMIN_TOKEN": ADMIN_TOKEN}
    with (data.parent / "gunicorn.log").open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", str(REPO / "api" / "server" / "gunicorn_conf.py"),
             "--bind", f"127.0.0.1:{server.port}", "--workers", "1",
             "tests.support.marked_flagsight_app:app"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
        deadline = time.monotonic() + 60
        while True:
            try:
                tenant = admin.tenant(plan="enterprise", limit=1_000)
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        admin.flag(tenant.environment_id, "on", [{"type": "STATIC", "value": True}])
        admin.flag(tenant.environment_id, "half", [{"type": "PERCENTAGE", "percentage": 50}])
        server.wait_config_everywhere()
        yield server, tenant
    finally:
        stop(proc)


def usage(server: GunicornServer, tenant: Tenant) -> int:
    admin = Admin(requests_caller(server.url), server.admin_token)
    path = f"/organizations/{tenant.organization_id}/usage"
    return admin.request("GET", path, expect=200)["evaluations"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"flagKey":"on","userIdentifier":"u-1"}',
        b'{"flagKey":"half","userIdentifier":"u-7","sdk":"py/1.0"}',
        b'{"flagKey":"nope","userIdentifier":"u-1"}',
    ],
    ids=["static", "percentage", "no such flag"],
)
def test_flagsight_answers_an_evaluate_the_same_through_both_doors(
    flagsight: tuple[GunicornServer, Tenant], body: bytes
) -> None:
    server, tenant = flagsight
    whole = (
        b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey %s\r\nContent-Length: %d\r\n\r\n%s"
        % (tenant.api_key.encode(), len(body), body)
    )
    head, _ = whole.split(b"\r\n\r\n", 1)
    before = usage(server, tenant)
    answers = []
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(whole)  # at once, in the worker
        answers += read_answers(sock, 1)
        sock.sendall(head + b"\r\n\r\n")  # the body later: the front, through the ASGI call
        time.sleep(0.3)
        sock.sendall(body)
        answers += read_answers(sock, 1)
    (at_once_status, at_once, at_once_body), (later_status, later, later_body) = answers
    assert at_once_status == later_status == b"HTTP/1.1 200 OK"
    assert at_once.pop(MARK[0]) == MARK[1]  # the whole request took the worker's door
    assert MARK[0] not in later  # the late body, the ASGI call's
    assert list(at_once) == list(later)  # the same fields, in the same order
    for name in (b"content-type", b"ratelimit-policy", b"content-length", b"server"):
        assert at_once[name] == later[name]
    assert usage(server, tenant) - before == 2  # both metered
    assert EVALUATION_ID.sub(b"", at_once_body) == EVALUATION_ID.sub(b"", later_body)
    assert json.loads(at_once_body)["evaluationId"] != json.loads(later_body)["evaluationId"]


@pytest.mark.parametrize(
    ("path", "status"),
    [("/v1/ruleset", b"HTTP/1.1 200 OK"), ("/nowhere", b"HTTP/1.1 404 Not Found")],
)
def test_a_websocket_upgrade_is_answered_as_plain_http(
    flagsight: tuple[GunicornServer, Tenant], path: str, status: bytes
) -> None:
    """The service speaks no WebSocket: the request is answered as HTTP, with the contract's
    body, and logs no error (it got an empty 403 and an error line from Falcon)."""
    server, tenant = flagsight
    log = server.data_dir.parent / "gunicorn.log"
    logged = log.stat().st_size
    upgrade = (
        f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey {tenant.api_key}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(upgrade)
        [(answered, fields, body)] = read_answers(sock, 1)
    assert answered == status
    assert fields[b"content-type"] == b"application/json"
    document = json.loads(body)
    if status.endswith(b"404 Not Found"):
        assert document["status"] == 404
    else:
        assert "flags" in document
    time.sleep(0.3)  # a log line would be written by now
    with log.open("rb") as written:
        written.seek(logged)
        assert b'"level":"error"' not in written.read()
