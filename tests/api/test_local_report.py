"""``POST /v1/local/report`` through the app and the real event log: what each reported row
becomes in the lake (the rows are kept as sent and expanded when sealed)."""

from __future__ import annotations

import falcon.testing
import pyarrow.compute as pc

from api.eventlog.reading import read_events
from api.eventlog.schema import EVALUATION, SOURCE_LOCAL
from api.serving.local import REPORT_FUTURE_S, REPORT_PAST_S
from api.serving.services import Services
from tests.support.admin import Tenant

NOW = 1_800_000_000.25  # in 2027-01


def _report(client: falcon.testing.TestClient, tenant: Tenant, rows: list[list]) -> dict:
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    answer = client.simulate_post("/v1/local/report", json={"evaluations": rows, "sdk": "t/1"},
                                  headers=headers)  # fmt: skip
    assert answer.status_code == 200, answer.json
    return answer.json


def test_reported_rows_land_as_evaluation_events_with_skewed_clocks_taken_as_arrival(
    services: Services, client: falcon.testing.TestClient, tenant: Tenant
) -> None:
    services.clock = lambda: NOW
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    prefix = client.simulate_post("/v1/local/quota", json={"want": 10}, headers=headers).json[
        "idPrefix"
    ]
    now_ms = int(NOW * 1000)
    in_window = now_ms - int(REPORT_PAST_S * 1000) + 1
    times = [
        in_window,  # a day ago, just inside: kept
        now_ms - int(REPORT_PAST_S * 1000) - 1,  # just outside: the arrival time
        now_ms + int(REPORT_FUTURE_S * 1000) + 1,  # a clock ahead: the arrival time
        10**20,  # no time at all: the arrival time
        -(10**20),
    ]
    rows = [
        [f"{prefix}{i:04x}", at, "f", f"u{i}", i % 2 == 0, "PERCENTAGE" if i % 2 == 0 else None,
         None, 0 if i % 2 == 0 else None, "treatment" if i % 2 == 0 else None, 40.0]
        for i, at in enumerate(times)
    ]  # fmt: skip
    assert _report(client, tenant, rows) == {"accepted": len(rows)}
    services.event_log.close()  # seals what it holds

    table = read_events(str(services.settings.events_location), EVALUATION)
    table = table.sort_by("evaluation_id")
    assert table.column("evaluation_id").to_pylist() == [row[0] for row in rows]
    micros = pc.cast(table.column("evaluated_at"), "int64").to_pylist()
    assert micros == [in_window * 1000] + [now_ms * 1000] * 4
    assert table.column("source").to_pylist() == [SOURCE_LOCAL] * 5
    assert table.column("sdk").to_pylist() == ["t/1"] * 5
    assert table.column("api_key_id").to_pylist() == [tenant.api_key_id] * 5
    assert table.column("organization_id").to_pylist() == [tenant.organization_id] * 5
    assert table.column("arm").to_pylist() == ["treatment", None, "treatment", None, "treatment"]
    # a percentage means something only with an arm
    assert table.column("rollout_percentage").to_pylist() == [40.0, None, 40.0, None, 40.0]
    assert table.column("rule_index").to_pylist() == [0, None, 0, None, 0]
    assert table.column("matched_rule_type").to_pylist() == [
        "PERCENTAGE",
        None,
        "PERCENTAGE",
        None,
        "PERCENTAGE",
    ]
