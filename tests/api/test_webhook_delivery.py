"""The webhook deliverer's pass over the outbox (contract section 10), against a real receiver
on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from api.jobs.webhooks import WebhookDeliverer
from devtools.engines.ports import free_port


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[bytes], list]]:
    """A receiver that answers 204 and, on its first POST, runs the hook put in ``hooks``."""
    bodies: list[bytes] = []
    hooks: list = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            if len(bodies) == 1:
                for hook in hooks:
                    hook()
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", bodies, hooks
    finally:
        server.shutdown()
        server.server_close()


def test_a_deliverer_stopped_mid_pass_hands_back_what_it_did_not_attempt(
    admin, services, receiver
) -> None:
    """A stop between two attempts of a pass leaves the rest due at once, not claimed until
    the claim ends (minutes): the next server's deliverer sends them on its first tick."""
    url, bodies, hooks = receiver
    tenant = admin.tenant()
    admin.request(
        "POST", f"/organizations/{tenant.organization_id}/webhooks",
        {"url": url, "events": ["flag.changed"]}, expect=201,
    )  # fmt: skip
    for n in range(3):
        admin.flag(tenant.environment_id, "launch", [{"type": "STATIC"}], enabled=n % 2 == 0)
    stopping = WebhookDeliverer(services)
    hooks.append(stopping.stop)  # the server is stopped while the first POST is in flight

    assert stopping.deliver_due() == 3  # claimed three, attempted one
    assert len(bodies) == 1
    assert services.store.pending_deliveries() == 2
    assert len(services.store.due_deliveries(services.clock())) == 2  # due now, not claimed

    assert WebhookDeliverer(services).deliver_due() == 2
    assert len(bodies) == 3 and len(set(bodies)) == 3
    assert services.store.pending_deliveries() == 0
