"""The dependencies of one app instance, built once per process and passed to ``create_app``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flagsight_core.ids import EvaluationIdIssuer

from api.controlplane.cache import ConfigCache
from api.controlplane.store import ControlPlaneStore
from api.eventlog import EventLog
from api.infra.host_slots import HostSlots
from api.metering.meter import Meter
from api.observability.metrics import Metrics
from api.observability.tallies import Tallies
from api.serving.change_feed import ChangeFeed
from api.settings import Settings


@dataclass
class Services:
    settings: Settings
    store: ControlPlaneStore
    config: ConfigCache
    meter: Meter
    event_log: EventLog
    ids: EvaluationIdIssuer
    metrics: Metrics
    clock: Callable[[], float] = field(default=time.time)
    tallies: Tallies = field(default=None)  # type: ignore[assignment]  # made from metrics
    change_feed: ChangeFeed = field(default=None)  # type: ignore[assignment]  # made from config
    stream_slots: HostSlots = field(default=None)  # type: ignore[assignment]  # from settings
    """Each API key's event streams, counted over the host's workers."""

    def __post_init__(self) -> None:
        if self.tallies is None:
            self.tallies = Tallies(self.metrics)
        if self.change_feed is None:
            self.change_feed = ChangeFeed(self.config)
        if self.stream_slots is None:
            self.stream_slots = HostSlots(
                self.settings.stream_slots_dir, self.settings.streams_per_key
            )
