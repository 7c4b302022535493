"""Compile ``fastpath.c`` into ``api/native`` (``make install`` runs this).

A plain compiler call rather than a build backend hook: the module has one C file, no
dependency but the Python headers, and the project is installed editable, so the shared
object sits beside its source. Without a C compiler it says so and the service runs on the
pure-Python path (``api.native.fastpath`` is None).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fastpath.c"


def target() -> Path:
    return HERE / f"_fastpath{sysconfig.get_config_var('EXT_SUFFIX')}"


def build(force: bool = False) -> Path | None:
    """The built module's path, or None when there is no compiler."""
    out = target()
    if not force and out.exists() and out.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    compiler = shutil.which(sysconfig.get_config_var("CC").split()[0]) or shutil.which("cc")
    if compiler is None:
        print("api.native: no C compiler; the pure-Python path serves", file=sys.stderr)
        return None
    command = [
        compiler, "-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-std=c11",
        f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(out),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    return out


if __name__ == "__main__":
    build(force="--force" in sys.argv)
