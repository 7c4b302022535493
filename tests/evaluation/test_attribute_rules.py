"""What a user's attributes may be (contract 12: ``flagsight_core.attribute_rules``), as the
service's 400s and the SDK's local mode both ask it."""

from __future__ import annotations

from flagsight_core import attribute_rules
from hypothesis import given
from hypothesis import strategies as st


@given(
    st.dictionaries(
        st.sampled_from(["plan", "seats", "tags", "userIdentifier", "bad name", "é"]),
        st.one_of(
            st.text(max_size=3),
            st.text(min_size=1_025, max_size=1_026),
            st.booleans(),
            st.integers(),
            st.sampled_from([2**1024 - 2**970, 2**1024 - 2**970 - 1, -(2**1100)]),
            st.floats(),
            st.none(),
            st.lists(st.one_of(st.text(max_size=2), st.integers()), max_size=3),
            st.tuples(st.text(max_size=2)),
            st.lists(st.just("a"), min_size=100, max_size=101),
            st.dictionaries(st.text(max_size=1), st.integers(), max_size=1),
        ),
        max_size=4,
    )
)
def test_the_fast_check_of_attributes_agrees_with_their_words(attributes: dict) -> None:
    """``attributes_problem`` answers valid attributes from one pass over their values; what
    it takes is exactly what the full check, which words each refusal, finds nothing wrong in."""
    fast = attribute_rules._taken(attributes)
    words = attribute_rules._first_problem(attributes, "attributes")
    assert fast is (words is None)
    assert attribute_rules.attributes_problem(attributes) == words
