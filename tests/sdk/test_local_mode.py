"""Local evaluation (contract section 11) against a real ``flagsight serve``: the SDK decides
in-process from the pushed ruleset, and the service still meters, logs and attributes it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import random
import socket
import string
import threading
import time
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import requests
from flagsight_sdk import FlagsightClient
from flagsight_sdk.model import FAILURE_CLOSED, FAILURE_REFUSED

from api.eventlog.schema import EVALUATION, FEEDBACK
from api.settings import Settings
from pipelines.cli import run_pipeline_once
from tests.sdk.conftest import wait_for_events
from tests.support.admin import Admin, Tenant
from tests.support.server import GunicornServer
from tests.support.timing import PROMPTLY_S
from warehouse.read import arm_windows, flag_metrics

ADMIN_TOKEN = "local-mode-admin-token-0123456789"
RULE_SHAPES: dict[str, list[dict]] = {
    "static-on": [{"type": "STATIC"}],
    "static-off": [{"type": "STATIC", "value": False}],
    "segment": [{"type": "SEGMENT", "segment": "beta"}],
    "segment-off": [{"type": "SEGMENT", "segment": "beta", "value": False}, {"type": "STATIC"}],
    "pct-0": [{"type": "PERCENTAGE", "percentage": 0}],
    "pct-100": [{"type": "PERCENTAGE", "percentage": 100}],
    "pct-fraction": [{"type": "PERCENTAGE", "percentage": 33.37}],
    "segment-then-pct": [
        {"type": "SEGMENT", "segment": "beta"},
        {"type": "PERCENTAGE", "percentage": 12.5},
    ],
    "pct-then-static-off": [
        {"type": "PERCENTAGE", "percentage": 50},
        {"type": "STATIC", "value": False},
    ],
    "missing-segment": [{"type": "SEGMENT", "segment": "nobody"}],
    "no-rules": [],
}


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until ``predicate`` held, or None if it did not within ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.01)
    return None


def launch_tenant(server: GunicornServer, admin: Admin, **tenant: object) -> Tenant:
    """A tenant whose flag ``launch`` is on for everyone, served by every worker."""
    made = admin.tenant(**tenant)  # type: ignore[arg-type]
    admin.flag(made.environment_id, "launch", [{"type": "STATIC"}])
    server.wait_config_everywhere()
    return made


def of_environment(environment_id: str) -> Callable[[pa.Table], pa.Table]:
    """A ``wait_for_events`` selection: the events of one environment."""
    return lambda table: table.filter(pc.equal(table["environment_id"], environment_id))


def local_client(server: GunicornServer, tenant: Tenant, **options: object) -> FlagsightClient:
    client = FlagsightClient(tenant.api_key, server.url, local=True, **options)
    assert client.local is not None and client.local.wait_ready(10)
    return client


@pytest.fixture
def shapes(module_server: GunicornServer, module_server_admin: Admin) -> Tenant:
    tenant = module_server_admin.tenant()
    members = [f"member-{n}" for n in range(300)]
    module_server_admin.segment(tenant.organization_id, "beta", members)
    for key, rules in RULE_SHAPES.items():
        module_server_admin.flag(tenant.environment_id, key, rules)
    module_server_admin.flag(tenant.environment_id, "disabled", [{"type": "STATIC"}], enabled=False)
    module_server_admin.flag(tenant.environment_id, "archived", [{"type": "STATIC"}], archived=True)
    module_server.wait_config_everywhere()
    return tenant


def random_users(count: int) -> list[str]:
    rng = random.Random(11)
    alphabet = string.ascii_letters + string.digits + "-_.@é中🙂"
    users = {f"member-{n}" for n in range(0, 300, 3)}
    while len(users) < count:
        users.add("".join(rng.choices(alphabet, k=rng.randint(1, 40))))
    return sorted(users)


def test_local_answers_equal_the_services_for_10000_users_and_every_rule_shape(
    module_server: GunicornServer, shapes: Tenant
) -> None:
    users = random_users(10_000)
    remote = FlagsightClient(shapes.api_key, module_server.url, timeout_s=30)
    local = local_client(module_server, shapes)
    try:
        for flag in [*RULE_SHAPES, "disabled", "archived", "missing"]:
            served = remote.evaluate_bulk(flag, users)
            decided = local.evaluate_bulk(flag, users)
            differ = [
                user
                for user in users
                if (served[user].value, served[user].matched_rule_type, served[user].error_type)
                != (decided[user].value, decided[user].matched_rule_type, decided[user].error_type)
            ]
            assert differ == [], (flag, differ[:5])
            assert all(decided[user].evaluation_id for user in users)
            for user in users[:50]:  # the same Evaluation, of plain strings, as remote mode's
                same_id = dataclasses.replace(
                    served[user], evaluation_id=decided[user].evaluation_id
                )
                assert (
                    decided[user] == same_id
                    and repr(decided[user]).split(", evaluation_id")[0]
                    == repr(served[user]).split(", evaluation_id")[0]
                )
                assert {type(decided[user].matched_rule_type), type(decided[user].error_type)} <= {
                    str,
                    type(None),
                }
            assert all(decided[user].failure is None for user in users)
    finally:
        local.close()


def test_a_change_reaches_a_local_client_within_a_second(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = module_server_admin.tenant()
    module_server_admin.flag(tenant.environment_id, "launch", [{"type": "STATIC", "value": False}])
    module_server.wait_config_everywhere()
    client = local_client(module_server, tenant)
    try:
        assert client.evaluate("launch", "u").value is False
        for enabled_value in (True, False, True):
            module_server_admin.flag(
                tenant.environment_id, "launch", [{"type": "STATIC", "value": enabled_value}]
            )
            took = wait_until(
                lambda v=enabled_value: client.evaluate("launch", "u").value is v, PROMPTLY_S
            )
            assert took is not None, f"the change did not reach the local client in {PROMPTLY_S} s"
    finally:
        client.close()


def test_a_revoked_key_refuses_local_evaluations_within_a_second(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = launch_tenant(module_server, module_server_admin)
    client = local_client(module_server, tenant)
    try:
        assert client.evaluate("launch", "u").value is True
        module_server_admin.request("DELETE", f"/api-keys/{tenant.api_key_id}", expect=204)
        took = wait_until(
            lambda: client.evaluate("launch", "u").failure == FAILURE_REFUSED, PROMPTLY_S
        )
        assert took is not None, f"the revocation did not reach the local client in {PROMPTLY_S} s"
        answer = client.evaluate("launch", "u")
        assert (answer.value, answer.evaluation_id) == (False, None)
    finally:
        client.close()


def test_after_close_a_local_client_answers_false_and_warns_of_no_outage(
    module_server: GunicornServer, module_server_admin: Admin, caplog
) -> None:
    """Its quota went back at ``close()``: that is not the service being away."""
    tenant = launch_tenant(module_server, module_server_admin)
    client = local_client(module_server, tenant)
    assert client.evaluate("launch", "u").value is True
    client.close()
    with caplog.at_level(logging.INFO, logger="flagsight_sdk"):
        caplog.clear()
        answer = client.evaluate("launch", "u")
    assert (answer.value, answer.failure, answer.evaluation_id) == (False, FAILURE_CLOSED, None)
    assert [r.getMessage() for r in caplog.records if r.name == "flagsight_sdk"] == []


def test_one_local_client_is_served_exactly_the_hard_threshold(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = launch_tenant(
        module_server, module_server_admin, plan="enterprise", limit=1_000
    )  # hard threshold 1,100
    client = local_client(module_server, tenant)
    try:
        answers = [client.evaluate("launch", f"user-{n}") for n in range(1_300)]
    finally:
        client.close()
    served = [a for a in answers if a.error_type is None and a.failure is None]
    refused = [a for a in answers if a.error_type == "PLAN_LIMIT_EXCEEDED"]
    assert (len(served), len(refused)) == (1_100, 200)
    assert all(a.value for a in served) and len({a.evaluation_id for a in served}) == 1_100
    usage = requests.get(
        module_server.url + "/v1/usage", headers={"Authorization": f"ApiKey {tenant.api_key}"}
    ).json()
    assert usage["evaluations"] == 1_100


def test_two_local_clients_and_a_remote_caller_never_pass_the_threshold(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = launch_tenant(module_server, module_server_admin, plan="enterprise", limit=1_000)
    clients = [local_client(module_server, tenant) for _ in range(2)]
    remote = FlagsightClient(tenant.api_key, module_server.url, timeout_s=5)
    served = [0, 0, 0]

    def run(index: int, evaluate: Callable[[str, str], object]) -> None:
        for n in range(700):
            answer = evaluate("launch", f"user-{n}")
            served[index] += bool(answer.value)  # type: ignore[attr-defined]

    threads = [
        threading.Thread(target=run, args=(i, c.evaluate)) for i, c in enumerate(clients)
    ] + [threading.Thread(target=run, args=(2, remote.evaluate))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    usage = requests.get(
        module_server.url + "/v1/usage", headers={"Authorization": f"ApiKey {tenant.api_key}"}
    ).json()
    assert sum(served) <= 1_100
    assert usage["evaluations"] == sum(served)  # unspent grants went back on close()


def test_local_evaluations_and_their_feedback_reach_the_lake(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = module_server_admin.tenant()
    module_server_admin.flag(
        tenant.environment_id, "split", [{"type": "PERCENTAGE", "percentage": 50}]
    )
    module_server.wait_config_everywhere()
    client = local_client(module_server, tenant)
    try:
        answers = [client.evaluate("split", f"user-{n}") for n in range(200)]
        for answer in answers[:50]:
            assert client.report(answer, success=answer.value, latency_ms=12.0)
        assert client.flush(10)
        assert client.local is not None
        client.local.reports.flush(10)
        assert client.local.reports.stats.sent == 200
    finally:
        client.close()

    mine = of_environment(tenant.environment_id)
    events = wait_for_events(module_server, EVALUATION, mine, 200)
    assert events.num_rows == 200
    assert set(events["source"].to_pylist()) == {"local"}
    assert sorted(events["evaluation_id"].to_pylist()) == sorted(a.evaluation_id for a in answers)
    arms = events["arm"].to_pylist()
    treatment = sum(a.value for a in answers)
    assert (arms.count("treatment"), arms.count("control")) == (treatment, 200 - treatment)
    feedback = wait_for_events(module_server, FEEDBACK, mine, 50)
    assert feedback.num_rows == 50

    # Through ``flagsight pipeline run``: the warehouse counts them as remote ones.
    settings = Settings.from_env(
        {"FLAGSIGHT_DATA_DIR": str(module_server.data_dir), "FLAGSIGHT_ADMIN_TOKEN": "unused"}
    )
    run_pipeline_once(settings, echo=lambda line: None)
    metrics = flag_metrics(settings.warehouse_path, tenant.environment_id, "split")
    assert metrics is not None
    failed = sum(1 for answer in answers[:50] if not answer.value)
    assert (metrics["evaluations"], metrics["feedback_count"]) == (200, 50)
    assert metrics["failure_rate"] == pytest.approx(100.0 * failed / 50)
    since = datetime.now(UTC) - timedelta(days=1)
    windows = arm_windows(settings.warehouse_path, tenant.environment_id, "split", "day", since)
    by_arm = {w["arm"]: w["evaluations"] for w in windows}
    assert by_arm == {"treatment": treatment, "control": 200 - treatment}


def test_a_forged_id_and_a_foreign_block_are_refused(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant, other = module_server_admin.tenant(), module_server_admin.tenant()
    module_server.wait_config_everywhere()
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    other_headers = {"Authorization": f"ApiKey {other.api_key}"}
    grant = requests.post(
        module_server.url + "/v1/local/quota", json={"want": 10}, headers=other_headers
    ).json()
    row = [grant["idPrefix"] + "0000", int(time.time() * 1000), "f", "u", False, None,
           "FLAG_NOT_FOUND", None, None, None]  # fmt: skip
    foreign = requests.post(
        module_server.url + "/v1/local/report", json={"evaluations": [row]}, headers=headers
    )
    assert foreign.status_code == 400
    assert "another environment" in foreign.json()["message"]
    row[0] = grant["idPrefix"] + "000a"  # past the block of 10
    past = requests.post(
        module_server.url + "/v1/local/report", json={"evaluations": [row]}, headers=other_headers
    )
    assert past.status_code == 400 and "not in its block" in past.json()["message"]
    more = requests.post(
        module_server.url + "/v1/local/quota/return",
        json={"idPrefix": grant["idPrefix"], "unused": 11},
        headers=other_headers,
    )
    assert more.status_code == 400


def test_the_openfeature_provider_decides_locally(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    from flagsight_sdk.provider import FlagsightProvider
    from openfeature import api
    from openfeature.evaluation_context import EvaluationContext

    tenant = launch_tenant(module_server, module_server_admin)
    provider = FlagsightProvider(api_key=tenant.api_key, base_url=module_server.url, local=True)
    assert provider.client.local is not None and provider.client.local.wait_ready(10)
    api.set_provider(provider)
    try:
        details = api.get_client().get_boolean_details("launch", False, EvaluationContext("u-1"))
        assert (details.value, details.reason) == (True, "STATIC")
        assert len(details.flag_metadata["evaluationId"]) == 46
    finally:
        api.shutdown()


def test_the_ofrep_bulk_answer_advertises_a_stream_that_asks_for_a_refetch(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = launch_tenant(module_server, module_server_admin)
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    body = {"context": {"targetingKey": "u-1"}}
    bulk = requests.post(f"{module_server.url}/ofrep/v1/evaluate/flags", json=body, headers=headers)
    assert bulk.json()["eventStreams"] == [
        {"type": "sse", "url": f"{module_server.url}/ofrep/v1/stream"}
    ]
    url = urllib.parse.urlsplit(bulk.json()["eventStreams"][0]["url"])
    received = bytearray()
    with socket.create_connection((url.hostname, url.port), timeout=10) as stream:
        stream.sendall(
            f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: ApiKey {tenant.api_key}\r\n\r\n".encode()
        )

        def read() -> None:
            with contextlib.suppress(OSError):
                while chunk := stream.recv(4096):
                    received.extend(chunk)

        threading.Thread(target=read, daemon=True).start()
        assert wait_until(lambda: b"retry: 1000" in received, 5) is not None, received
        assert b"text/event-stream" in received
        changed_at = time.time()
        module_server_admin.flag(
            tenant.environment_id, "launch", [{"type": "STATIC"}], enabled=False
        )
        took = wait_until(lambda: b"refetchEvaluation" in received, PROMPTLY_S)
        assert took is not None, bytes(received)
    [event] = [
        json.loads(line[5:])
        for line in bytes(received).split(b"\n")
        if b"refetchEvaluation" in line
    ]
    assert event["type"] == "refetchEvaluation"
    assert changed_at - 1 <= event["lastModified"] <= changed_at + 2
    again = requests.post(
        f"{module_server.url}/ofrep/v1/evaluate/flags",
        json=body,
        headers={**headers, "If-None-Match": bulk.headers["ETag"]},
    )
    assert again.status_code == 200 and again.json()["flags"][0]["reason"] == "DISABLED"


def test_the_ruleset_has_a_strong_etag_and_answers_304(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    tenant = launch_tenant(module_server, module_server_admin)
    headers = {"Authorization": f"ApiKey {tenant.api_key}"}
    first = requests.get(f"{module_server.url}/v1/ruleset", headers=headers)
    etag = first.headers["ETag"]
    assert first.status_code == 200 and not etag.startswith("W/")
    assert [flag["key"] for flag in first.json()["flags"]] == ["launch"]
    same = requests.get(
        f"{module_server.url}/v1/ruleset", headers={**headers, "If-None-Match": etag}
    )
    assert (same.status_code, same.content) == (304, b"")
    assert requests.get(f"{module_server.url}/v1/ruleset").status_code == 401
    assert requests.get(f"{module_server.url}/v1/stream").status_code == 401


def test_a_forked_process_decides_and_reports_with_its_own_ids(
    module_server: GunicornServer, module_server_admin: Admin
) -> None:
    """A pre-forking server makes the client before it forks: each child follows the ruleset
    and takes quota of its own, so no evaluation id is spent twice."""
    tenant = launch_tenant(module_server, module_server_admin)
    client = local_client(module_server, tenant)
    parent = [client.evaluate("launch", f"parent-{n}") for n in range(20)]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: evaluate, report, say which ids it used
        try:
            child = [client.evaluate("launch", f"child-{n}") for n in range(20)]
            client.close(10)
            os.write(write, json.dumps([a.evaluation_id for a in child if a.value]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child_ids = json.loads(pipe.read() or "[]")
    os.waitpid(pid, 0)
    parent += [client.evaluate("launch", f"parent-{n}") for n in range(20, 40)]
    client.close()
    parent_ids = [a.evaluation_id for a in parent]
    assert len(child_ids) == 20 and all(parent_ids)
    assert not set(child_ids) & set(parent_ids)

    mine = of_environment(tenant.environment_id)
    events = wait_for_events(module_server, EVALUATION, mine, 60)
    assert sorted(events["evaluation_id"].to_pylist()) == sorted(child_ids + parent_ids)
