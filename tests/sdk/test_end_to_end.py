"""End to end: the SDK evaluates against a real server, reports outcomes through the batcher,
the insights pipeline runs, and the warehouse metrics show exactly those outcomes."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from flagsight_sdk import FlagsightClient

from api.eventlog.schema import EVALUATION, FEEDBACK
from api.settings import Settings
from pipelines.cli import run_pipeline_once
from tests.conftest import ADMIN_TOKEN
from tests.sdk.conftest import wait_for_events
from warehouse.read import flag_metrics

USERS = [f"user-{i}" for i in range(50)]


def test_sdk_outcomes_reach_the_flag_metrics(module_server, module_server_admin) -> None:
    tenant = module_server_admin.tenant(insights=True)
    module_server_admin.flag(
        tenant.environment_id, "checkout", [{"type": "PERCENTAGE", "percentage": 50}]
    )
    module_server.wait_config_everywhere()
    client = FlagsightClient(tenant.api_key, module_server.url, interval_s=0.2)

    evaluations = [client.evaluate("checkout", user) for user in USERS[:40]]
    evaluations += list(client.evaluate_bulk("checkout", USERS[40:]).values())
    assert all(e.failure is None for e in evaluations) and len(evaluations) == 50
    # 30 outcomes: every third a failure; latencies 0, 10, ..., 290 ms; 20 evaluations unreported
    for i, evaluation in enumerate(evaluations[:30]):
        error = "PaymentDeclined" if i % 3 == 0 else None
        assert client.report(
            evaluation, success=error is None, latency_ms=i * 10.0, error_type=error
        )
    assert client.flush(10)
    assert (client.batcher.stats.sent, client.batcher.stats.dropped) == (30, {})

    mine = lambda t: t.filter(pc.equal(t["environment_id"], tenant.environment_id))  # noqa: E731
    assert wait_for_events(module_server, EVALUATION, mine, 50).num_rows == 50
    assert wait_for_events(module_server, FEEDBACK, mine, 30).num_rows == 30

    settings = Settings(data_dir=module_server.data_dir, admin_token=ADMIN_TOKEN)
    run_pipeline_once(settings, echo=lambda line: None)
    metrics = flag_metrics(settings.warehouse_path, tenant.environment_id, "checkout")
    assert metrics is not None
    assert {
        k: metrics[k] for k in ("evaluations", "feedback_count", "success_count", "failure_count")
    } == {
        "evaluations": 50,
        "feedback_count": 30,
        "success_count": 20,
        "failure_count": 10,
    }
    assert metrics["feedback_coverage"] == pytest.approx(60.0)
    assert metrics["success_rate"] == pytest.approx(200 / 3)
    assert metrics["failure_rate"] == pytest.approx(100 / 3)
    assert metrics["avg_latency_ms"] == pytest.approx(145.0)
