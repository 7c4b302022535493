"""``EvaluationServer.serve_one`` (the single evaluate's path) against ``serve`` for one user:
the same result, the same event, the same metering and the same tallies."""

from __future__ import annotations

import logging
import time

import pytest
from flagsight_core import NOT_EVALUATED

from api.eventlog import EventLogUnavailable
from api.eventlog.failures import Throttled
from api.eventlog.frames import EVALUATION_BATCH_CODE, decode_evaluation_frame, encode_frame
from api.eventlog.schema import SOURCE_EVALUATE
from api.serving.evaluations import EvaluationServer
from tests.support.admin import Admin

RULES = [
    {"type": "SEGMENT", "segment": "beta", "value": True},
    {"type": "PERCENTAGE", "percentage": 50, "value": False},
    {"type": "STATIC", "value": True},
]


class Recording:
    """Keeps the batches appended; refuses them all when ``refuse`` is set."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.batches: list = []
        self.refuse = False

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def append_evaluation_batch(self, batch) -> None:
        if self.refuse:
            raise EventLogUnavailable("refused for the test")
        self.batches.append(batch)

    def append_evaluation_frame(self, frame, count: int) -> None:
        self.append_evaluation_batch(decode_evaluation_frame(frame))


def _setup(services, admin: Admin, limit: int):
    tenant = admin.tenant(plan="enterprise", limit=limit)
    admin.segment(tenant.organization_id, "beta", ["member"])
    env = tenant.environment_id
    admin.flag(env, "f", RULES)
    admin.flag(env, "off", RULES, enabled=False)
    admin.flag(env, "old", RULES, archived=True)
    services.config.refresh()
    services.event_log = Recording(services.event_log)
    services.clock = lambda: 1_800_000_000.5  # in 2027-01
    return EvaluationServer(services), services.config.caller(tenant.api_key)


def _same(services, served, outcome: int, prefix: str) -> None:
    assert outcome == served.outcomes[0]
    old, new = services.event_log.batches[-2:]
    assert new.evaluation_id_prefix == prefix
    assert new._replace(evaluation_id_prefix="") == old._replace(evaluation_id_prefix="")
    frames = [encode_frame(EVALUATION_BATCH_CODE, batch) for batch in (old, new)]
    assert len(frames[0]) == len(frames[1])
    services.ids.verify(prefix + "0000")


def _evaluated(services) -> float:
    services.tallies.flush()
    return sum(
        sample.value
        for metric in services.metrics.evaluations.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def test_serve_one_answers_logs_meters_and_counts_as_serve(services, admin: Admin) -> None:
    server, caller = _setup(services, admin, 10**9)
    cases = [
        (flag, user, sdk)
        for flag in ("f", "off", "old", "missing")
        for user in ("member", "someone", "\u00e9", "x" * 1024)
        for sdk in (None, "py/1")
    ]
    for flag, user, sdk in cases:
        served = server.serve(
            caller.key, caller.environment, flag, [user], sdk=sdk, source=SOURCE_EVALUATE
        )
        outcome, prefix = server.serve_one(
            caller, caller.environment, flag, user, sdk=sdk, source=SOURCE_EVALUATE
        )
        _same(services, served, outcome, prefix)
    assert services.meter.usage(caller.key.organization_id, 202701) == 2 * len(cases)
    assert _evaluated(services) == 2 * len(cases)


def test_serve_one_refuses_past_the_threshold_as_serve(services, admin: Admin) -> None:
    server, caller = _setup(services, admin, 10)  # hard threshold 11
    for _ in range(11):
        outcome, _prefix = server.serve_one(
            caller, caller.environment, "f", "member", sdk=None, source=SOURCE_EVALUATE
        )
        assert outcome == 3  # SEGMENT:true
    served = server.serve(
        caller.key, caller.environment, "f", ["member"], sdk=None, source=SOURCE_EVALUATE
    )
    outcome, prefix = server.serve_one(
        caller, caller.environment, "f", "member", sdk=None, source=SOURCE_EVALUATE
    )
    _same(services, served, outcome, prefix)
    assert outcome == 10 and services.event_log.batches[-1].rules == bytes([NOT_EVALUATED])
    assert services.metrics.plan_limit_refusals._value.get() == 2
    assert services.meter.usage(caller.key.organization_id, 202701) == 11
    assert _evaluated(services) == 13


def test_serve_one_counts_what_the_log_refuses(services, admin: Admin) -> None:
    server, caller = _setup(services, admin, 10**9)
    services.event_log.refuse = True
    outcome, _prefix = server.serve_one(
        caller, caller.environment, "f", "member", sdk=None, source=SOURCE_EVALUATE
    )
    assert outcome == 3  # SEGMENT:true: flags keep working
    assert services.metrics.events_lost.labels("evaluation")._value.get() == 1


def test_losses_are_all_counted_but_logged_once_per_interval(
    services, admin: Admin, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk loses a batch on every request: each is counted on /metrics, and the
    error line comes at most once per interval, carrying how many were lost meanwhile."""
    server, caller = _setup(services, admin, 10**9)
    services.event_log.refuse = True
    with caplog.at_level(logging.ERROR, logger="flagsight"):
        for index in range(50):
            server.serve_one(
                caller, caller.environment, "f", f"u{index}", sdk=None, source=SOURCE_EVALUATE
            )
        server.serve(caller.key, caller.environment, "f", ["a", "b", "c"], sdk=None,
                     source=SOURCE_EVALUATE)  # fmt: skip
    assert services.metrics.events_lost.labels("evaluation")._value.get() == 53
    lines = [r for r in caplog.records if r.getMessage() == "evaluation events not logged"]
    assert len(lines) == 1 and lines[0].lost == 1 and lines[0].suppressed == 0


def test_a_throttled_line_carries_the_total_of_what_it_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    throttled = Throttled(0.2, logging.getLogger("flagsight.test"))
    failure = EventLogUnavailable("disk full")
    with caplog.at_level(logging.ERROR, logger="flagsight.test"):
        for count in (1, 2, 3, 4):
            throttled.warning("lost", "lost", failure, level=logging.ERROR, total_field="n",
                              count=count)  # fmt: skip
        time.sleep(0.25)
        throttled.warning("lost", "lost", failure, level=logging.ERROR, total_field="n", count=5)
    assert [(r.n, r.suppressed) for r in caplog.records] == [(1, 0), (14, 3)]
