"""The order the suite's modules are handed to the pytest workers: the longest first.

``make test`` runs three workers with ``--dist loadscope`` (a module's tests on one worker, its
module fixtures started once). By default pytest-xdist hands modules out by their number of
tests, most first, so a module of one long test went last: the benchmark smoke (one test,
about 140 s) or the S3 lake outage (80 s) started when the other workers were finishing, and
the suite ended on one busy worker. Handing the longest modules out first (and the rest in
collection order) is the classic longest-processing-time rule; ``make test`` passes
``--no-loadscope-reorder`` so that xdist keeps this order.

The weights are the modules' seconds in one ``--durations`` run on the 2-core machine
(2026-11-27); they only order the work, so a stale weight costs time, never a result.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

MODULE_SECONDS = {
    "tests/bench/test_smoke.py": 140,
    "tests/integration/test_s3_lake.py": 137,
    "tests/reliability/test_faults.py": 83,
    "tests/cluster/test_three_hosts.py": 79,
    "tests/integration/test_schedules_and_webhooks.py": 67,
    "tests/integration/test_guarded_rollout.py": 61,
    "tests/integration/test_make_run.py": 60,
    "tests/dashboard/test_browser.py": 57,
    "tests/bench/test_compare.py": 49,
    "tests/dashboard/test_chart_browser.py": 46,
    "tests/integration/test_cli.py": 45,
    "tests/integration/test_quiet_session.py": 42,
    "tests/sdk/test_local_mode_hosts.py": 39,
    "tests/sdk/test_local_mode.py": 31,
    "tests/cluster/test_postgres_outage.py": 30,
    "tests/integration/test_crash_durability.py": 26,
    "tests/integration/test_gunicorn_api.py": 22,
    "tests/cluster/test_make_cluster.py": 22,
    "tests/bench/test_local_smoke.py": 19,
    "tests/pipelines/test_metrics.py": 18,
    "tests/dashboard/test_browser_rollouts.py": 17,
    "tests/controlplane/test_migrations.py": 16,
}


def longest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the modules of ``MODULE_SECONDS`` first, longest first; every module's
    tests stay together and in their order, the other modules in collection order."""
    rank = {module: -seconds for module, seconds in MODULE_SECONDS.items()}
    position: dict[str, int] = {}
    for item in items:
        position.setdefault(item.nodeid.split("::")[0], len(position))

    def key(item: pytest.Item) -> tuple[int, int]:
        module = item.nodeid.split("::")[0]
        return (rank.get(module, 0), position[module])

    return sorted(items, key=key)
