"""Attribute names are checked after the typed decoding (``attribute_rules.valid_names``),
against the names already seen: a name refused once is refused every time, a name past the
memo's size is still checked, and what the decoders refuse is what ``check_attributes`` names."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from flagsight_core import attribute_rules
from flagsight_core.attribute_rules import NAMES_REMEMBERED, valid_names, valid_names_by_user

from api.web.public.evaluate import decode_bulk, decode_evaluate


@pytest.fixture
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    memo: set[str] = set()
    monkeypatch.setattr(attribute_rules, "_valid_names", memo)
    yield memo


BAD = ["first name", "plan\n", "userIdentifier", "é", "a/b", ""]


@pytest.mark.parametrize("name", BAD)
def test_a_refused_name_is_refused_every_time_and_never_remembered(
    fresh_memo: set[str], name: str
) -> None:
    for _ in range(3):
        assert not valid_names({"plan": 1, name: 1})
        assert not valid_names_by_user({"a": {"plan": 1}, "b": {name: 1}})
    assert fresh_memo <= {"plan"}


def test_past_the_memo_names_are_still_checked(fresh_memo: set[str]) -> None:
    assert valid_names([f"n{i}" for i in range(NAMES_REMEMBERED + 10)])
    assert len(fresh_memo) == NAMES_REMEMBERED
    assert valid_names(["another.one_2-x"])
    assert "another.one_2-x" not in fresh_memo
    assert not valid_names(["another one"])


@pytest.mark.parametrize("name", BAD[:-1])
def test_the_decoders_refuse_a_bad_name(name: str) -> None:
    single = msgspec.json.encode(
        {"flagKey": "f", "userIdentifier": "u", "attributes": {"plan": "pro", name: "x"}}
    )
    bulk = msgspec.json.encode(
        {
            "flagKey": "f",
            "userIdentifiers": ["u", "v"],
            "attributes": {"u": {"plan": "pro"}, "v": {name: "x"}},
        }  # fmt: skip
    )
    with pytest.raises(msgspec.ValidationError):
        decode_evaluate(single)
    with pytest.raises(msgspec.ValidationError):
        decode_bulk(bulk)
    good = {"flagKey": "f", "userIdentifier": "u", "attributes": {"plan": "pro", "name.ok": "x"}}
    assert decode_evaluate(msgspec.json.encode(good)).attributes == good["attributes"]
