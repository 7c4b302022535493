"""schemathesis' test has one pytest node id per API operation (``conftest.py`` gives each its
operation as its parameter id): under pytest 9 all 44 shared one, so reports named them alike,
``--lf`` re-ran them all and the progress ended at 97 %. Checked on what pytest itself collects,
in a subprocess, as a person running the suite sees it."""

from __future__ import annotations

import subprocess
import sys

from api.web.openapi.document import openapi_document
from tests.support.server import REPO

FUZZ = "tests/reliability/test_fuzz.py"
TEST = "test_every_operation_answers_as_documented"
METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


COLLECT = f"""
import sys, pytest
for extra in ([], sys.argv[1:]):
    print("=== collection", flush=True)
    code = pytest.main(["--collect-only", "-q", "-p", "no:randomly", "{FUZZ}", *extra])
    print("=== exit", int(code), flush=True)
"""
"""Two collections in one process: the second reuses the first's imports (the app, schemathesis),
which take most of the 5 s a collection costs."""


def collected(*selection: str) -> tuple[list[str], list[str]]:
    """The node ids ``pytest --collect-only`` lists for the fuzz module's operation test: all
    of them, and those ``selection`` (pytest's options) selects."""
    run = subprocess.run(
        [sys.executable, "-c", COLLECT, *selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    runs = run.stdout.split("=== collection")[1:]
    assert len(runs) == 2 and all("=== exit 0" in r for r in runs), run.stdout[-3000:]
    all_ids, selected = (
        [line for line in r.splitlines() if line.startswith(f"{FUZZ}::{TEST}")] for r in runs
    )
    return all_ids, selected


def test_each_fuzzed_operation_has_its_own_node_id_and_can_be_run_alone() -> None:
    operations = {
        f"{method.upper()} {path}"
        for path, item in openapi_document()["paths"].items()
        if not path.endswith("/stream")  # excluded from fuzzing: a stream never ends
        for method in item
        if method in METHODS
    }
    # One is selected by keyword, as conftest.py says (a bracketed node id is not matched).
    ids, alone = collected("-k", "DELETE and rollout")
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1][:3]
    assert {i.removeprefix(f"{FUZZ}::{TEST}") for i in ids} == {f"[{o}]" for o in operations}
    path = "/admin/v1/environments/{envId}/flags/{flagKey}/rollout"
    assert alone == [f"{FUZZ}::{TEST}[DELETE {path}]"]
