"""Dashboard forms that used to make 500 (issue 12): too many fields before any session, a
monthly limit that is a Unicode digit or 5,000 digits long, a ``next`` holding CR/LF. Each is a
400 or the form shown again with its message."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from api.dashboard.forms import MAX_FORM_FIELDS
from tests.conftest import ADMIN_TOKEN
from tests.dashboard.conftest import FORM, DashClient


def test_a_sign_in_with_too_many_fields_is_400_without_a_session(visitor: DashClient) -> None:
    visitor.get("/dashboard/sign-in")
    body = "&".join(f"f{i}=x" for i in range(MAX_FORM_FIELDS + 1))
    answer = visitor.client.simulate_post(
        "/dashboard/sign-in", body=body, headers={"Content-Type": FORM}
    )
    assert answer.status_code == 400, answer.text[:300]
    assert f"more than {MAX_FORM_FIELDS} fields" in answer.text


@pytest.mark.parametrize("limit", ["²", "٣٤", "9" * 5000, "1" + "0" * 30])
def test_a_monthly_limit_that_is_not_a_plain_number_is_shown_again(
    person: DashClient, limit: str
) -> None:
    answer = person.post(
        "/dashboard/organizations", {"name": "Acme", "plan": "enterprise", "monthly_limit": limit}
    )
    assert answer.status_code == 400, answer.text[:300]
    assert 'id="org-limit"' in answer.text  # the form again, with the message by the field
    assert "Enter a whole number" in answer.text or "from 1 to" in answer.text


@pytest.mark.parametrize(
    "target", ["/dashboard/organizations\r\nSet-Cookie: x=1", "/dashboard/x\nLocation: //evil"]
)
def test_a_next_holding_cr_or_lf_goes_to_the_dashboard_home(
    visitor: DashClient, person: DashClient, target: str
) -> None:
    page = visitor.get(f"/dashboard/sign-in?next={quote(target, safe='')}")
    assert page.status_code == 200 and "\r" not in page.text.split("next", 1)[-1][:200]
    answer = visitor.post("/dashboard/sign-in", {"admin_token": "wrong", "next": target})
    assert answer.status_code == 401
    signed = visitor.post("/dashboard/sign-in", {"admin_token": ADMIN_TOKEN, "next": target})
    assert signed.status_code == 303, signed.text[:300]
    assert signed.headers["Location"].endswith("/dashboard/organizations")
    assert "x" not in signed.cookies
    again = person.get(f"/dashboard/sign-in?next={quote(target, safe='')}")
    assert again.status_code == 303
    assert again.headers["Location"].endswith("/dashboard/organizations")


@pytest.mark.parametrize("issued", ["²", "9" * 5000, "١٢٣"])
def test_a_sign_in_cookie_whose_time_is_not_plain_digits_is_refused_not_a_500(issued: str) -> None:
    from api.dashboard.sessions import SessionSigner

    signer = SessionSigner(b"k" * 32, lambda: None, lambda: 1_000.0)
    nonce = f"{issued}.abc"
    assert signer.check_signin_csrf(nonce, signer.signin_csrf_token(nonce)) is False
    fresh = signer.new_signin_nonce()  # a well-formed fresh cookie still passes
    assert signer.check_signin_csrf(fresh, signer.signin_csrf_token(fresh)) is True


@pytest.mark.parametrize("op", ["remove:²", "up:" + "9" * 5000, "down:١"])
def test_a_rule_editor_op_whose_index_is_not_plain_digits_is_not_an_op(op: str) -> None:
    from api.dashboard.rule_editor import RuleRow, apply_op

    assert apply_op([RuleRow(type="STATIC")], op) is None
