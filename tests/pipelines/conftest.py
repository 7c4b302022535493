"""Fixtures for the insights pipeline tests: a data directory with the fixture lake."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.settings import Settings
from tests.pipelines.fixture_lake import build_waves, write_control_plane, write_wave


@pytest.fixture(scope="module")
def waves():
    return build_waves()


@pytest.fixture
def lake_settings(tmp_path: Path, waves) -> Settings:
    """Settings over a data directory holding wave 1 of the fixture lake and a control plane."""
    settings = Settings(data_dir=tmp_path / "data")
    write_wave(Path(settings.events_location), waves[0], "w1")
    write_control_plane(settings.control_plane_path)
    return settings
