"""Applying scheduled flag changes: a thread in every worker, and once at start-up.

Each tick (the config poll interval, 0.25 s by default) asks the store for due schedules; the
store's write lock makes one worker apply each (``apply_due_schedules``), bumping the config
version in the same transaction, and that worker reloads at once while the others see the new
version at their next poll: a schedule is served everywhere within about half a second of its
time. A worker starting applies what fell due while the service was down before it serves.
"""

from __future__ import annotations

import logging

from api.infra.periodic import PeriodicJob
from api.serving.services import Services

log = logging.getLogger("flagsight.schedules")


def apply_due(services: Services) -> int:
    """Apply what is due now and make this worker serve it; the number applied or failed."""
    done = services.store.apply_due_schedules(services.clock())
    for schedule in done:
        services.metrics.schedules_applied.labels(str(schedule.state)).inc()
        log.info(
            "schedule %s",
            schedule.state,
            extra={"schedule": schedule.id, "environment_id": schedule.environment_id,
                   "flag_key": schedule.flag_key, "error": schedule.error},
        )  # fmt: skip
    if done:
        services.config.refresh()
    return len(done)


class ScheduleApplier:
    """The per-worker thread; see the module docstring."""

    def __init__(self, services: Services):
        self._job = PeriodicJob(
            "flagsight-schedules",
            services.settings.config_poll_interval_s,
            lambda: apply_due(services),
            log=log,  # a busy control plane: the schedule stays pending, retried next tick
            failure="applying due schedules failed; retrying",
        )

    def start(self) -> None:
        self._job.start()

    def stop(self) -> None:
        self._job.stop()
