"""``api.server.http_worker``'s memo of response fields: what gunicorn would send and refuse, from a
dictionary; and the seams it is bound through, which a gunicorn upgrade could move."""

from __future__ import annotations

import asyncio
import collections
import sys
import types

import gunicorn.asgi.protocol as gprotocol
import gunicorn.workers.gasgi as gasgi
import pytest
from gunicorn.asgi.protocol import ASGIProtocol

from api.server.http_worker import FlagsightProtocol, ResponseFields, install_seams

ORIGINAL_SCAN = gprotocol._scan_response_headers
EVALUATE = [
    (b"content-type", b"application/json"),
    (b"ratelimit-policy", b'"monthly";q=1100000'),
    (b"ratelimit", b'"monthly";r=1099958;t=604800'),
    (b"content-length", b"112"),
]
ANSWERS = {
    "evaluate": EVALUATE,
    "no length": EVALUATE[:3],
    "chunked": [(b"content-type", b"text/plain"), (b"transfer-encoding", b"chunked")],
    "own date, server, connection": [
        (b"Date", b"Thu, 26 Nov 2026 03:00:00 GMT"),
        (b"server", b"flagsight"),
        (b"Connection", b"close"),
        (b"Content-Length", b"0"),
    ],
    "str fields": [("content-type", "application/json"), ("content-length", "2")],
    "list pairs": [[b"content-type", b"application/json"], [b"content-length", b"2"]],
    "mixed": [(b"x-a", b"1"), ("x-b", "2"), (b"content-length", b"2")],
    "empty": [],
}


def gunicorns_head(status: int, headers: list, close: bool) -> bytes:
    """What gunicorn's own ``_send_response_start`` buffers for the answer."""
    plain = types.SimpleNamespace()
    ASGIProtocol._send_response_start(
        plain, status, headers, types.SimpleNamespace(version=(1, 1)), close
    )
    return plain._response_buffer


def flagsights_head(status: int, headers: list, close: bool) -> bytes:
    protocol = FlagsightProtocol.__new__(FlagsightProtocol)
    protocol._send_response_start(status, headers, types.SimpleNamespace(version=(1, 1)), close)
    return protocol._response_buffer


@pytest.mark.parametrize("headers", ANSWERS.values(), ids=ANSWERS)
@pytest.mark.parametrize("close", [False, True])
def test_the_memo_scans_and_writes_as_gunicorn(headers: list, close: bool) -> None:
    fields = ResponseFields()
    for _ in range(2):  # learning the fields, then from the memo
        assert fields.scan(headers) == ORIGINAL_SCAN(headers)
        assert flagsights_head(200, headers, close) == gunicorns_head(200, headers, close)
        assert fields.head(b"HTTP/1.1 204 No Content\r\n", headers, close) in (
            None,
            gunicorns_head(204, headers, close),
        )


@pytest.mark.parametrize(
    ("field", "refusal"),
    [
        ((b"x-echo", b"a\r\nSet-Cookie: b"), gprotocol.InvalidResponseHeader),
        ((b"x echo", b"a"), gprotocol.InvalidResponseHeaderName),
        ((b"x-echo", b"a\x00"), gprotocol.InvalidResponseHeader),
    ],
)
def test_a_field_gunicorn_refuses_is_refused_every_time(field: tuple, refusal: type) -> None:
    fields = ResponseFields()
    headers = [EVALUATE[0], field]
    with pytest.raises(refusal):
        ORIGINAL_SCAN(headers)
    for _ in range(2):  # never remembered as valid
        with pytest.raises(refusal):
            fields.scan(headers)
        with pytest.raises(refusal):
            fields.head(b"HTTP/1.1 200 OK\r\n", headers, False)


def test_the_memo_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr("api.server.http_worker.FIELDS_KEPT", 8)
    fields = ResponseFields()
    for length in range(100):
        headers = [(b"content-length", str(length).encode())]
        assert fields.scan(headers) == (True, str(length).encode(), False)
    assert len(fields._known) <= 8


def test_the_seams_are_where_gunicorn_looks(monkeypatch) -> None:
    monkeypatch.setattr(gasgi, "ASGIProtocol", gasgi.ASGIProtocol)
    monkeypatch.setattr(gprotocol, "_scan_response_headers", ORIGINAL_SCAN)
    install_seams()
    assert gasgi.ASGIProtocol is FlagsightProtocol
    assert gprotocol._scan_response_headers.__self__.__class__ is ResponseFields
    # gunicorn's answer path looks the scan up by its module-level name at each answer, and
    # its worker makes protocols through its module-level ``ASGIProtocol``
    send = next(
        const
        for const in ASGIProtocol._handle_http_request.__code__.co_consts
        if isinstance(const, types.CodeType) and const.co_name == "send"
    )
    assert "_scan_response_headers" in send.co_names
    assert "_send_response_start" in send.co_names
    assert any(
        "ASGIProtocol" in code.co_names for code in _nested_code(vars(gasgi.ASGIWorker).values())
    )


