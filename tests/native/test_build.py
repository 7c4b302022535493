"""How ``api.native.build`` compiles the module: with the interpreter's own flags, as
setuptools would, and always ``-DNDEBUG``."""

from __future__ import annotations

import shlex
import subprocess
import sysconfig
from pathlib import Path

from api.native import build


def test_the_commands_are_the_interpreters_with_ndebug() -> None:
    compile_, link = build.commands("/usr/bin/cc")
    config = {name: shlex.split(sysconfig.get_config_var(name) or "") for name in
              ("CC", "CFLAGS", "CCSHARED", "LDSHARED")}  # fmt: skip
    assert compile_[0] == "/usr/bin/cc"
    flags = compile_[1:]
    assert flags[: len(config["CFLAGS"])] == [*config["CC"][1:], *config["CFLAGS"]]
    assert set(config["CCSHARED"]) <= set(flags)
    assert {"-DNDEBUG", "-fvisibility=hidden", "-Werror"} <= set(flags)
    assert f"-I{sysconfig.get_paths()['include']}" in flags
    assert link[1:] == config["LDSHARED"][1:]


def test_fastpath_c_refuses_to_compile_without_ndebug(tmp_path: Path) -> None:
    compile_, _link = build.commands("cc")
    without = [flag for flag in compile_ if flag != "-DNDEBUG"]
    done = subprocess.run([*without, "-c", str(build.SOURCES[0]), "-o", str(tmp_path / "x.o")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0
    assert "build with -DNDEBUG" in done.stderr


def test_the_built_module_is_newer_than_its_inputs() -> None:
    newest = max(path.stat().st_mtime for path in build.INPUTS)
    assert build.target().stat().st_mtime >= newest, "run make install (api.native.build)"


def test_the_expressions_are_built_and_newer_than_their_inputs() -> None:
    """``make test`` installs ``libre2-dev`` and a C++ compiler, so the server's RE2 is native
    there (without them the core's slower RE2 serves)."""
    newest = max(path.stat().st_mtime for path in build.EXPRESSIONS_INPUTS)
    out = build.target("_expressions")
    assert out.exists() and out.stat().st_mtime >= newest, "run make install (libre2-dev)"
