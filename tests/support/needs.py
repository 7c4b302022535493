"""Tests that need a tool from outside Python: skipped where it is missing on a developer's
machine, a failed run under CI (``CI=true``), where ``make test`` installs every one of them
(``make system-deps``): a missing browser must not turn the dashboard's tests into quiet
skips."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"


class MissingInCI(RuntimeError):
    """Under CI, a tool ``make test`` should have installed is missing."""


def needs(present: bool, what: str) -> pytest.MarkDecorator:
    """``pytestmark = needs(condition, "Debian's chromium")``."""
    if not present and os.environ.get("CI") == "true":
        raise MissingInCI(f"CI=true and {what} is missing: make system-deps installs it")
    return pytest.mark.skipif(not present, reason=f"needs {what}")


def needs_chromium() -> pytest.MarkDecorator:
    return needs(os.path.exists(CHROMIUM), "Debian's chromium (make system-deps)")


def needs_wrk() -> pytest.MarkDecorator:
    return needs(shutil.which("wrk") is not None, "wrk (make system-deps)")
