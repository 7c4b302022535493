"""A fresh server's data directory stays small: what ``docs/operations.md`` says it takes before
any traffic is an upper bound, measured on a real ``flagsight serve`` once it is ready. (It was
4.6 MB: a 2.1 MB meter file and 2 MB of Prometheus files a process.) The figures are read from
the docs, so the sentence an operator sizes a disk by is the one checked."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.support.server import REPO, GunicornServer

KB = 1024  # the docs' KB and MB are binary, as du's
MB = 1024 * KB
WORKERS = 2  # FLAGSIGHT_WORKERS' default, which the docs' figure is for


def _documented() -> dict[str, float]:
    """The sentence of ``docs/operations.md`` giving a fresh data directory's size."""
    text = " ".join((REPO / "docs" / "operations.md").read_text().split())
    found = re.search(
        r"A fresh data directory takes at most ([\d.]+) MB before any traffic with the default"
        r" two workers .*?\(`run/meter\.bin`, about (\d+) KB\), (\d+) KB of Prometheus files for"
        r" each process",
        text,
    )
    assert found, "docs/operations.md no longer states a fresh data directory's size"
    total_mb, meter_kb, process_kb = (float(group) for group in found.groups())
    return {"total": total_mb * MB, "meter": meter_kb * KB, "process": process_kb * KB}


def _allocated(directory: Path) -> int:
    """Bytes of disk the directory's files take (``du``'s count, not their apparent sizes)."""
    return sum(p.lstat().st_blocks * 512 for p in directory.rglob("*") if p.is_file())


@pytest.fixture
def fresh_server(tmp_path: Path):
    server = GunicornServer(tmp_path / "data", admin_token=ADMIN_TOKEN, workers=WORKERS).start()
    try:
        yield server
    finally:
        server.kill()  # nothing here depends on a clean shutdown


def test_a_fresh_data_directory_takes_no_more_than_the_docs_say(fresh_server) -> None:
    documented = _documented()
    run = fresh_server.data_dir / "run"
    workers = fresh_server.worker_pids()
    assert len(workers) == WORKERS
    deadline = time.monotonic() + 10  # /readyz answered: the other worker may still be booting
    while len(counters := sorted((run / "prometheus").glob("counter_*.db"))) < WORKERS + 3:
        assert time.monotonic() < deadline, [p.name for p in counters]
        time.sleep(0.1)
    owners = {p.stem.split("_", 1)[1] for p in counters}
    sealer = owners - {*map(str, workers), "spare0", "spare1"}  # and the master's two spares
    assert len(sealer) == 1, owners
    cmdline = Path(f"/proc/{next(iter(sealer))}/cmdline").read_bytes()
    assert b"api.server.sealer_process" in cmdline  # the third process with metrics files

    assert (run / "meter.bin").stat().st_size <= documented["meter"]
    sets: dict[str, int] = {}
    for path in (run / "prometheus").iterdir():
        owner = path.stem.rsplit("_", 1)[1]
        sets[owner] = sets.get(owner, 0) + path.stat().st_size
    assert set(sets) == owners  # no file of a process beyond these
    for owner, size in sets.items():
        assert size <= documented["process"], (owner, size)
    total = _allocated(fresh_server.data_dir)
    assert total <= documented["total"], (
        total,
        {str(p.relative_to(fresh_server.data_dir)): p.stat().st_size for p in run.rglob("*")},
    )
