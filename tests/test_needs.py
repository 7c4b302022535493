"""Under CI a tool the tests need fails the run instead of skipping its tests quietly."""

from __future__ import annotations

import pytest

from tests.support.needs import MissingInCI, needs


def test_a_missing_tool_fails_under_ci_and_skips_elsewhere(monkeypatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(MissingInCI, match="wrk"):
        needs(False, "wrk")
    assert needs(True, "wrk").args == (False,)  # present: runs
    monkeypatch.delenv("CI")
    mark = needs(False, "wrk")
    assert mark.args == (True,) and mark.kwargs["reason"] == "needs wrk"