def _nested_code(functions) -> list[types.CodeType]:
    """Every code object of ``functions``, their lambdas and inner functions included."""
    found = []
    pending = [f.__code__ for f in functions if hasattr(f, "__code__")]
    while pending:
        code = pending.pop()
        found.append(code)
        pending += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def test_a_one_shot_iterable_of_fields_is_left_to_gunicorn() -> None:
    fields = ResponseFields()
    refused = [(b"x-a", b"1"), ("x-b", "a\r\nb")]
    with pytest.raises(gprotocol.InvalidResponseHeader):
        fields.scan(iter(refused))
    assert fields.scan(iter(EVALUATE)) == ORIGINAL_SCAN(EVALUATE)
    assert fields.head(b"HTTP/1.1 200 OK\r\n", iter(EVALUATE), False) is None


FRAMED = {
    "framed": (EVALUATE, 112, True),
    "another length": (EVALUATE, 111, False),
    "no length": (EVALUATE[:3], 112, False),
    "two lengths": ([*EVALUATE, (b"content-length", b"112")], 112, False),
    "chunked too": ([*EVALUATE, (b"transfer-encoding", b"chunked")], 112, False),
    "not a number": ([*EVALUATE[:3], (b"content-length", b"+112")], 112, False),
    "str fields": ([("content-type", "application/json"), ("content-length", "2")], 2, False),
}


@pytest.mark.parametrize(("headers", "length", "framed"), FRAMED.values(), ids=FRAMED)
def test_an_answer_at_once_is_written_only_when_its_fields_frame_its_body(
    headers: list, length: int, framed: bool
) -> None:
    status_line = b"HTTP/1.1 200 OK\r\n"
    head = ResponseFields().framed_head(status_line, headers, length, False)
    assert head == (gunicorns_head(200, headers, False) if framed else None)


class StubApp:
    """An app that answers everything at once, counting what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def answer_now(self, method: str, path: str, headers: list, raw: bytes):  # noqa: ANN201
        self.asked += 1
        return [(b"content-length", b"2")], b"ok"


def at_once(closed: bool = False, pipelined: bytes = b"") -> tuple[FlagsightProtocol, list]:
    """A connection with one whole request received; what it writes goes to the list."""
    protocol = FlagsightProtocol.__new__(FlagsightProtocol)
    written: list[bytes] = []
    protocol.app = StubApp()
    protocol._body_receiver = types.SimpleNamespace(
        _complete=True, _chunks=collections.deque([b"{}"]), _buffered=2, _closed=closed,
        _body_finished=False,
    )  # fmt: skip
    protocol._callback_parser = types.SimpleNamespace(remaining=lambda: pipelined)
    protocol._closed = False
    protocol._pre_request = protocol._post_request = protocol._flow_control = None
    protocol._write_paused = protocol._reading_paused = False
    protocol._keepalive = 2
    protocol.log = types.SimpleNamespace(access_log_enabled=False)
    protocol.worker = types.SimpleNamespace(alive=True, nr=0, max_requests=sys.maxsize)
    protocol.transport = types.SimpleNamespace(write=written.append)
    return protocol, written


REQUEST = types.SimpleNamespace(
    method="POST", path="/", headers_bytes=[], version=(1, 1), should_close=lambda: False
)


@pytest.mark.parametrize(("pipelined", "yields"), [(b"", 0), (b"POST / HTTP/1.1\r\n", 1)])
def test_an_answer_at_once_lets_other_connections_in_while_a_pipelined_request_waits(
    monkeypatch, pipelined: bytes, yields: int
) -> None:
    protocol, written = at_once(pipelined=pipelined)
    turns: list[float] = []

    async def sleep(delay: float) -> None:
        turns.append(delay)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    assert asyncio.run(protocol._serve_http_request(REQUEST, None, None)) is True
    assert protocol.app.asked == 1 and written[0].endswith(b"\r\n\r\nok")
    assert turns == [0] * yields


def test_a_client_already_gone_is_left_to_gunicorns_path(monkeypatch) -> None:
    protocol, written = at_once(closed=True)
    handed: list[object] = []

    async def gunicorns(self, request: object, sockname: object, peername: object) -> bool:
        handed.append(request)
        return False

    monkeypatch.setattr(ASGIProtocol, "_serve_http_request", gunicorns)
    assert asyncio.run(protocol._serve_http_request(REQUEST, None, None)) is False
    assert (protocol.app.asked, handed, written) == (0, [REQUEST], [])


def test_the_installed_gunicorn_is_the_one_the_seams_were_written_against() -> None:
    import gunicorn

    from api.server.http_worker import SEAMS_WRITTEN_FOR

    assert gunicorn.__version__ == SEAMS_WRITTEN_FOR, (
        f"gunicorn {gunicorn.__version__} is installed; api/server/http_worker.py overrides"
        f" private parts of gunicorn {SEAMS_WRITTEN_FOR} (listed at SEAMS_WRITTEN_FOR): read"
        " each against the new release, then update SEAMS_WRITTEN_FOR and pyproject's pin"
    )
