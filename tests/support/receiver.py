"""A webhook receiver on loopback, over a real socket (``http.server``), for the tests of
deliveries: it verifies every signature and keeps each event it was sent."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """A webhook endpoint on loopback that verifies every signature and counts each event."""

    def __init__(self, port: int, secret: str = ""):
        self.port, self.secret = port, secret
        self.events: dict[str, list[dict]] = {}
        self.bad_signatures = 0
        self._server: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if not receiver.verify(self.headers.get("Flagsight-Signature", ""), body):
                    receiver.bad_signatures += 1
                    self.send_response(400)
                else:
                    event = json.loads(body)
                    receiver.events.setdefault(event["id"], []).append(event)
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def verify(self, header: str, body: bytes) -> bool:
        fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
        if not fields.get("t", "").isdigit() or abs(time.time() - int(fields["t"])) > 300:
            return False
        expected = hmac.new(
            self.secret.encode(), fields["t"].encode() + b"." + body, hashlib.sha256
        ).hexdigest()
        return hmac.compare_digest(expected, fields.get("v1", ""))

    def start(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self.handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
