"""Compile ``fastpath.c``, ``attribute_columns.c`` and the vendored BLAKE2b (``blake2/``), and ``expressions.cc``
against Debian's RE2 (``libre2-dev``), into ``api/native`` (``make install`` runs this).

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
(``api.native.fastpath`` is None). The expressions are a module of their own, C++ linked to
``libre2``: without a C++ compiler or RE2's headers it says so, and ``MATCHES`` is decided by
the core's own RE2 (``api.native.expressions`` is None), slower and alike.
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
SOURCES = (HERE / "fastpath.c", HERE / "attribute_columns.c", HERE / "blake2" / "blake2b-ref.c")
INPUTS = (
    *SOURCES,
    HERE / "attribute_columns.h",
    HERE / "blake2" / "blake2.h",
    HERE / "blake2" / "blake2-impl.h",
    HERE / "build.py",
)
"""Whatever the built module depends on: a newer one means building again."""
OUR_FLAGS = ("-DNDEBUG", "-std=c11", "-fvisibility=hidden", "-Wall", "-Werror")


EXPRESSIONS_SOURCE = HERE / "expressions.cc"
EXPRESSIONS_INPUTS = (EXPRESSIONS_SOURCE, HERE / "build.py")
OUR_CXX_FLAGS = ("-DNDEBUG", "-std=c++17", "-fvisibility=hidden", "-Wall", "-Werror")
RE2_HEADER = Path("/usr/include/re2/re2.h")


def target(name: str = "_fastpath") -> Path:
    return HERE / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"


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


def _fresh(out: Path, inputs: tuple[Path, ...]) -> bool:
    return out.exists() and out.stat().st_mtime >= max(path.stat().st_mtime for path in inputs)


def _link(link: list[str], objects: list[str], out: Path, libraries: tuple[str, ...] = ()) -> None:
    """Link to a temporary name and rename into place (a process that has the old module
    loaded keeps a whole file)."""
    partial = out.with_name(f".{out.name}.tmp")
    subprocess.run([*link, *objects, "-o", str(partial), *libraries], check=True)
    os.replace(partial, out)


def build(force: bool = False) -> Path | None:
    """The fast path's path, or None when there is no compiler; the expressions too."""
    build_expressions(force)
    out = target()
    if not force and _fresh(out, INPUTS):
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
        _link(link, objects, out)
    return out


def cxx_commands(compiler: str) -> tuple[list[str], list[str]]:
    """``commands`` for the C++ module: the interpreter's C flags (they hold for C++), C++17,
    linked by the C++ compiler so that its runtime comes along."""
    compile_, _link_c = commands(compiler)
    flags = [flag for flag in compile_[1:] if flag not in OUR_FLAGS]
    link = [compiler, *_config("LDCXXSHARED")[1:]]
    return [compiler, *flags, *OUR_CXX_FLAGS], link


def build_expressions(force: bool = False) -> Path | None:
    """``_expressions``' path, or None when there is no C++ compiler or no RE2 to build it
    with (``libre2-dev``; the core's own RE2 then searches)."""
    out = target("_expressions")
    if not force and _fresh(out, EXPRESSIONS_INPUTS):
        return out
    cxx = _config("CXX")
    compiler = (shutil.which(cxx[0]) if cxx else None) or shutil.which("c++")
    if compiler is None or not RE2_HEADER.exists():
        missing = "a C++ compiler" if compiler is None else "RE2's headers (libre2-dev)"
        print(f"api.native: no {missing}; MATCHES is decided by the core's own RE2",
              file=sys.stderr)  # fmt: skip
        return None
    compile_, link = cxx_commands(compiler)
    print(f"Building the native expressions ({out.name}) with {compiler} ...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        obj = str(Path(tmp) / "expressions.o")
        subprocess.run([*compile_, "-c", str(EXPRESSIONS_SOURCE), "-o", obj], check=True)
        _link(link, [obj], out, ("-lre2",))
    return out


if __name__ == "__main__":
    build(force="--force" in sys.argv)
