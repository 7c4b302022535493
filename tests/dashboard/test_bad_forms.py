"""Dashboard forms that used to make 500 (issue 12): too many fields before any session, a
monthly limit that is a Unicode digit or 5,000 digits long, a ``next`` holding CR/LF. Each is a
400 or the form shown again with its message. A form that cannot be read at all is refused
with the contract's JSON error body, or as a page when a browser asks for HTML."""

from __future__ import annotations

import dataclasses
from urllib.parse import quote

import pytest

from api.serving.services import Services
from api.web.dashboard.forms import MAX_FORM_FIELDS
from tests.conftest import ADMIN_TOKEN
from tests.dashboard.conftest import BROWSER_ACCEPT, FORM, DashClient

FORM_LIMIT = 65_536

UNREADABLE_FORMS = {
    "too large": (
        b"name=" + b"x" * FORM_LIMIT,
        413,
        "Payload Too Large",
        f"larger than {FORM_LIMIT}",
    ),
    "not UTF-8": (b"name=%ff&key=\xff\xfe", 400, "Bad Request", "not valid UTF-8"),
    "too many fields": (
        "&".join(f"f{i}=x" for i in range(MAX_FORM_FIELDS + 1)).encode(),
        400,
        "Bad Request",
        f"more than {MAX_FORM_FIELDS} fields",
    ),
}


@pytest.fixture
def small_forms(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forms over 64 KiB are too large, so that a test need not post 64 MiB."""
    limits = dataclasses.replace(services.settings.body_limits, admin=FORM_LIMIT)
    monkeypatch.setattr(
        services, "settings", dataclasses.replace(services.settings, body_limits=limits)
    )


def _post_raw(person: DashClient, body: bytes, accept: str | None):  # noqa: ANN202
    headers = {
        "Content-Type": FORM,
        "Cookie": "; ".join(f"{k}={v}" for k, v in person.cookies.items()),
    }
    if accept is not None:
        headers["Accept"] = accept
    return person.client.simulate_post("/dashboard/organizations", body=body, headers=headers)


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
@pytest.mark.parametrize("case", list(UNREADABLE_FORMS))
def test_an_unreadable_form_from_a_program_gets_the_contract_body(
    person: DashClient, small_forms: None, services: Services, case: str, accept: str | None
) -> None:
    body, status, phrase, words = UNREADABLE_FORMS[case]
    before = services.store.config_version()
    answer = _post_raw(person, body, accept)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert (answer.json["status"], answer.json["error"]) == (status, phrase)
    assert words in answer.json["message"]
    assert services.store.config_version() == before


@pytest.mark.parametrize("case", list(UNREADABLE_FORMS))
def test_an_unreadable_form_from_a_browser_is_a_page(
    person: DashClient, small_forms: None, case: str
) -> None:
    body, status, _, words = UNREADABLE_FORMS[case]
    answer = _post_raw(person, body, BROWSER_ACCEPT)
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("text/html")
    assert "The form was not accepted" in answer.text and words in answer.text


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
    from api.web.dashboard.sessions import SessionSigner

    signer = SessionSigner(b"k" * 32, lambda: None, lambda: 1_000.0)
    nonce = f"{issued}.abc"
    assert signer.check_signin_csrf(nonce, signer.signin_csrf_token(nonce)) is False
    fresh = signer.new_signin_nonce()  # a well-formed fresh cookie still passes
    assert signer.check_signin_csrf(fresh, signer.signin_csrf_token(fresh)) is True


@pytest.mark.parametrize("op", ["remove:²", "up:" + "9" * 5000, "down:١"])
def test_a_rule_editor_op_whose_index_is_not_plain_digits_is_not_an_op(op: str) -> None:
    from api.web.dashboard.rule_editor import RuleRow, apply_op

    assert apply_op([RuleRow(type="STATIC")], op) is None
