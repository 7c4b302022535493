"""The flags list's evaluations over 30 days and last evaluation, from a real warehouse: events
written to the lake as the event log seals them, the insights pipeline run over them, the page
read. Without a warehouse, or with one that cannot be read, the list works and says so."""

from __future__ import annotations

import html
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from api.eventlog.layout import type_dir
from api.eventlog.schema import EVALUATION, EVALUATION_SCHEMA
from api.serving.services import Services
from api.web.dashboard.activity import days_ago
from tests.dashboard.conftest import DashClient
from tests.pipelines.support import materialize_all
from tests.support.admin import Admin, Tenant
from warehouse.read import flag_activity

FLAGS = ("checkout", "old-banner", "fresh")


@pytest.fixture
def tenant(dash_admin: Admin) -> Tenant:
    tenant = dash_admin.tenant()
    for key in FLAGS:
        dash_admin.flag(tenant.environment_id, key, [{"type": "STATIC"}])
    return tenant


def write_evaluations(
    events_dir: Path, tenant: Tenant, flag: str, day: date, count: int, environment: str = ""
) -> None:
    """``count`` evaluation events of ``flag`` at midnight UTC of ``day``, one sealed file."""
    at = datetime(day.year, day.month, day.day, tzinfo=UTC)
    env = environment or tenant.environment_id
    rows = [
        {"schema_version": 2, "evaluation_id": f"{env}-{flag}-{day}-{i}", "evaluated_at": at,
         "organization_id": tenant.organization_id, "environment_id": env, "flag_key": flag,
         "user_identifier": f"user-{i}", "value": True, "matched_rule_type": "STATIC",
         "error_type": None, "sdk": None, "api_key_id": tenant.api_key_id, "source": "v1",
         "rule_index": 0, "arm": None, "rollout_percentage": None}
        for i in range(count)
    ]  # fmt: skip
    folder = events_dir / type_dir(EVALUATION) / f"date={day.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=EVALUATION_SCHEMA)
    pq.write_table(table, folder / f"{env}-{flag}-{day}.parquet")


def flags_page(person: DashClient, tenant: Tenant):  # noqa: ANN201 - falcon.testing.Result
    return person.get(f"/dashboard/environments/{tenant.environment_id}/flags")


def row_figures(page_text: str, flag: str) -> tuple[str, str]:
    """What the row of ``flag`` shows under "Evaluations (30 days)" and "Last evaluated"."""
    row = re.search(rf'<tr id="flag-{re.escape(flag)}".*?</tr>', page_text, re.S)
    assert row, flag

    def cell(marker: str) -> str:
        found = re.search(rf"<td [^>]*{marker}>(.*?)</td>", row[0], re.S)
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found[1])).split())

    return cell("data-evaluations"), cell("data-last-evaluated")


def test_figures_from_the_warehouse_show_which_flags_are_stale(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    today = datetime.fromtimestamp(services.clock(), UTC).date()
    events = Path(services.settings.events_location)
    write_evaluations(events, tenant, "checkout", today, 3)
    write_evaluations(events, tenant, "checkout", today - timedelta(29), 2)  # the 30th day
    write_evaluations(events, tenant, "checkout", today - timedelta(30), 4)  # a day too old
    write_evaluations(events, tenant, "old-banner", today - timedelta(45), 5)
    write_evaluations(events, tenant, "fresh", today, 7, environment="env_elsewhere")
    assert materialize_all(services.settings).success

    page = flags_page(person, tenant)
    assert page.status_code == 200
    old = (today - timedelta(45)).isoformat()
    assert row_figures(page.text, "checkout") == ("5", f"today ({today})")
    assert row_figures(page.text, "old-banner") == ("0", f"45 days ago ({old})")
    assert row_figures(page.text, "fresh") == ("0", "never")  # another environment's events
    # old-banner is stale (a temporary flag not evaluated for 30 days); fresh was never
    # evaluated here: new, not stale (the lifecycle's stages, docs/lifecycle.md)
    assert "1 of 3 flags is stale" in page.text and "/cleanup" in page.text
    assert 'data-activity="ready"' in page.text and "from the warehouse as of" in page.text
    assert '<tr id="flag-old-banner" data-stale>' in page.text
    assert '<tr id="flag-checkout">' in page.text

    found = flag_activity(services.settings.warehouse_path, tenant.environment_id,
                          today - timedelta(29))  # fmt: skip
    assert found is not None and found["published_at"].endswith("Z")
    assert found["flags"] == {
        "checkout": {"evaluations_since": 5, "last_evaluation_date": today.isoformat()},
        "old-banner": {"evaluations_since": 0, "last_evaluation_date": old},
    }


def test_without_a_warehouse_the_list_works_and_says_why(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    assert not services.settings.warehouse_path.exists()
    assert (
        flag_activity(services.settings.warehouse_path, tenant.environment_id, date.today()) is None
    )
    page = flags_page(person, tenant)
    assert page.status_code == 200
    assert 'data-activity="missing"' in page.text
    assert "No evaluation figures yet" in page.text and "flagsight pipeline run" in page.text
    assert row_figures(page.text, "checkout") == ("—", "—")
    assert "Disable<span" in page.text  # the list's actions are all there


def test_a_warehouse_that_cannot_be_read_is_said_so(
    person: DashClient, tenant: Tenant, services: Services
) -> None:
    path = services.settings.warehouse_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a duckdb file" * 1000)
    page = flags_page(person, tenant)
    assert page.status_code == 200
    assert 'data-activity="unavailable"' in page.text
    assert "The warehouse cannot be read just now" in page.text
    assert row_figures(page.text, "fresh") == ("—", "—")


@pytest.mark.parametrize(
    ("days", "shown"),
    [(0, "today"), (1, "yesterday"), (2, "2 days ago"), (400, "400 days ago"), (-1, "2026-05-02")],
)
def test_how_long_ago_reads(days: int, shown: str) -> None:
    assert days_ago(date(2026, 5, 1) - timedelta(days), date(2026, 5, 1)) == shown
