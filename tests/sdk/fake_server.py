"""A scriptable HTTP server for the SDK's fault tests: slow, failing, garbage, recording."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], bytes]
Behaviour = Callable[[str, Any], Reply | None]
"""``(path, decoded body) -> (status, headers, body)``; None: the handler drips or stalls."""


class FakeServer:
    """Records every request body by path and answers with ``behaviour``."""

    def __init__(self, behaviour: Behaviour, port: int = 0):
        self.behaviour = behaviour
        self.requests: list[tuple[str, Any]] = []
        self.connections = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                server.connections += 1

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw) if raw else None
                server.requests.append((self.path, body))
                reply = server.behaviour(self.path, body)
                if reply is None:
                    self._drip()
                    return
                status, headers, content = reply
                self.send_response(status)
                for name, value in {"Content-Length": str(len(content)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(content)

            def _drip(self) -> None:
                """Headers at once, then one byte of a valid answer every 0.3 s."""
                content = (
                    b'{"value":true,"matchedRuleType":"STATIC","error":null,"evaluationId":"x"}'
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                for byte in content:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.3)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = _QuietServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def bodies(self, path: str) -> list[Any]:
        return [body for p, body in self.requests if p == path]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (the SDK's timeout) is the expected case, not an error."""


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    return (
        status,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps(body).encode(),
    )


def sleeping(seconds: float, then: Reply) -> Behaviour:
    def behave(path: str, body: Any) -> Reply:
        time.sleep(seconds)
        return then

    return behave
