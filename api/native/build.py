"""Compile ``fastpath.c`` and the vendored BLAKE2b (``blake2/``) into ``api/native`` (``make
install`` runs this).

The commands are the ones setuptools would run for an extension, from the interpreter's own
configuration (``sysconfig``): ``CC CFLAGS CCSHARED`` to compile, ``LDSHARED`` to link. A plain
compiler call rather than a build backend: setuptools is not installed, the module has two C
files and no dependency beyond the Python headers and libc, and the project is installed
editable, so the shared object sits beside its source. Added to the interpreter's flags:
``-DNDEBUG`` always (CPython's header asserts must not abort a worker), C11, warnings as errors,
and hidden symbols (only ``PyInit__fastpath`` is exported; BLAKE2b's names cannot clash with
another library's in the process). The module is linked to a temporary name and renamed into
place, so a process that has the old one loaded keeps a whole file.

Without a C compiler it says so and the service runs on the pure-Python path
(``api.native.fastpath`` is None).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "fastpath.c", HERE / "blake2" / "blake2b-ref.c")
INPUTS = (
    *SOURCES,
    HERE / "blake2" / "blake2.h",
    HERE / "blake2" / "blake2-impl.h",
    HERE / "build.py",
)
"""Whatever the built module depends on: a newer one means building again."""
OUR_FLAGS = ("-DNDEBUG", "-std=c11", "-fvisibility=hidden", "-Wall", "-Werror")


def target() -> Path:
    return HERE / f"_fastpath{sysconfig.get_config_var('EXT_SUFFIX')}"


def _config(name: str) -> list[str]:
    return shlex.split(sysconfig.get_config_var(name) or "")


def commands(compiler: str) -> tuple[list[str], list[str]]:
    """The compile command (without its source and object) and the link command (without its
    objects and output), as setuptools builds them from the interpreter's configuration."""
    cc, ldshared = _config("CC"), _config("LDSHARED")
    if ldshared and cc and ldshared[0] == cc[0]:
        ldshared[0] = compiler
    paths = sysconfig.get_paths()
    includes = dict.fromkeys(f"-I{paths[key]}" for key in ("include", "platinclude"))
    compile_ = [compiler, *cc[1:], *_config("CFLAGS"), *_config("CCSHARED"), *OUR_FLAGS, *includes]
    return compile_, ldshared


def build(force: bool = False) -> Path | None:
    """The built module's path, or None when there is no compiler."""
    out = target()
    newest = max(path.stat().st_mtime for path in INPUTS)
    if not force and out.exists() and out.stat().st_mtime >= newest:
        return out
    cc = _config("CC")
    compiler = (shutil.which(cc[0]) if cc else None) or shutil.which("cc")
    if compiler is None:
        print("api.native: no C compiler; the pure-Python path serves", file=sys.stderr)
        return None
    compile_, link = commands(compiler)
    print(f"Building the native fast path ({out.name}) with {compiler} ...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        objects = [str(Path(tmp) / f"{source.stem}.o") for source in SOURCES]
        for source, obj in zip(SOURCES, objects, strict=True):
            subprocess.run([*compile_, "-c", str(source), "-o", obj], check=True)
        partial = out.with_name(f".{out.name}.tmp")
        subprocess.run([*link, *objects, "-o", str(partial)], check=True)
        os.replace(partial, out)
    return out


if __name__ == "__main__":
    build(force="--force" in sys.argv)
