"""The SDK installs on its own from the repository: its wheel carries the evaluation core
(``flagsight_core``) and asks an index only for public packages, so nobody's package named
``flagsight-core`` can be installed in its place; and it requires the Python the suite runs on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest
from flagsight_core import RESULTS, decide_one
from flagsight_core.ruleset import ruleset_from_json

from tests.support.needs import needs

REPO = Path(__file__).resolve().parents[2]
SDK = REPO / "sdk" / "python"
CORE = REPO / "sdk" / "core"
RULESET = {
    "format": 2,
    "environmentId": "env_packaging",
    "version": 1,
    "segmentSalt": "AAAAAAAAAAAAAAAAAAAAAA==",
    "flags": [
        {
            "key": "half",
            "enabled": True,
            "archived": False,
            "rules": [{"type": "PERCENTAGE", "percentage": 50}],
        }
    ],
    "segments": {},
}
USERS = [f"user-{n}" for n in range(200)]
REMOTE_ONLY_CHECK = """
import importlib.util
from flagsight_sdk import FlagsightClient
answer = FlagsightClient("fsk_x", "http://127.0.0.1:9", timeout_s=0.2).evaluate("half", "u")
print(answer.value, answer.failure, importlib.util.find_spec("numpy") is None)
"""
INSTALLED_CHECK = """
import json, sys
from importlib import metadata
import flagsight_core
from flagsight_core import RESULTS, decide_one
from flagsight_core.ruleset import ruleset_from_json
from flagsight_sdk import FlagsightClient
from flagsight_sdk.local import LocalEvaluator

ruleset = ruleset_from_json(json.loads(sys.argv[1]))
flag = ruleset.flags["half"]
remote = FlagsightClient("fsk_x", "http://127.0.0.1:9", timeout_s=0.2).evaluate("half", "u")
print(json.dumps({
    "core_file": flagsight_core.__file__,
    "distributions": sorted(d.metadata["Name"] for d in metadata.distributions()),
    "remote_failure": remote.failure,
    "local_values": [RESULTS[decide_one(flag, u, {})[0][0]].value for u in json.loads(sys.argv[2])],
}))
"""

pytestmark = needs(shutil.which("uv") is not None, "uv (make install installs it)")


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def run(*command: str | Path) -> str:
    done = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK built as a user would (``uv build``: the sdist, then the wheel from it)."""
    out = tmp_path_factory.mktemp("dist")
    run("uv", "build", SDK, "--out-dir", out)
    (built,) = out.glob("flagsight_sdk-*.whl")
    return built


def test_the_wheel_carries_the_core_and_names_no_private_package(wheel: Path) -> None:
    core_files = {
        f"flagsight_core/{path.relative_to(CORE / 'flagsight_core').as_posix()}"
        for path in (CORE / "flagsight_core").rglob("*.py")
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = HeaderParser().parsestr(archive.read(metadata_name).decode())
    assert core_files <= names
    requires = metadata.get_all("Requires-Dist")
    assert not [r for r in requires if r.startswith("flagsight")], requires
    assert metadata["Requires-Python"] == project(SDK)["requires-python"]


def test_the_wheel_installs_alone_with_pypi_and_decides_as_the_repositorys_core(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    run("uv", "venv", "--quiet", "--python", sys.executable, venv)
    run("uv", "pip", "install", "--quiet", "--python", python, wheel)
    remote_only = run(python, "-c", REMOTE_ONLY_CHECK)  # remote mode needs no numpy
    assert remote_only.split() == ["False", "CONNECTION_ERROR", "True"]
    run("uv", "pip", "install", "--quiet", "--python", python, f"{wheel}[local]")

    answer = json.loads(run(python, "-c", INSTALLED_CHECK, json.dumps(RULESET), json.dumps(USERS)))

    assert Path(answer["core_file"]).is_relative_to(venv)  # the wheel's copy, not the repo's
    assert "flagsight-core" not in answer["distributions"]
    assert answer["remote_failure"] == "CONNECTION_ERROR"  # remote mode: answered, fail-safe
    flag = ruleset_from_json(RULESET).flags["half"]
    expected = [RESULTS[decide_one(flag, user, {})[0][0]].value for user in USERS]
    assert answer["local_values"] == expected and 0 < sum(expected) < len(USERS)


def test_the_local_extra_is_the_cores_own_dependencies() -> None:
    """The wheel carries the core's code; the extra must bring what that code imports."""
    assert project(SDK)["optional-dependencies"]["local"] == project(CORE)["dependencies"]


def test_the_sdk_and_core_require_the_python_the_suite_runs_on() -> None:
    """Declared is tested: the minimum is the interpreter ``make test`` runs on (the root
    project pins it), not an older one nobody runs (3.10 lacks ``enum.StrEnum``)."""
    tested = f">={sys.version_info.major}.{sys.version_info.minor}"
    assert project(REPO)["requires-python"].split(",")[0] == tested
    assert project(SDK)["requires-python"] == tested
    assert project(CORE)["requires-python"] == tested
