"""SegmentMembership: exact for members, compact, built vectorised."""

from __future__ import annotations

import sys
import tracemalloc

import numpy as np
from flagsight_core.segments import SegmentMembership, identifier_hash
from hypothesis import given
from hypothesis import strategies as st


@given(
    members=st.lists(st.text(min_size=1, max_size=40), max_size=200),
    probes=st.lists(st.text(min_size=1, max_size=40), max_size=50),
)
def test_answers_like_a_set(members, probes) -> None:
    membership = SegmentMembership.build(members)
    expected = set(members)
    assert len(membership) == len(expected)
    for identifier in [*members, *probes]:
        assert (identifier in membership) == (identifier in expected)


@given(
    members=st.lists(st.text(min_size=1, max_size=40), max_size=200),
    probes=st.lists(st.text(min_size=1, max_size=40), max_size=50),
)
def test_bulk_lookup_answers_like_one_by_one(members, probes) -> None:
    membership = SegmentMembership.build(members)
    asked = [*probes, *members[::2]]
    assert membership.contains_many(asked).tolist() == [u in membership for u in asked]


def test_bulk_lookup_follows_probe_chains_in_a_full_table() -> None:
    """A table at its 0.5 load factor has long probe chains: members at their ends are found,
    and non-members stop only at an empty slot."""
    members = [f"member-{i}" for i in range(4096)]
    membership = SegmentMembership.build(members)
    others = [f"other-{i}" for i in range(4096)]
    assert membership.contains_many(members).all()
    assert not membership.contains_many(others).any()
    assert membership.contains_many(["\ud800", "member-7"]).tolist() == [False, True]
    assert SegmentMembership.build([]).contains_many(["a", "b"]).tolist() == [False, False]


def test_lone_surrogates_and_non_strings() -> None:
    membership = SegmentMembership.build(["\ud800", "é", "😀"])
    assert "\ud800" in membership and "é" in membership and "😀" in membership
    assert "e" not in membership
    assert 5 not in membership and None not in membership and b"\xc3\xa9" not in membership


def test_empty_segment() -> None:
    membership = SegmentMembership.build([])
    assert len(membership) == 0 and "anyone" not in membership


def test_load_factor_is_at_most_half() -> None:
    for count in (1, 3, 4, 5, 1000, 4096, 4097):
        membership = SegmentMembership.build([f"u{i}" for i in range(count)])
        assert membership.nbytes // 8 >= 2 * count


def test_hash_is_never_the_empty_marker() -> None:
    assert identifier_hash("anything") != 0
    table = np.zeros(8, dtype=np.uint64)
    table[3] = 1
    assert len(SegmentMembership(table)) == 1


def test_a_million_identifiers() -> None:
    members = [f"user-{i:07d}" for i in range(1_000_000)]
    membership = SegmentMembership.build(members)  # its speed: bench, not here
    assert len(membership) == 1_000_000
    assert all(member in membership for member in members[::97])
    assert all(member in membership for member in members[-1000:])
    non_members = [f"user-{i:07d}" for i in range(1_000_000, 1_050_000)] + [
        "User-0000001",
        "user-1",
    ]
    assert not any(identifier in membership for identifier in non_members)

    # a Python set of the same identifiers: its table plus the strings themselves
    tracemalloc.start()
    as_set = {f"user-{i:07d}" for i in range(1_000_000)}
    set_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert set_bytes >= sys.getsizeof(as_set)
    assert membership.nbytes == 16 * 1024 * 1024
    assert membership.nbytes * 5 < set_bytes, (membership.nbytes, set_bytes)


def test_lookups_find_exactly_the_members() -> None:
    membership = SegmentMembership.build([f"u{i}" for i in range(100_000)])
    probes = [f"u{i}" for i in range(0, 200_000, 2)]
    assert sum(probe in membership for probe in probes) == 50_000
