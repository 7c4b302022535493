"""Clients that send too little, too slowly, or nothing at all, against a real server: a body
shorter than its Content-Length is refused (never served, metered or logged); connections that
never complete a request head are closed after the header timeout, kept-alive ones after the
keep-alive timeout; gunicorn's own refusals carry the contract's body; workers raise their
descriptor limit, and the event log survives running out of descriptors."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import requests

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.server import GunicornServer


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    srv = GunicornServer(tmp_path_factory.mktemp("slow") / "data", admin_token=ADMIN_TOKEN).start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def slow_tenant(slow_server: GunicornServer) -> Tenant:
    admin = Admin(requests_caller(slow_server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    slow_server.wait_config_everywhere()  # every worker serves the new keys and flags
    return tenant


def usage(server: GunicornServer, tenant: Tenant) -> int:
    admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
    path = f"/organizations/{tenant.organization_id}/usage"
    return admin.request("GET", path, expect=200)["evaluations"]


def evaluation_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "events").glob("event_type=evaluation/date=*/*.parquet"))


def test_a_body_shorter_than_its_content_length_is_not_served(
    slow_server: GunicornServer, slow_tenant: Tenant
) -> None:
    body = b'{"flagKey":"f","userIdentifier":"u"}'
    head = (
        b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey " + slow_tenant.api_key.encode() + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % (len(body) + 40)
    )
    with socket.create_connection(("127.0.0.1", slow_server.port), timeout=10) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)  # the rest never comes
        answer = b"".join(iter(lambda: sock.recv(4096), b""))
    assert b" 200 " not in answer.split(b"\r\n", 1)[0]
    time.sleep(2.5)  # the sealing interval is 1 s: anything logged would be in a file by now
    assert usage(slow_server, slow_tenant) == 0
    assert evaluation_files(slow_server.data_dir) == []
    whole = requests.post(
        f"{slow_server.url}/v1/evaluate",
        data=body,
        headers={
            "Authorization": f"ApiKey {slow_tenant.api_key}",
            "Content-Type": "application/json",
        },
        timeout=10,
    )
    assert whole.status_code == 200 and usage(slow_server, slow_tenant) == 1


# -- connections that never finish a request head ------------------------------------------

HEADER_TIMEOUT_S = 1.0
KEEPALIVE_S = 2
BODY_TIMEOUT_S = 3
SEND_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def timed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """Short timeouts, and a soft descriptor limit far below the hard one."""
    srv = GunicornServer(
        tmp_path_factory.mktemp("timed") / "data",
        admin_token=ADMIN_TOKEN,
        env={
            "FLAGSIGHT_HEADER_TIMEOUT": str(HEADER_TIMEOUT_S),
            "FLAGSIGHT_KEEPALIVE_TIMEOUT": str(KEEPALIVE_S),
            "FLAGSIGHT_BODY_TIMEOUT": str(BODY_TIMEOUT_S),
            "FLAGSIGHT_SEND_TIMEOUT": str(SEND_TIMEOUT_S),
        },
        open_files=(256, 4096),
    ).start()
    yield srv
    srv.kill()


def send_unless_closed(sock: socket.socket, data: bytes) -> None:
    """On a loaded machine the server may close a slow sender before its next line: fine."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) within ``within_s`` seconds."""
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_idle_and_slow_header_connections_are_closed_after_the_header_timeout(
    timed_server: GunicornServer,
) -> None:
    address = ("127.0.0.1", timed_server.port)
    started = time.monotonic()
    idle = [socket.create_connection(address, timeout=5) for _ in range(200)]
    slow = [socket.create_connection(address, timeout=5) for _ in range(50)]
    try:
        for sock in slow:
            send_unless_closed(sock, b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\n")
        for _ in range(3):  # a header line now and then: never a complete head
            time.sleep(0.3)
            for sock in slow:
                send_unless_closed(sock, b"X-Slow: 1\r\n")
        assert requests.get(f"{timed_server.url}/healthz", timeout=5).status_code == 200
        for sock in idle + slow:
            assert closed_by_server(sock, HEADER_TIMEOUT_S + 5)
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 5
    finally:
        for sock in idle + slow:
            sock.close()


def test_a_kept_alive_connection_is_closed_after_the_keepalive_timeout(
    timed_server: GunicornServer,
) -> None:
    with socket.create_connection(("127.0.0.1", timed_server.port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(KEEPALIVE_S / 2)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # still open within it
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        assert closed_by_server(sock, KEEPALIVE_S + 3)


def server_side_connections(server: GunicornServer, client_port: int) -> list[str]:
    """The server's end of the connection from ``client_port``, as ``ss`` lists it."""
    import subprocess

    query = f"sport = :{server.port} and dport = :{client_port}"
    return subprocess.run(
        ["ss", "-tnH", "state", "connected", query], capture_output=True, text=True, check=True
    ).stdout.splitlines()


def test_a_client_that_never_reads_is_closed_after_the_send_timeout(
    timed_server: GunicornServer,
) -> None:
    """1,000 pipelined requests for the OpenAPI document, none of the answers read: once the
    buffers are full the server waits ``FLAGSIGHT_SEND_TIMEOUT`` for the client to read, then
    drops the connection and what it buffered for it, instead of holding both for ever."""
    one = requests.get(f"{timed_server.url}/openapi.json", timeout=10)
    request = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    sock = socket.create_connection(("127.0.0.1", timed_server.port), timeout=10)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client_port = sock.getsockname()[1]
        with contextlib.suppress(BlockingIOError, BrokenPipeError, ConnectionResetError):
            sock.setblocking(False)
            for _ in range(1_000):  # as much as the server takes before it stops reading
                sock.send(request)
        sock.setblocking(True)
        time.sleep(1.0)
        assert server_side_connections(timed_server, client_port), "the connection was open"
        deadline = time.monotonic() + SEND_TIMEOUT_S + 10
        while server_side_connections(timed_server, client_port):
            assert time.monotonic() < deadline, "the server kept a client that reads nothing"
            time.sleep(0.2)
        received = 0
        sock.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += len(chunk)
        assert received < 1_000 * len(one.content)  # the buffered answers were dropped
    finally:
        sock.close()
    assert requests.get(f"{timed_server.url}/healthz", timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("sent", "status"), [(b"", 408), (b'{"name":"n",', 400)], ids=["no body", "part of it"]
)
def test_a_body_that_stops_coming_is_refused_after_the_body_timeout(
    timed_server: GunicornServer, sent: bytes, status: int
) -> None:
    """The connection stays open; the body wait runs out. Nothing of it arrived: 408 (it used
    to be a 500 from gunicorn, as the app never answered); a part arrived: 400."""
    head = (
        b"POST /admin/v1/organizations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + ADMIN_TOKEN.encode() + b"\r\nContent-Length: 100\r\n\r\n"
    )
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", timed_server.port), timeout=30) as sock:
        sock.sendall(head + sent)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    assert time.monotonic() - started < BODY_TIMEOUT_S + 10
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 %d " % status), answer[:300]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["status"] == status


def test_workers_run_with_the_soft_descriptor_limit_raised_to_the_hard_one(
    timed_server: GunicornServer,
) -> None:
    for pid in timed_server.worker_pids():
        limits = Path(f"/proc/{pid}/limits").read_text()
        line = next(row for row in limits.splitlines() if row.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        assert (soft, hard) == ("4096", "4096"), line


@pytest.mark.parametrize(
    ("request_bytes", "status", "phrase"),
    [
        (b"GET /" + b"x" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "URI Too Long"),
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-H%d: 1\r\n" % i for i in range(120))
            + b"\r\n",
            431,
            "Request Header Fields Too Large",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"x" * 9000 + b"\r\n\r\n",
            431,
            "Request Header Fields Too Large",
        ),
        (b"NOT A REQUEST LINE\r\n\r\n", 400, "Bad Request"),
        (  # gunicorn's own answer would be 501: nothing a client sends makes a 5xx
            b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br, chunked\r\n\r\n",
            400,
            "Bad Request",
        ),
    ],
)
def test_gunicorn_refusals_carry_the_contract_body(
    timed_server: GunicornServer, request_bytes: bytes, status: int, phrase: str
) -> None:
    with socket.create_connection(("127.0.0.1", timed_server.port), timeout=5) as sock:
        sock.sendall(request_bytes)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == f"HTTP/1.1 {status} {phrase}".encode()
    assert b"content-type: application/json" in head.lower()
    parsed = json.loads(body)
    assert (parsed["status"], parsed["error"]) == (status, phrase) and parsed["message"]


@pytest.fixture
def cramped_server(tmp_path: Path) -> Iterator[GunicornServer]:
    """A hard limit of 256 descriptors, which 1,000 idle connections exhaust."""
    srv = GunicornServer(tmp_path / "data", admin_token=ADMIN_TOKEN, open_files=(256, 256))
    yield srv.start()
    srv.kill()


def test_the_event_log_survives_running_out_of_descriptors(
    cramped_server: GunicornServer,
) -> None:
    """Flood the workers past their descriptor limit while a kept-alive client evaluates:
    each worker accepts only as many connections as leave it its reserve of descriptors
    (``api.server.acceptor``), the rest wait in the backlog, so the event log never runs
    out; its answers go on, every acknowledged evaluation reaches the lake, and no worker
    dies."""
    timed_server = cramped_server
    admin = Admin(requests_caller(timed_server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    timed_server.wait_config_everywhere()  # every worker serves the new keys and flags
    workers = sorted(timed_server.worker_pids())
    session = requests.Session()
    session.headers.update({"Authorization": f"ApiKey {tenant.api_key}"})
    acknowledged: list[str] = []

    def evaluate(user: str) -> None:
        answer = session.post(
            f"{timed_server.url}/v1/evaluate", json={"flagKey": "f", "userIdentifier": user},
            timeout=10,
        )  # fmt: skip
        assert answer.status_code == 200
        acknowledged.append(answer.json()["evaluationId"])

    evaluate("before")
    flood = []
    try:
        for _ in range(1000):  # the listen backlog takes what the workers cannot accept
            flood.append(socket.create_connection(("127.0.0.1", timed_server.port), timeout=5))
            if len(flood) % 100 == 0:
                evaluate(f"flood-{len(flood)}")  # on the kept-alive connection
        for i in range(15):  # rotation and sealing need descriptors: a few ticks fail
            evaluate(f"during-{i}")
            time.sleep(0.2)
    finally:
        for sock in flood:
            sock.close()
    log = timed_server.log_path.read_text()
    assert "Too many open files" not in log  # the reserve kept descriptors for the log
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            evaluate("after")
            break
        except (requests.RequestException, AssertionError):
            time.sleep(0.5)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not set(acknowledged) <= set(lake_ids(timed_server)):
        time.sleep(0.5)
    assert set(acknowledged) <= set(lake_ids(timed_server))
    assert sorted(timed_server.worker_pids()) == workers


def lake_ids(server: GunicornServer) -> list[str]:
    files = evaluation_files(server.data_dir)
    if not files:
        return []
    query = f"SELECT evaluation_id FROM read_parquet('{server.data_dir}/events/event_type=evaluation/*/*.parquet')"
    with duckdb.connect() as con:  # not the module's default connection, alive until exit
        return [row[0] for row in con.sql(query).fetchall()]


def test_the_listen_backlog_is_gunicorns_configured_one_not_the_event_loops(
    slow_server: GunicornServer,
) -> None:
    """The event loop listens again when it starts serving; with its default (100) fresh
    clients were reset while the workers were at their descriptor limit. ``ss`` shows a
    listening socket's backlog as its send queue."""
    import subprocess

    from api.server.gunicorn_conf import backlog

    listening = subprocess.run(
        ["ss", "-ltnH", f"sport = :{slow_server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert listening[0] == "LISTEN" and int(listening[2]) == backlog == 2048, listening


@pytest.mark.parametrize("coding", [b"gzip, chunked", b"identity, chunked", b"deflate,chunked"])
def test_a_transfer_coding_other_than_chunked_is_refused_unread(
    slow_server: GunicornServer, slow_tenant: Tenant, coding: bytes
) -> None:
    """gunicorn removes the chunking and would hand on the still-coded body as the body."""
    body = b'{"flagKey":"f","userIdentifiers":["u1","u2"]}'
    request = (
        b"POST /v1/evaluate/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey " + slow_tenant.api_key.encode() + b"\r\n"
        b"Transfer-Encoding: " + coding + b"\r\nConnection: close\r\n\r\n"
        b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    )
    before = usage(slow_server, slow_tenant)
    with socket.create_connection(("127.0.0.1", slow_server.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b"".join(iter(lambda: sock.recv(4096), b""))  # ends: the server closes
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n", 1)[0] == b"HTTP/1.1 400 Bad Request", answer
    refused = json.loads(payload)
    assert (refused["status"], refused["error"]) == (400, "Bad Request")
    assert refused["message"].startswith(f"Transfer-Encoding '{coding.decode()}' is not supported")
    assert usage(slow_server, slow_tenant) == before


def test_a_chunked_body_is_still_served(slow_server: GunicornServer, slow_tenant: Tenant) -> None:
    body = b'{"flagKey":"f","userIdentifiers":["u1","u2"]}'
    request = (
        b"POST /v1/evaluate/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey " + slow_tenant.api_key.encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", slow_server.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b"".join(iter(lambda: sock.recv(4096), b""))
    assert answer.startswith(b"HTTP/1.1 200 "), answer


@pytest.mark.parametrize(
    ("path", "size", "limit"),
    [
        ("/v1/evaluate", 0x20000, 65_536),  # past the route's limit: the route refuses it
        ("/v1/evaluate/bulk", 0xFFFFFFFF, 67_108_864),  # past every route's: the worker does
        ("/v1/evaluate/bulk", 0x2000000, 16_777_216),  # 32 MiB: past bulk's 16 MiB only
    ],
    ids=["single", "past every route", "past bulk"],
)
def test_a_chunk_announced_past_the_limit_is_refused_at_once(
    slow_server: GunicornServer, slow_tenant: Tenant, path: str, size: int, limit: int
) -> None:
    """413 as soon as the chunk's size line arrives, not 400 once the body stops coming (the
    body timeout: 30 s here, which the socket's 20 s timeout would hit first)."""
    before = usage(slow_server, slow_tenant)
    head = _chunked_head(path, b"ApiKey " + slow_tenant.api_key.encode())
    with socket.create_connection(("127.0.0.1", slow_server.port), timeout=20) as sock:
        sock.sendall(head + b"%x\r\n" % size + b'{"flagKey":"f","userIdent')
        answer = b"".join(iter(lambda: sock.recv(4096), b""))
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 413 Payload Too Large"), answer
    assert b"connection: close" in status.lower()
    assert json.loads(body)["message"] == f"The request body is larger than {limit} bytes"
    assert usage(slow_server, slow_tenant) == before


def _chunked_head(path: str, authorization: bytes, method: bytes = b"POST") -> bytes:
    return (
        method + b" " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nAuthorization: " + authorization + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )


def _first_chunk_only(port: int, head: bytes, body: bytes, half_close: bool) -> bytes:
    """The whole JSON in one chunk, and never the final ``0`` chunk: wait for the body timeout
    (or half-close at once); what the server answered, if anything."""
    with socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT_S + 10) as sock:
        sock.sendall(head + b"%x\r\n" % len(body) + body + b"\r\n")
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        try:
            return b"".join(iter(lambda: sock.recv(4096), b""))
        except OSError:
            return b""


@pytest.mark.parametrize("half_close", [False, True], ids=["stalled", "half-closed"])
@pytest.mark.parametrize(
    "path", ["/v1/evaluate", "/v1/evaluate/bulk", "/ofrep/v1/evaluate/flags/f"]
)
def test_a_chunked_body_cut_before_its_last_chunk_is_not_served_metered_or_logged(
    timed_server: GunicornServer, path: str, half_close: bool
) -> None:
    admin = Admin(requests_caller(timed_server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    admin.flag(tenant.environment_id, "f", [{"type": "STATIC"}])
    timed_server.wait_config_everywhere()
    body = {
        "/v1/evaluate": b'{"flagKey":"f","userIdentifier":"u"}',
        "/v1/evaluate/bulk": b'{"flagKey":"f","userIdentifiers":["u1","u2"]}',
        "/ofrep/v1/evaluate/flags/f": b'{"context":{"targetingKey":"u"}}',
    }[path]
    head = _chunked_head(path, b"ApiKey " + tenant.api_key.encode())
    answer = _first_chunk_only(timed_server.port, head, body, half_close)
    assert b" 200 " not in answer.split(b"\r\n", 1)[0], answer
    if answer:
        assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 400 Bad Request", answer
        assert b"did not arrive whole" in answer
    time.sleep(2.5)  # sealed within the 1 s interval if anything had been logged
    assert usage(timed_server, tenant) == 0
    logged = [
        row
        for path in evaluation_files(timed_server.data_dir)
        for row in duckdb.sql(f"SELECT environment_id FROM '{path}'").fetchall()
        if row[0] == tenant.environment_id
    ]
    assert logged == []


def test_a_chunked_admin_write_cut_before_its_last_chunk_is_not_applied(
    timed_server: GunicornServer,
) -> None:
    admin = Admin(requests_caller(timed_server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    path = f"/admin/v1/environments/{tenant.environment_id}/flags/cut"
    head = _chunked_head(path, b"Bearer " + ADMIN_TOKEN.encode(), method=b"PUT")
    answer = _first_chunk_only(
        timed_server.port, head, b'{"enabled": true, "rules": []}', half_close=False
    )
    assert answer.split(b"\r\n", 1)[0] in (b"", b"HTTP/1.1 400 Bad Request"), answer
    assert admin.request("GET", f"/environments/{tenant.environment_id}/flags/cut")["status"] == 404


def test_requests_half_closed_after_they_were_sent_are_answered_as_they_are_metered(
    slow_server: GunicornServer, slow_tenant: Tenant
) -> None:
    """``shutdown(SHUT_WR)`` right after a whole request: the answer still comes (it was
    served, metered and logged, then dropped), and then the connection closes."""
    body = b'{"flagKey":"f","userIdentifiers":["u1","u2"]}'
    request = (
        b"POST /v1/evaluate/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: ApiKey " + slow_tenant.api_key.encode() + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )
    before = usage(slow_server, slow_tenant)
    answered = 0
    for _ in range(40):
        with socket.create_connection(("127.0.0.1", slow_server.port), timeout=10) as sock:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
            answer = b"".join(iter(lambda: sock.recv(4096), b""))
        answered += answer.startswith(b"HTTP/1.1 200 ")
    assert answered == 40
    assert usage(slow_server, slow_tenant) - before == 2 * answered


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_an_answer_before_the_body_has_arrived_says_the_connection_closes(
    slow_server: GunicornServer, framing: str
) -> None:
    """A bad key is refused before the body is read. The rest of the body cannot be told
    from a next request, so the connection closes after the answer; the answer says so, and
    a request pipelined behind it is not silently lost by a client that believed it open."""
    body = b'{"flagKey":"f","userIdentifier":"u"}'
    if framing == "chunked":
        head = _chunked_head("/v1/evaluate", b"ApiKey fsk_not_a_key")
        first, rest = b"%x\r\n" % len(body) + body + b"\r\n", b"0\r\n\r\n"
    else:
        head = (
            b"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: ApiKey fsk_not_a_key\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        first, rest = body[:10], body[10:]
    with socket.create_connection(("127.0.0.1", slow_server.port), timeout=10) as sock:
        sock.sendall(head + first)
        time.sleep(0.5)  # answered meanwhile
        send_unless_closed(sock, rest + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            answer = b"".join(iter(lambda: sock.recv(4096), b""))
    head_lines = answer.partition(b"\r\n\r\n")[0].lower().split(b"\r\n")
    assert head_lines[0] == b"http/1.1 401 unauthorized", answer
    assert b"connection: close" in head_lines, answer
    assert answer.count(b"HTTP/1.1 ") == 1


@pytest.fixture
def limited_server(tmp_path: Path) -> Iterator[GunicornServer]:
    """Two workers held to 1,024 descriptors each (``ulimit -n 1024``, soft and hard), with a
    short header timeout so that idle connections are let go in seconds."""
    srv = GunicornServer(
        tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        env={"FLAGSIGHT_HEADER_TIMEOUT": "2"},
        open_files=(1024, 1024),
    )
    yield srv.start()
    srv.kill()


def test_fresh_clients_wait_in_the_backlog_while_junk_connections_fill_the_workers(
    limited_server: GunicornServer,
) -> None:
    """2,000 connections that send nothing take every descriptor the workers have; 120 fresh
    clients connecting meanwhile wait in the listen backlog (not reset) and are all answered
    once the header timeout has closed the junk."""
    from concurrent.futures import ThreadPoolExecutor

    junk: list[socket.socket] = []
    try:
        for _ in range(2_000):
            junk.append(socket.create_connection(("127.0.0.1", limited_server.port), timeout=10))

        def fresh(_: int) -> int:
            return requests.get(f"{limited_server.url}/healthz", timeout=60).status_code

        with ThreadPoolExecutor(max_workers=120) as pool:
            statuses = list(pool.map(fresh, range(120)))
    finally:
        for sock in junk:
            sock.close()
    assert statuses == [200] * 120
    assert len(limited_server.worker_pids()) == 2


def test_a_graceful_stop_does_not_wait_for_idle_kept_alive_connections(tmp_path: Path) -> None:
    """A client's pool holds a kept-alive connection to each worker; SIGTERM closes those at
    once instead of waiting the whole graceful timeout (here 30 s) for them to go away."""
    server = GunicornServer(
        tmp_path / "data", admin_token=ADMIN_TOKEN, env={"FLAGSIGHT_GRACEFUL_TIMEOUT": "30"}
    ).start()
    try:
        settled = time.monotonic() + 20  # both workers up, one delivering webhooks: a stop
        while time.monotonic() < settled and not (  # during start-up is another matter
            server.log_path.read_text().count('"worker started"') == 2
            and '"webhook deliverer active"' in server.log_path.read_text()
        ):
            time.sleep(0.1)
        pool = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(8)]
        for sock in pool:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        server.stop(timeout_s=60)
        assert time.monotonic() - started < 15  # not the 30 s graceful timeout
        assert all(closed_by_server(sock, 5) for sock in pool)
    finally:
        server.kill()
