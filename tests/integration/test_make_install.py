"""What ``make run`` and ``make test`` print while they install (the first-hour review: the
first ``make run`` said nothing for about three minutes): a line per step, saying what is
being installed, and no line per package; nothing once everything is installed.

Run in a copy of the checkout's files, so that a fresh ``.venv`` is made there and the
checkout's own is left alone. The copy compiles no bytecode (``pyproject.toml``'s
``compile-bytecode``, a minute of CPU here): what is asserted is what ``make`` says, not how
long uv takes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.server import REPO


def copy_of_the_checkout(to: Path) -> Path:
    """The checkout's tracked files, as they are in the working tree, under ``to``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    pyproject = to / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("compile-bytecode = true", ""))
    return to


def make_install(checkout: Path) -> list[str]:
    """The lines ``make install`` prints (generous bound: a loaded machine, a cold cache)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "install"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return (done.stdout + done.stderr).splitlines()


def test_make_install_says_what_it_installs_a_line_per_step(tmp_path: Path) -> None:
    checkout = copy_of_the_checkout(tmp_path / "flagsight")
    try:
        first = make_install(checkout)
        again = make_install(checkout)
    finally:  # mostly hard links into uv's cache, but a gigabyte as pytest counts its folders
        shutil.rmtree(checkout / ".venv", ignore_errors=True)
    said = "\n".join(first)
    assert "Python packages" in said and "uv.lock" in said, said
    assert "Installed " in said, said  # uv's own summary: how many packages
    assert "native fast path" in said, said
    assert not [line for line in first if line.lstrip().startswith(("+ ", "- ", "~ "))], said
    assert len(first) <= 13, said  # ours: one before uv and one a native module; uv's: ten
    assert again == []  # everything there: nothing to say
