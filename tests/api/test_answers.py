"""The bulk answer's encoding: pieces joined in one pass, identical to encoding each entry."""

from __future__ import annotations

import msgspec
from flagsight_core import RESULTS
from flagsight_core.ids import bulk_ids
from hypothesis import given
from hypothesis import strategies as st

from api.serving.answers import encode_bulk_response, response_object

PREFIX = "AQAAAAAAAAChAAAAAAAAAAEAAb0pOmV1Ym9r5e1xUQ"

_identifiers = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
    max_size=60,
    unique=True,
)


@given(_identifiers, st.data())
def test_bulk_answer_decodes_to_each_users_response(users, data) -> None:
    codes = bytes(data.draw(st.lists(st.integers(0, len(RESULTS) - 1), min_size=len(users),
                                     max_size=len(users))))  # fmt: skip
    answer = msgspec.json.decode(encode_bulk_response(users, codes, PREFIX))
    ids = bulk_ids(PREFIX, len(users))
    assert list(answer) == users
    assert answer == {
        user: response_object(RESULTS[code], evaluation_id)
        for user, code, evaluation_id in zip(users, codes, ids, strict=True)
    }


def test_plain_and_escaped_identifiers_give_the_same_bytes_as_msgspec() -> None:
    """Both encodings (one join for plain identifiers, msgspec per entry otherwise) produce
    exactly what encoding the whole map with msgspec would."""
    for users in (["a", "b-2", "ünï ☃"], ['q"uote', "back\\slash", "ctl\x01", "plain"]):
        codes = bytes(range(len(users)))
        expected = msgspec.json.encode(
            {
                user: response_object(RESULTS[code], evaluation_id)
                for user, code, evaluation_id in zip(
                    users, codes, bulk_ids(PREFIX, len(users)), strict=True
                )
            }
        )
        assert encode_bulk_response(users, codes, PREFIX) == expected


def test_empty_bulk_answer() -> None:
    assert encode_bulk_response([], b"", PREFIX) == b"{}"
