"""Helpers for the insights pipeline tests."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from api.settings import Settings
from pipelines.assets import ASSETS
from pipelines.checks import CHECKS
from pipelines.definitions import build_resources


def materialize_all(settings: Settings) -> dg.ExecuteInProcessResult:
    """Every asset and check once, in an ephemeral instance."""
    return dg.materialize(
        [*ASSETS, *CHECKS],
        resources=build_resources(settings),
        instance=dg.DagsterInstance.ephemeral(),
    )


def add_wave_two(settings: Settings, waves) -> None:
    from tests.pipelines.fixture_lake import write_wave

    wave1, wave2 = waves
    write_wave(Path(settings.events_location), wave2, "w2", resealed_copy_of=wave1.evaluations[:25])
