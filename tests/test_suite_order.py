"""The suite hands its longest modules to the workers first, each module whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.scheduling import MODULE_SECONDS, longest_first


@dataclass(frozen=True)
class _Item:
    nodeid: str


def test_the_longest_modules_come_first_and_each_module_stays_whole_and_in_order():
    smoke, lake = "tests/bench/test_smoke.py", "tests/integration/test_s3_lake.py"
    assert MODULE_SECONDS[smoke] > MODULE_SECONDS[lake]
    items = [
        _Item("tests/admin/test_a.py::one"),
        _Item(f"{lake}::first"),
        _Item("tests/admin/test_b.py::one"),
        _Item(f"{lake}::second"),
        _Item(f"{smoke}::only"),
        _Item("tests/admin/test_a.py::two"),
    ]
    ordered = [item.nodeid for item in longest_first(items)]  # type: ignore[arg-type]
    assert ordered == [
        f"{smoke}::only",
        f"{lake}::first",
        f"{lake}::second",
        "tests/admin/test_a.py::one",
        "tests/admin/test_a.py::two",
        "tests/admin/test_b.py::one",
    ]


def test_every_weighted_module_exists():
    """A module renamed or removed would silently lose its place at the front."""
    root = Path(__file__).resolve().parents[1]
    assert [m for m in MODULE_SECONDS if not (root / m).is_file()] == []
