"""The meter is exact across processes and never grants past the hard threshold."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
from pathlib import Path

import pytest

from api.metering.meter import month_label, month_of, previous_month, seconds_until_next_month
from api.metering.mmap_meter import MeterFull, MmapMeter, lease_size
from tests.support.processes import run_forked


def _hammer(path: str, org: str, attempts: int, hard: int) -> int:
    meter = MmapMeter(Path(path))
    granted = sum(meter.consume(org, 202611, 1, hard) for _ in range(attempts))
    meter.close()
    return granted


def test_concurrent_processes_never_pass_the_hard_threshold(tmp_path: Path) -> None:
    granted = run_forked(_hammer, [(str(tmp_path / "m.bin"), "org_a", 3000, 5000)] * 4)
    assert sum(granted) == 5000
    assert MmapMeter(tmp_path / "m.bin").usage("org_a", 202611) == 5000


def test_bulk_grants_are_partial_at_the_threshold(tmp_path: Path) -> None:
    meter = MmapMeter(tmp_path / "m.bin")
    assert meter.consume("org_a", 202611, 100, 110) == 100
    assert meter.consume("org_a", 202611, 25, 110) == 10
    assert meter.consume("org_a", 202611, 1, 110) == 0
    assert meter.usage("org_a", 202611) == 110


def test_months_and_organizations_are_counted_apart(tmp_path: Path) -> None:
    meter = MmapMeter(tmp_path / "m.bin")
    meter.consume("org_a", 202611, 7, 100)
    meter.consume("org_a", 202612, 3, 100)
    meter.consume("org_b", 202611, 5, 100)
    assert [
        meter.usage("org_a", 202611),
        meter.usage("org_a", 202612),
        meter.usage("org_b", 202611),
    ] == [7, 3, 5]
    assert meter.usage("org_c", 202611) == 0


def test_slots_of_months_before_the_last_are_taken_over_when_room_is_needed(
    tmp_path: Path,
) -> None:
    """Only this month and the last are read; a full file reuses older months' slots, and
    the counts of the months kept are never touched."""
    meter = MmapMeter(tmp_path / "m.bin", capacity=4)
    for name in "abcd":
        meter.consume(f"org_{name}", 202611, 10, 100)
    with pytest.raises(MeterFull):  # November is December's previous month: kept
        meter.consume("org_e", 202612, 1, 100)
    for index, name in enumerate("efgh"):
        assert meter.consume(f"org_{name}", 202701, index + 1, 100) == index + 1
    assert [meter.usage(f"org_{name}", 202701) for name in "efgh"] == [1, 2, 3, 4]
    assert meter.usage("org_a", 202611) == 0  # two months before: gone
    reopened = MmapMeter(tmp_path / "m.bin")  # the capacity is the file's
    assert reopened.usage("org_h", 202701) == 4
    with pytest.raises(MeterFull):
        reopened.consume("org_i", 202702, 1, 100)  # January is kept for February


def test_counts_survive_reopening(tmp_path: Path) -> None:
    MmapMeter(tmp_path / "m.bin").consume("org_a", 202611, 42, 100)
    assert MmapMeter(tmp_path / "m.bin").usage("org_a", 202611) == 42


def test_month_helpers() -> None:
    assert month_of(1_800_000_000) == 202701  # 2027-01-15 08:00 UTC
    assert month_label(202611) == "2026-11"
    assert (previous_month(202701), previous_month(202611)) == (202612, 202610)
    last_second_of_november = 1_796_083_199  # 2026-11-30T23:59:59Z
    assert month_of(last_second_of_november) == 202611
    assert seconds_until_next_month(last_second_of_november) == 1
    assert seconds_until_next_month(last_second_of_november - 0.5) == 2


def _drain(path: str, org: str, hard: int) -> int:
    """Consume one at a time until refused, as workers serving single evaluations do."""
    meter = MmapMeter(Path(path))
    granted = 0
    while meter.consume(org, 202611, 1, hard):
        granted += 1
    meter.close()
    return granted


def test_leases_far_from_the_threshold_stay_exact_across_processes(tmp_path: Path) -> None:
    hard = 60_000  # leases up to LEASE_FLOOR before the threshold, exact after
    granted = run_forked(_drain, [(str(tmp_path / "m.bin"), "org_a", hard)] * 4)
    assert sum(granted) == hard
    assert MmapMeter(tmp_path / "m.bin").usage("org_a", 202611) == hard


def test_usage_is_exact_while_a_lease_is_outstanding(tmp_path: Path) -> None:
    meter = MmapMeter(tmp_path / "m.bin")
    for _ in range(12_345):
        assert meter.consume("org_a", 202611, 1, 1_000_000) == 1
    other = MmapMeter(tmp_path / "m.bin")  # another worker's view
    assert other.usage("org_a", 202611) == 12_345
    meter.release_leases()
    assert other.usage("org_a", 202611) == 12_345


def _take_a_lease_and_die(path: str) -> None:
    meter = MmapMeter(Path(path))
    for _ in range(10):
        meter.consume("org_a", 202611, 1, 50_000)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_workers_lease_is_reclaimed(tmp_path: Path) -> None:
    child = mp.get_context("fork").Process(
        target=_take_a_lease_and_die, args=(str(tmp_path / "m.bin"),)
    )
    child.start()
    child.join()
    meter = MmapMeter(tmp_path / "m.bin")
    assert meter.usage("org_a", 202611) == 10
    served = 0
    while meter.consume("org_a", 202611, 1, 50_000):
        served += 1
    assert served == 50_000 - 10


@pytest.mark.parametrize(
    ("remaining", "lease"), [(0, 0), (9_999, 0), (10_000, 100), (55_000, 550), (10_000_000, 1_000)]
)
def test_lease_sizes(remaining: int, lease: int) -> None:
    assert lease_size(remaining) == lease


def test_the_meter_file_is_allocated_whole_never_sparse(tmp_path: Path) -> None:
    """A store into a hole of a mapped file faults on a full disk (SIGBUS): no holes."""
    path = tmp_path / "m.bin"
    MmapMeter(path, capacity=1 << 10).close()
    stat = os.stat(path)
    assert stat.st_blocks * 512 >= stat.st_size > 0
    old = tmp_path / "old.bin"  # a sparse file made before this fix is filled in when opened
    with open(old, "wb") as sparse:
        sparse.write(b"FSMETER2" + (1 << 10).to_bytes(4, "little"))
        sparse.truncate(stat.st_size)
    assert os.stat(old).st_blocks * 512 < stat.st_size
    MmapMeter(old).close()
    assert os.stat(old).st_blocks * 512 >= stat.st_size


def test_the_meter_file_at_its_default_slots_is_no_larger_than_the_docs_say(
    tmp_path: Path,
) -> None:
    """``docs/metering.md`` gives the file's size an operator sizes a disk by (it was 2.1 MB
    before the slots of months nobody reads were reused); the figure is read from there."""
    text = " ".join((Path(__file__).parents[2] / "docs" / "metering.md").read_text().split())
    found = re.search(r"allocated whole when `flagsight serve` starts \(about (\d+) KB", text)
    assert found, "docs/metering.md no longer states the meter file's size"
    path = tmp_path / "m.bin"
    MmapMeter(path).close()  # the default slot count, as `flagsight serve` makes it
    assert 0 < path.stat().st_size <= int(found.group(1)) * 1024  # the docs' KB are binary
