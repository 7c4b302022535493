"""``make test`` ends on pytest's summary line (issue 12): a session that runs the event log's
property tests and loads the pipeline's code location used to print about forty lines of
"nanobind: leaked instances" from DuckDB at exit, after the summary, because the code location
test left a second copy of ``pipelines.definitions`` (and its Definitions) alive until then."""

from __future__ import annotations

import subprocess
import sys

from tests.support.server import REPO

NODES = [
    "tests/eventlog/test_columnar_sealing.py::test_decode_payload_is_unchanged",
    "tests/pipelines/test_code_location.py",
    "tests/pipelines/test_metrics.py",
]


def test_a_session_with_duckdb_ends_on_the_summary_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         *NODES],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "leaked" not in run.stderr, run.stderr[:2000]
    assert run.stderr.strip() == ""
    assert " passed in " in run.stdout.strip().splitlines()[-1]
