"""``flagsight flags|keys|rollout|status`` as a user runs them against a real gunicorn server:
what each prints, on which stream, and its exit status (0 done, 1 the API or the service
refused, 2 refused by the CLI before any call)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import duckdb
import pytest
import requests

from tests.conftest import ADMIN_TOKEN
from tests.support.admin import Admin, Tenant, requests_caller
from tests.support.health_rows import insert_health
from tests.support.server import REPO, GunicornServer
from warehouse.migrations import migrate

CHECKOUT_RULES = [
    {"type": "SEGMENT", "segment": "beta", "value": True},
    {"type": "PERCENTAGE", "percentage": 12.5, "value": True},
]


def flagsight(
    *args: str, token: str | None = ADMIN_TOKEN, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed command's entry point, in a clean environment: no FLAGSIGHT_* variable
    of the developer's shell leaks in."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLAGSIGHT_")}
    if token is not None:
        environ["FLAGSIGHT_ADMIN_TOKEN"] = token
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout


@pytest.fixture
def tenant(module_server_admin: Admin) -> Tenant:
    """A fresh organization with a ``production`` environment, a segment and two flags."""
    made = module_server_admin.tenant()
    module_server_admin.segment(made.organization_id, "beta", ["alice"])
    module_server_admin.flag(made.environment_id, "new-checkout", CHECKOUT_RULES, enabled=False)
    module_server_admin.flag(made.environment_id, "dark-mode", [{"type": "STATIC"}])
    return made


@pytest.fixture
def where(module_server: GunicornServer, tenant: Tenant) -> list[str]:
    return ["--url", module_server.url, "--org", tenant.organization_id]


def test_help_lists_the_admin_commands() -> None:
    shown = ok(flagsight("--help"))
    for command in ("flags", "keys", "rollout", "status"):
        assert f"\n    {command} " in shown
    assert "--org" in ok(flagsight("flags", "list", "--help"))


def test_no_help_prints_docstring_markup() -> None:
    """``flagsight --help`` printed its module's docstring, backticks and all. The command's
    own help, and every subcommand's (walked in-process: a run per command would take
    seconds), are plain text."""
    assert "`" not in ok(flagsight("--help"))
    from api.cli.main import build_parser

    pending = [("flagsight", build_parser())]
    walked: list[str] = []
    while pending:
        name, parser = pending.pop()
        walked.append(name)
        assert "`" not in parser.format_help(), name
        for action in parser._actions:  # noqa: SLF001 - argparse lists subcommands only here
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                pending.extend((f"{name} {sub}", child) for sub, child in action.choices.items())
    assert {"flagsight flags list", "flagsight rollout start", "flagsight pipeline run"} <= set(
        walked
    )


def test_flags_list_and_show_print_tables(where: list[str]) -> None:
    listed = ok(flagsight("flags", "list", *where)).splitlines()
    assert listed[0].split() == ["KEY", "STATE", "LIFECYCLE", "RULES", "UPDATED"]
    assert listed[1].startswith("dark-mode ") and " enabled " in listed[1]
    assert "SEGMENT beta -> true; PERCENTAGE 12.5% -> true" in listed[2]
    assert " disabled " in listed[2]

    shown = ok(flagsight("flags", "show", "new-checkout", *where))
    assert "state        disabled" in shown
    assert "kind         temporary" in shown and "expires      never" in shown
    assert shown.endswith("rules\n  1. SEGMENT beta -> true\n  2. PERCENTAGE 12.5% -> true\n")


def test_flags_list_stale_shows_only_stale_flags_and_why(
    where: list[str], tenant: Tenant, module_server_admin: Admin
) -> None:
    path = f"/environments/{tenant.environment_id}/flags/old-banner"
    body = {"enabled": True, "rules": [], "owner": "growth", "expiresAt": "2026-01-01T00:00:00Z"}
    module_server_admin.request("PUT", path, body, expect=201)
    listed = ok(flagsight("flags", "list", "--stale", *where)).splitlines()
    assert listed[0].split() == ["KEY", "OWNER", "WHY", "LAST", "EVALUATED"]
    assert len(listed) == 2 and listed[1].split()[:2] == ["old-banner", "growth"]
    assert "past its expiry" in listed[1] and listed[1].endswith("never")
    shown = ok(flagsight("flags", "show", "old-banner", *where))
    assert "lifecycle    stale (expired); last evaluated never" in shown

    module_server_admin.request("DELETE", path, expect=204)
    none = ok(flagsight("flags", "list", "--stale", *where))
    assert none == f"No stale flags in production ({tenant.environment_id}).\n"


def test_json_prints_the_api_answer(
    where: list[str], tenant: Tenant, module_server_admin: Admin
) -> None:
    listed = json.loads(ok(flagsight("flags", "list", "--json", *where)))
    assert listed == module_server_admin.request(
        "GET", f"/environments/{tenant.environment_id}/flags", expect=200
    )


def test_enable_and_disable_change_only_enabled(
    where: list[str], tenant: Tenant, module_server_admin: Admin
) -> None:
    path = f"/environments/{tenant.environment_id}/flags/new-checkout"
    said = ok(flagsight("flags", "enable", "new-checkout", *where))
    assert said == f"Flag 'new-checkout' enabled in production ({tenant.environment_id}).\n"
    flag = module_server_admin.request("GET", path, expect=200)
    assert (flag["enabled"], flag["archived"], flag["rules"]) == (True, False, CHECKOUT_RULES)

    again = ok(flagsight("flags", "enable", "new-checkout", *where))
    assert "already enabled" in again and "nothing changed" in again
    assert module_server_admin.request("GET", path)["updatedAt"] == flag["updatedAt"]

    # the environment by its id: no organization needed
    by_id = ["--url", where[1], "--env", tenant.environment_id, "--json"]
    disabled = json.loads(ok(flagsight("flags", "disable", "new-checkout", *by_id)))
    assert (disabled["enabled"], disabled["rules"]) == (False, CHECKOUT_RULES)


def test_an_unknown_flag_shows_the_api_404(where: list[str], tenant: Tenant) -> None:
    message = f"Flag 'ghost' does not exist in environment '{tenant.environment_id}'"
    for command in ("show", "enable", "disable"):
        result = flagsight("flags", command, "ghost", *where)
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == f"flagsight: 404 Not Found: {message}\n"
    as_json = flagsight("flags", "show", "ghost", "--json", *where)
    assert as_json.returncode == 1 and as_json.stdout == ""
    assert json.loads(as_json.stderr) == {"status": 404, "error": "Not Found", "message": message}


@pytest.mark.parametrize(
    "command",
    [["flags", "list"], ["flags", "enable", "dark-mode"], ["keys", "list"], ["status"]],
    ids=" ".join,
)
def test_a_wrong_token_shows_the_api_401(where: list[str], command: list[str]) -> None:
    result = flagsight(*command, *where[:2], token="not-the-token")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "flagsight: 401 Unauthorized: Missing or invalid Authorization header\n"
    )
    # --token works too, and is never echoed
    result = flagsight(*command, *where[:2], "--token", "wrong-token-42", token=None)
    assert result.returncode == 1 and "401 Unauthorized" in result.stderr
    assert "wrong-token-42" not in result.stdout + result.stderr


def test_no_token_is_refused_before_any_call(module_server: GunicornServer) -> None:
    result = flagsight("flags", "list", "--url", module_server.url, token=None)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("flagsight: no admin token: set FLAGSIGHT_ADMIN_TOKEN")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("127.0.0.1:8000", "has no scheme: write it with http:// or https://"),
        ("localhost:8000", "(for example http://localhost:8000)"),
        ("ftp://127.0.0.1:8000", "must start with http:// or https://, not ftp://"),
        ("http://", "has no host"),
    ],
)
def test_a_url_without_an_http_scheme_is_refused(url: str, says: str) -> None:
    for result in (
        flagsight("flags", "list", "--url", url),
        flagsight("status", env={"FLAGSIGHT_URL": url}),
    ):
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr.startswith("flagsight: ") and says in result.stderr
    assert "FLAGSIGHT_URL" in result.stderr  # says where the URL came from


def test_a_service_that_does_not_answer_is_an_error() -> None:
    result = flagsight("status", "--url", "http://127.0.0.1:9")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("flagsight: cannot reach http://127.0.0.1:9: ")


def test_keys_create_list_revoke(
    module_server: GunicornServer, where: list[str], tenant: Tenant
) -> None:
    created = ok(flagsight("keys", "create", "--name", "checkout", *where)).splitlines()
    assert created[0].startswith("Created API key key_") and "('checkout')" in created[0]
    secret = created[-1]
    assert secret.startswith("fsk_")
    key_id = created[0].split()[3]
    evaluate = {"flagKey": "dark-mode", "userIdentifier": "u1"}
    headers = {"Authorization": f"ApiKey {secret}"}
    url = f"{module_server.url}/v1/evaluate"
    module_server.wait_config_everywhere()  # a worker serves a new key within a second
    assert requests.post(url, json=evaluate, headers=headers, timeout=10).status_code == 200

    listed = ok(flagsight("keys", "list", *where)).splitlines()
    assert listed[0].split() == ["ID", "NAME", "CREATED"]
    assert [line.split()[:2] for line in listed[1:]] == [
        [tenant.api_key_id, "test"],
        [key_id, "checkout"],
    ]
    assert secret not in "\n".join(listed)

    said = ok(flagsight("keys", "revoke", key_id, *where[:2]))
    assert said == f"Revoked API key {key_id}: calls with it get 401 within a second.\n"
    deadline = time.monotonic() + 2
    while requests.post(url, json=evaluate, headers=headers, timeout=10).status_code != 401:
        assert time.monotonic() < deadline, "the revoked key still authenticates"
        time.sleep(0.1)
    assert key_id not in ok(flagsight("keys", "list", *where))

    again = flagsight("keys", "revoke", key_id, *where[:2])
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr.startswith(f"flagsight: 404 Not Found: API key '{key_id}' ")


def test_rollout_start_show_stop(
    where: list[str], tenant: Tenant, module_server_admin: Admin
) -> None:
    started = ok(
        flagsight("rollout", "start", "new-checkout", "--steps", "2,10,100",
                  "--step-minutes", "5", *where)
    )  # fmt: skip
    assert started.startswith(
        f"Started the guarded rollout of 'new-checkout' in production ({tenant.environment_id}).\n"
    )
    for line in ("state       running", "percentage  2%", "plan        2% 10% 100%, 5 min a step"):
        assert line in started
    flag_path = f"/environments/{tenant.environment_id}/flags/new-checkout"
    assert module_server_admin.request("GET", flag_path)["rules"][1]["percentage"] == 2

    shown = ok(flagsight("rollout", "show", "new-checkout", *where))
    assert "step        1 of 3 (2 %), since " in shown and "decisions   none yet" in shown
    as_json = json.loads(ok(flagsight("rollout", "show", "new-checkout", "--json", *where)))
    assert as_json == module_server_admin.request("GET", flag_path + "/rollout", expect=200)
    assert (as_json["step"], as_json["steps"]) == (0, [2, 10, 100])  # an index, from 0

    stopped = ok(flagsight("rollout", "stop", "new-checkout", *where))
    assert "its percentage stays where it is" in stopped
    gone = flagsight("rollout", "show", "new-checkout", *where)
    assert (gone.returncode, gone.stdout) == (1, "")
    assert gone.stderr == (
        "flagsight: 404 Not Found: Flag 'new-checkout' has no rollout in environment"
        f" '{tenant.environment_id}'\n"
    )


def test_rollout_refusals_are_the_apis(where: list[str]) -> None:
    no_percentage = flagsight("rollout", "start", "dark-mode", *where)
    assert no_percentage.returncode == 1
    assert no_percentage.stderr.startswith(
        "flagsight: 409 Conflict: Flag 'dark-mode' has no PERCENTAGE rule"
    )
    decreasing = flagsight("rollout", "start", "new-checkout", "--steps", "5,2,100", *where)
    assert decreasing.returncode == 1
    assert decreasing.stderr == (
        "flagsight: 400 Bad Request: Field 'steps[1]' must be greater than the step before it\n"
    )


def test_status_shows_readiness_and_the_organization(
    module_server: GunicornServer, where: list[str], tenant: Tenant
) -> None:
    shown = ok(flagsight("status", *where)).splitlines()
    assert shown[0] == f"flagsight at {module_server.url}: ready"
    assert shown[1:3] == ["  controlPlane  ok", "  eventLog      ok"]
    assert shown[3].startswith("API version 1.0.0; this CLI ")
    assert shown[5].split()[:5] == ["ORGANIZATION", "NAME", "PLAN", "ENVIRONMENTS", "EVALUATIONS"]
    assert shown[6].split() == [tenant.organization_id, "Test", "org", "pro", "production",
                                "0", "1,000,000", "0%"]  # fmt: skip

    status: dict[str, Any] = json.loads(ok(flagsight("status", "--json", *where)))
    assert (status["ready"], status["readiness"]["status"]) == (True, "ready")
    (organization,) = status["organizations"]
    assert organization["id"] == tenant.organization_id
    assert organization["usage"]["evaluations"] == 0
    assert [env["key"] for env in organization["environments"]] == ["production"]


def test_choosing_the_organization_and_environment(
    module_server: GunicornServer, module_server_admin: Admin, tenant: Tenant
) -> None:
    url = ["--url", module_server.url]
    module_server_admin.tenant()  # at least two organizations now
    several = flagsight("flags", "list", *url)
    assert (several.returncode, several.stdout) == (2, "")
    assert several.stderr.startswith(
        "flagsight: choose an organization with --org or FLAGSIGHT_ORG; the service has "
    )

    name = f"Named {tenant.organization_id}"
    named = module_server_admin.request("POST", "/organizations", {"name": name, "plan": "free"})
    module_server_admin.tenant(organization_id=named["id"], environment="staging")
    by_name = flagsight("flags", "list", *url, "--org", name, "--env", "staging")
    assert ok(by_name) == f"No flags in staging ({by_name.stdout.split('(')[1]}"
    from_env = flagsight(
        "keys", "list", *url, env={"FLAGSIGHT_ORG": name, "FLAGSIGHT_ENV": "staging"}
    )
    assert ok(from_env).splitlines()[1].split()[1] == "test"

    missing = flagsight("flags", "list", *url, "--org", name)  # production is the default
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        f"flagsight: organization {named['id']} has no environment 'production'"
        " (its environments: staging)\n"
    )
    unknown = flagsight("flags", "list", *url, "--org", "No such org")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("flagsight: no organization has the id or name 'No such org'")


def test_defaults_on_a_service_with_one_organization(server: GunicornServer) -> None:
    """The usual first hour: FLAGSIGHT_URL and the token set, nothing else to choose."""
    env = {"FLAGSIGHT_URL": server.url + "/"}
    empty = ok(flagsight("status", env=env))
    assert empty.endswith("\nNo organizations yet.\n")
    nothing = flagsight("flags", "list", env=env)
    assert nothing.returncode == 1 and "has no organization yet" in nothing.stderr

    admin = Admin(requests_caller(server.url), ADMIN_TOKEN)
    tenant = admin.tenant()
    unknown = flagsight("flags", "list", "--org", "No such org", env=env)
    assert unknown.stderr == (
        "flagsight: no organization has the id or name 'No such org'; the service has"
        f" 1 organization: {tenant.organization_id} (Test org)\n"
    )
    admin.flag(tenant.environment_id, "dark-mode", [{"type": "STATIC"}])
    assert ok(flagsight("flags", "list", env=env)).splitlines()[1].split()[:2] == [
        "dark-mode",
        "enabled",
    ]
    assert "disabled in production" in ok(flagsight("flags", "disable", "dark-mode", env=env))


def test_flags_health_prints_each_comparison_of_the_catalogue_and_each_metric(
    module_server: GunicornServer, where: list[str], tenant: Tenant
) -> None:
    warehouse = module_server.data_dir / "warehouse.duckdb"
    scratch = warehouse.with_suffix(".cli.duckdb")
    con = duckdb.connect(str(scratch))
    try:
        migrate(con)
        arms = {f"{arm}_{figure}": 800 for arm in ("treatment", "control")
                for figure in ("users", "users_with_feedback")}  # fmt: skip
        row = {"organization_id": tenant.organization_id, "environment_id": tenant.environment_id,
               "flag_key": "new-checkout", "rollout_percentage": 50.0, **arms,
               "sample_ratio_expected": 0.5, "sample_ratio_observed": 0.5012,
               "sample_ratio_p_value": 0.91, "sample_ratio_mismatch": False}  # fmt: skip
        insert_health(con, row, {
            "failureRate": {"difference": 0.2, "ci_low": -0.9, "ci_high": 1.3,
                            "decision": "inconclusive"},
            "metric:revenue": {"treatment_users": 800, "treatment_mean": 12.5,
                               "control_users": 800, "control_mean": 11.0, "difference": 1.5,
                               "ci_low": 0.4, "ci_high": 2.6, "decision": "improvement",
                               "variance_reduction": 0.31},
        })  # fmt: skip
    finally:
        con.close()
    scratch.replace(warehouse)
    shown = ok(flagsight("flags", "health", "new-checkout", *where))
    assert "split           50% in treatment; observed 0.5012 (p = 0.91)" in shown
    assert "Failure rate    +0.2 pp [-0.9, +1.3], inconclusive" in shown
    assert "p95 latency     withheld" in shown and "Coverage        withheld" in shown
    assert (
        "metric:revenue  treatment 12.5 (800 users) vs control 11 (800 users);"
        " +1.5 [+0.4, +2.6], improvement; interval 31% narrower from pre-exposure data"
    ) in shown
