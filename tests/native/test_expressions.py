"""The native expressions (``expressions.cc``, Debian's RE2) decide as the core's own RE2 does for
every string, one at a time and a column at once: the server compiles every ``MATCHES``
expression with them (``flagsight_core.conditions.use_expressions``)."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest
from flagsight_core.conditions import condition_from_json

from api.native import expressions

pytestmark = pytest.mark.skipif(expressions is None, reason="the native path is switched off")

EXPRESSIONS = [
    r"@(example|flagsight)\.(com|de)$",
    r"^user\d+@",
    r"ü+",
    r"^$",
    r"a.b",
    r"(?s)a.b",
    r"\bword\b",
    r"[[:digit:]]{3}",
    r"^(a+)+$",
    r"x*",
]
TABLE_DEPENDENT = [r"(?i)EXAMPLE", r"(?si:a.b)", r"\p{Greek}", r"\pL", r"[\P{Han}]", r"(?-i)x"]
"""Expressions whose meaning is a Unicode table, which RE2 releases update: the core's own RE2
(google-re2's, as an application's local mode has it) decides them."""
ALPHABET = "ab\n\x00@.üΩ1 wordEXAMPLEexample.comuser"


def column_search(items: list[str], expression: str) -> np.ndarray | None:
    compiled = expressions(expression)
    return None if compiled is None else np.frombuffer(compiled.search_column(items), np.bool_)


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
    compiled = expressions(expression)
    assert [compiled.search(item) for item in items] == _own(expression, items)


@pytest.mark.parametrize("expression", TABLE_DEPENDENT)
def test_an_expression_that_rests_on_a_unicode_table_is_left_to_the_core(expression: str) -> None:
    assert expressions(expression) is None


def test_a_letter_newer_than_debians_re2_is_a_letter_as_google_re2_says() -> None:
    """U+2EBF0 (CJK Extension I, Unicode 15.1) is a letter to google-re2's RE2 of 2025 and not
    to Debian's of 2022: a condition made with the service's engine decides as the core's."""
    from flagsight_core.conditions import use_expressions

    new_letter = "\U0002ebf0"
    assert _own(r"\pL", [new_letter]) == [True]
    use_expressions(expressions)
    try:
        assert _own(r"\pL", [new_letter]) == [True]
        assert _own(r"^\p{L}$", [new_letter, "a", "1"]) == [True, True, False]
    finally:
        use_expressions(None)


def test_a_string_that_is_not_unicode_is_searched_as_the_core_searches_it() -> None:
    """A lone surrogate has no UTF-8 form; the core matches its surrogatepass bytes, and so
    does the native search."""
    items = ["ok@example.com", "\ud800@example.com", "\udfff", "a\ud83d"]
    for expression in ("@example", "^.@", "\\C", "^a.$", "."):
        assert column_search(items, expression).tolist() == _own(expression, items), expression


def test_an_expression_re2_refuses_is_left_to_the_core() -> None:
    assert expressions("(unclosed") is None


def test_only_strings_are_searched() -> None:
    compiled = expressions("a")
    with pytest.raises(TypeError):
        compiled.search(b"a")
    with pytest.raises(TypeError):
        compiled.search_column(["a", 1])


def test_the_answer_can_be_combined_in_place() -> None:
    """The core combines a column's answers with others; the array must be its own."""
    found = column_search(["a", "b"], "a")
    assert found is not None
    found &= [True, True]
    assert found.tolist() == [True, False]


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
