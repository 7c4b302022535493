"""``counted``: a count and its noun agree, for every message that says how many."""

from __future__ import annotations

import pytest
from flagsight_core.words import counted


@pytest.mark.parametrize(
    ("count", "noun", "plural", "said"),
    [
        (1, "organization", None, "1 organization"),
        (0, "organization", None, "0 organizations"),
        (2, "organization", None, "2 organizations"),
        (4300, "more user", None, "4,300 more users"),
        (1, "more user", None, "1 more user"),
        (1, "entry", "entries", "1 entry"),
        (3, "entry", "entries", "3 entries"),
    ],
)
def test_a_count_and_its_noun_agree(count: int, noun: str, plural: str | None, said: str) -> None:
    assert counted(count, noun, plural) == said
