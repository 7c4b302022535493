"""The suite leaves no process behind (``tests/support/process_groups.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import process_groups
from tests.support.server import GunicornServer


def alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_group_started_by_a_test_is_recorded_and_ended() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)",
        ],
        start_new_session=True,
    )
    assert child.pid in process_groups.started()
    assert alive(child.pid)
    assert process_groups.end({child.pid}) == [child.pid]
    child.wait(10)
    assert not alive(child.pid)  # the grandchild too: it was in the group
    assert child.pid not in process_groups.started()


def test_a_server_that_does_not_become_ready_is_not_left_running(tmp_path: Path) -> None:
    server = GunicornServer(tmp_path / "data", admin_token="never-ready-token-0123456789")
    before = process_groups.started()
    with pytest.raises(RuntimeError, match="not ready"):
        server.start(timeout_s=0.05)
    assert server.proc is None
    (group,) = process_groups.started() - before
    assert not alive(group)
