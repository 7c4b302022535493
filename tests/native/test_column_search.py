"""The native column search (``column_search.cc``, Debian's RE2) decides as the core's own RE2
does for every string, and says it cannot where it cannot: the server hands it every long
``MATCHES`` column of a bulk request (``flagsight_core.conditions.use_column_search``)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from flagsight_core.conditions import condition_from_json

from api.native import column_search

pytestmark = pytest.mark.skipif(column_search is None, reason="the native path is switched off")

EXPRESSIONS = [
    r"@(example|flagsight)\.(com|de)$",
    r"^user\d+@",
    r"(?i)EXAMPLE",
    r"ü+",
    r"^$",
    r"a.b",
    r"(?s)a.b",
    r"\bword\b",
    r"[[:digit:]]{3}",
    r"\p{Greek}",
    r"^(a+)+$",
    r"x*",
]
ALPHABET = "ab\n\x00@.üΩ1 wordEXAMPLEexample.comuser"


def _own(expression: str, items: list[str]) -> list[bool]:
    """The core's own answer for each item: ``MATCHES`` of one value."""
    condition = condition_from_json(
        {"attribute": "a", "operator": "MATCHES", "values": [expression]}
    )
    return [condition.holds_for(item) for item in items]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_random_strings_are_decided_as_the_core_decides_each(expression: str) -> None:
    rng = random.Random(expression)
    items = ["".join(rng.choices(ALPHABET, k=rng.randrange(0, 24))) for _ in range(2_000)]
    items += ["", "user12@example.com", "ΑΒΓ", "a\nb", "word", "aaaa", "x"]
    found = column_search(items, expression)
    assert found is not None
    assert found.dtype == bool and len(found) == len(items)
    assert found.tolist() == _own(expression, items)


def test_a_string_that_is_not_unicode_is_left_to_the_core() -> None:
    """A lone surrogate has no UTF-8 form; the core matches it as bytes itself."""
    assert column_search(["ok@example.com", "\ud800@example.com"], "@example") is None


def test_an_expression_re2_refuses_is_left_to_the_core() -> None:
    assert column_search(["a"], "(unclosed") is None


def test_the_answer_can_be_combined_in_place() -> None:
    """The core combines a column's answers with others; the array must be its own."""
    found = column_search(["a", "b"], "a")
    assert found is not None
    found &= [True, True]
    assert found.tolist() == [True, False]


def test_more_expressions_than_it_keeps_compiled_are_still_right() -> None:
    items = [f"item-{i}" for i in range(600)]
    for i in range(600):
        found = column_search(items, f"^item-{i}$")
        assert found is not None and found.tolist() == [j == i for j in range(600)]


def test_a_catastrophic_pattern_over_a_long_column_answers() -> None:
    """``(a+)+$`` over strings of a's ending in 'b' is exponential for a backtracking engine;
    RE2 answers each in time linear in its length (the check is that it answers at all)."""
    items = ["a" * 1_000 + "b"] * 1_000
    found = column_search(items, r"^(a+)+$")
    assert found is not None and not found.any()


def test_the_worker_imports_no_pyarrow() -> None:
    """The column search was Arrow's kernel once: pyarrow in every worker, 34 MB each."""
    code = "import sys, api.asgi; print('pyarrow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
