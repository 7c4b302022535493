"""Columnar evaluation batches: sealed into exactly the rows of their expanded events."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from flagsight_core.ids import EvaluationIdIssuer
from flagsight_core.model import OUTCOMES

from api.eventlog.frames import (
    EVALUATION_BATCH_CODE,
    InvalidFrame,
    decode_payload,
    encode_frame,
    iter_payloads,
)
from api.eventlog.schema import EvaluationBatch
from tests.eventlog.support import LAST_US_OF_DAY, query


def batch(users: list[str], outcomes: bytes) -> EvaluationBatch:
    prefix = EvaluationIdIssuer(b"k" * 32).issue_prefix("env_0123456789abcdef", len(users))
    return EvaluationBatch(
        prefix,
        LAST_US_OF_DAY,
        "org_1",
        "env_0123456789abcdef",
        "flag.a",
        None,
        "key_1",
        "v1-bulk",
        users,
        outcomes,
        bytes(i % 4 for i in range(len(users))),
        2,
        30.0,
    )


def test_a_batch_seals_to_one_row_per_user(make_log, dirs: tuple[Path, Path]) -> None:
    _, events = dirs
    users = [f"üser-{i}" for i in range(len(OUTCOMES) * 3)]
    sent = batch(users, bytes(i % len(OUTCOMES) for i in range(len(users))))
    log = make_log()
    log.append_evaluation_batch(sent)
    log.close()
    rows = query(
        f"SELECT evaluation_id, user_identifier, value, matched_rule_type, error_type, flag_key, sdk, source "
        f"FROM read_parquet('{events}/event_type=evaluation/*/*.parquet') ORDER BY evaluation_id"
    ).to_pylist()
    expected = [
        {
            "evaluation_id": e.evaluation_id,
            "user_identifier": e.user_identifier,
            "value": e.value,
            "matched_rule_type": e.matched_rule_type,
            "error_type": e.error_type,
            "flag_key": "flag.a",
            "sdk": None,
            "source": "v1-bulk",
        }
        for e in sorted(sent.events(), key=lambda e: e.evaluation_id)
    ]
    assert rows == expected
    assert {r["evaluation_id"][:42] for r in rows} == {sent.evaluation_id_prefix}


def test_batch_ids_verify_as_issued_for_their_environment() -> None:
    issuer = EvaluationIdIssuer(b"k" * 32)
    sent = batch(["a", "b", "c"], bytes([1, 5, 7]))
    ids = [e.evaluation_id for e in sent.events()]
    assert [issuer.verify(i).environment_id for i in ids] == ["env_0123456789abcdef"] * 3


@pytest.mark.parametrize(
    "outcomes", [bytes([1, 2]), bytes([1, 2, 3, 4]), bytes([1, 2, len(OUTCOMES)])]
)
def test_a_batch_whose_outcomes_do_not_fit_is_an_invalid_frame(outcomes: bytes) -> None:
    frame = encode_frame(EVALUATION_BATCH_CODE, batch(["a", "b", "c"], outcomes))
    (payload,) = list(iter_payloads(io.BytesIO(bytes(frame))))
    with pytest.raises(InvalidFrame):
        decode_payload(payload)
