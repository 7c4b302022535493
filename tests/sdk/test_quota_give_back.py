"""The SDK's give-back on ``close()``: a 503 (the service could not record it) or an
unreachable service is tried again with the same body; a refusal is not."""

from __future__ import annotations

import json

import pytest
import requests
from flagsight_sdk import local
from flagsight_sdk.local import QuotaPool
from flagsight_sdk.transport import HttpAnswer


class Service:
    """The quota routes as scripted answers: a grant of 100, then ``give_backs`` in turn."""

    def __init__(self, give_backs: list[int | None]):
        self.give_backs = give_backs
        self.returned: list[dict] = []

    def post(self, path: str, body: object) -> HttpAnswer:
        if path == "/v1/local/quota":
            return HttpAnswer(200, json.dumps({"granted": 100, "idPrefix": "p" * 42}).encode(), {})
        self.returned.append(body)  # type: ignore[arg-type]
        status = self.give_backs.pop(0)
        if status is None:
            raise requests.ConnectionError("refused")
        return HttpAnswer(status, b"{}", {})


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch) -> None:
    monkeypatch.setattr(local, "GIVE_BACK_RETRIES_S", (0, 0, 0))


def spend_and_close(service: Service) -> None:
    pool = QuotaPool(service.post, timeout_s=1.0)
    for _ in range(30):
        assert pool.take() is not None
    pool.close()


def test_a_give_back_refused_for_now_is_tried_again_with_the_same_body(caplog) -> None:
    service = Service([503, None, 200])
    spend_and_close(service)
    assert service.returned == [{"idPrefix": "p" * 42, "unused": 70}] * 3
    assert "not given back" not in caplog.text


def test_a_give_back_refused_outright_is_not_tried_again(caplog) -> None:
    service = Service([400])
    spend_and_close(service)
    assert len(service.returned) == 1
    assert "70 granted evaluations not given back (HTTP 400)" in caplog.text


def test_a_service_away_throughout_gets_four_tries_then_a_warning(caplog) -> None:
    service = Service([503, 503, None, 503])
    spend_and_close(service)
    assert len(service.returned) == 4
    assert "70 granted evaluations not given back (service away)" in caplog.text
