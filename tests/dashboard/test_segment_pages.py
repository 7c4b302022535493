"""The segment pages in process (contract 12): the form's conditions and lists round trip
through the store as the admin API's PUT writes them, a bad condition is refused on the form in
the admin API's words naming the field, excluded identifiers are saved, the counts are shown,
and a change made here is audited and restorable."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from typing import Any

import pytest

from api.serving.services import Services
from api.web.dashboard import segment_form
from tests.dashboard.conftest import DashClient
from tests.support.admin import Admin

CONDITIONS = [
    {"attribute": "country", "operator": "IN", "values": ["DE", "AT"]},
    {"attribute": "appVersion", "operator": "SEMVER_GREATER_THAN", "values": ["2.3.0"]},
    {"attribute": "age", "operator": "GREATER_OR_EQUAL", "values": [18, 21.5]},
    {"attribute": "beta", "operator": "EQUALS", "values": [True, "42", 7, "pro, plus"]},
    {"attribute": "email", "operator": "MATCHES", "values": ["@example\\.(com|de)$"]},
    {"attribute": "signedUp", "operator": "AFTER", "values": ["2025-06-01T00:00:00Z", 1700000000]},
    {"attribute": "plan", "operator": "EXISTS", "values": []},
]
ROWS = [
    ("country", "IN", "DE\nAT"),
    ("appVersion", "SEMVER_GREATER_THAN", "2.3.0"),
    ("age", "GREATER_OR_EQUAL", "18, 21.5"),
    ("beta", "EQUALS", 'true\n"42"\n7\npro, plus'),
    ("email", "MATCHES", "@example\\.(com|de)$"),
    ("signedUp", "AFTER", "2025-06-01T00:00:00Z, 1700000000"),
    ("plan", "EXISTS", ""),
]
"""``CONDITIONS`` as a person types them: a comma separates numbers and instants, not text."""


def rows(*typed: tuple[str, str, str]) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    for attribute, operator, values in typed:
        fields += [("condition_attribute", attribute), ("condition_operator", operator),
                   ("condition_values", values)]  # fmt: skip
    return fields


class FormFields(HTMLParser):
    """The fields a browser would post from the page's form whose action ends with ``action``:
    inputs, textareas and each select's chosen option, in document order."""

    def __init__(self, action: str):
        super().__init__()
        self.action, self.inside, self.fields = action, False, []
        self._textarea: str | None = None
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.inside = found.get("action", "").split("#")[0].endswith(self.action)
        elif not self.inside:
            return
        elif tag == "input" and found.get("type") not in ("file", "submit") and "name" in found:
            self.fields.append((found["name"], found.get("value", "")))
        elif tag == "textarea":
            self._textarea = found["name"]
            self.fields.append((found["name"], ""))
        elif tag == "select":
            self._select, self._options = found["name"], []
        elif tag == "option" and self._select:
            self._options.append((found["value"], "selected" in found))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            name, text = self.fields[-1]
            self.fields[-1] = (name, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea" and self._textarea is not None:
            name, text = self.fields[-1]  # a browser drops the newline after <textarea>
            self.fields[-1] = (name, text.removeprefix("\n"))
            self._textarea = None
        elif tag == "select" and self._select:
            chosen = [v for v, selected in self._options if selected] or [self._options[0][0]]
            self.fields.append((self._select, chosen[0]))
            self._select = None


def form_of(page_html: str, action: str) -> list[tuple[str, str]]:
    parser = FormFields(action)
    parser.feed(page_html)
    return [(name, value) for name, value in parser.fields if name != "csrf_token"]


def text_of(result: Any) -> str:
    return html.unescape(result.text)


@pytest.fixture
def org(dash_admin: Admin) -> str:
    return dash_admin.tenant().organization_id


def segments_url(org: str, key: str = "") -> str:
    return f"/dashboard/organizations/{org}/segments" + (f"/{key}" if key else "")


def stored(dash_admin: Admin, org: str, key: str) -> dict[str, Any]:
    return dash_admin.request("GET", f"/organizations/{org}/segments/{key}", expect=200)


def test_the_form_round_trips_conditions_lists_and_their_words(
    person: DashClient, dash_admin: Admin, org: str
) -> None:
    blank = ("", "EQUALS", "")  # a row left blank is left out
    fields = [("key", "eu-pro"), ("identifiers", "alice\nbob\n"), ("excluded", "carol"),
              *rows(*ROWS, blank)]  # fmt: skip
    answer = person.post(segments_url(org), fields)
    assert (answer.status_code, answer.headers["location"]) == (
        303, f"{segments_url(org)}?saved=eu-pro",
    )  # fmt: skip
    first = stored(dash_admin, org, "eu-pro")
    assert first["conditions"] == CONDITIONS
    assert (first["userIdentifiers"], first["excludedUserIdentifiers"]) == (["alice", "bob"],
                                                                            ["carol"])  # fmt: skip

    page = person.get(segments_url(org, "eu-pro"))
    shown = text_of(page)
    for words in ('country is one of "DE", "AT"', 'appVersion is a version above "2.3.0"',
                  "age is at least one of 18, 21.5", 'beta is one of true, "42", 7, "pro, plus"',
                  "plan is present"):  # fmt: skip
        assert f"<code>{words}</code>" in shown
    posted = form_of(page.text, segments_url(org, "eu-pro"))
    assert ("condition_values", 'true\n"42"\n7\npro, plus') in posted
    again = person.post(segments_url(org, "eu-pro"), posted)
    assert again.status_code == 303, again.text
    after = stored(dash_admin, org, "eu-pro")
    assert {**after, "updatedAt": first["updatedAt"]} == first


@pytest.mark.parametrize(
    ("typed", "body_conditions"),
    [
        (("age", "LESS_THAN", "ten"), [{"attribute": "age", "operator": "LESS_THAN",
                                        "values": ["ten"]}]),
        (("email", "MATCHES", "(unclosed"), [{"attribute": "email", "operator": "MATCHES",
                                              "values": ["(unclosed"]}]),
        (("appVersion", "SEMVER_LESS_THAN", "2.3"),
         [{"attribute": "appVersion", "operator": "SEMVER_LESS_THAN", "values": ["2.3"]}]),
        (("signedUp", "BEFORE", "2025-06-01"),
         [{"attribute": "signedUp", "operator": "BEFORE", "values": ["2025-06-01"]}]),
        (("plan", "EXISTS", "pro"), [{"attribute": "plan", "operator": "EXISTS",
                                      "values": ["pro"]}]),
        (("bad name", "EQUALS", "x"), [{"attribute": "bad name", "operator": "EQUALS",
                                        "values": ["x"]}]),
        (("plan", "LIKE", "pro"), [{"attribute": "plan", "operator": "LIKE", "values": ["pro"]}]),
    ],
)  # fmt: skip
def test_a_bad_condition_is_refused_on_the_form_in_the_apis_words(
    person: DashClient, dash_admin: Admin, org: str, typed: tuple[str, str, str],
    body_conditions: list[dict[str, Any]],
) -> None:  # fmt: skip
    good = ("country", "IN", "DE")
    api = dash_admin.request(
        "PUT", f"/organizations/{org}/segments/api-twin",
        {"userIdentifiers": ["alice"], "conditions": [good_json(), *body_conditions]}, expect=400,
    )  # fmt: skip
    assert api["message"].startswith("Field 'conditions[1]")
    fields = [("key", "refused"), ("identifiers", "alice"), *rows(good, typed)]
    answer = person.post(segments_url(org), fields)
    assert answer.status_code == 400
    shown = text_of(answer)
    assert f"Not saved.</strong> {api['message']}" in shown
    assert 'id="condition-2-error"' in answer.text  # next to the row it names
    assert 'id="condition-2-attribute" name="condition_attribute" value="' in answer.text
    assert html.escape(typed[0]) in answer.text  # what was typed is kept
    missing = dash_admin.request("GET", f"/organizations/{org}/segments/refused", expect=404)
    assert missing["status"] == 404


def good_json() -> dict[str, Any]:
    return {"attribute": "country", "operator": "IN", "values": ["DE"]}


def test_a_segment_edited_on_its_page_keeps_its_exclusions_and_shows_its_counts(
    person: DashClient, dash_admin: Admin, org: str, services: Services
) -> None:
    dash_admin.segment(org, "beta", ["alice", "bob", "dave"])
    page = person.get(segments_url(org, "beta"))
    assert "<strong>3</strong> members listed, <strong>0</strong> excluded." in page.text
    assert "No conditions: only the members listed are in." in page.text
    posted = dict(form_of(page.text, segments_url(org, "beta")))
    assert posted["identifiers"] == "alice\nbob\ndave"
    fields = [("identifiers", posted["identifiers"]), ("excluded", " erin \n\nfrank\nerin"),
              *rows(("plan", "EQUALS", "pro"))]  # fmt: skip
    answer = person.post(segments_url(org, "beta"), fields)
    assert answer.headers["location"] == f"{segments_url(org, 'beta')}?saved=1#edit-segment"
    assert services.store.segment_excluded(org, "beta") == ["erin", "frank"]
    page = person.get(segments_url(org, "beta") + "?saved=1")
    assert "<strong>3</strong> members listed, <strong>2</strong> excluded." in page.text
    assert "Segment <code>beta</code> saved." in page.text
    assert "<code>plan is &#34;pro&#34;</code>" in page.text
    assert "erin\nfrank</textarea>" in page.text

    listed = text_of(person.get(segments_url(org)))
    row = row_of(listed, "beta")
    assert '<td class="num" data-label="Members">3</td>' in row
    assert "1 condition<span" in row and "2 excluded identifiers" in row
    assert "with this list, and its 1 condition and 2 excluded identifiers with this form's?" in row


def row_of(listed: str, key: str) -> str:
    """The list's table row of one segment."""
    return listed.split(f'data-segment="{key}"', 1)[1].split("</tr>")[0]


def test_the_list_says_which_segments_have_conditions(
    person: DashClient, dash_admin: Admin, org: str
) -> None:
    dash_admin.segment(org, "plain", ["alice"])
    dash_admin.request("PUT", f"/organizations/{org}/segments/by-country",
                       {"conditions": [good_json(), good_json()]}, expect=200)  # fmt: skip
    listed = person.get(segments_url(org)).text
    plain, by_country = row_of(listed, "plain"), row_of(listed, "by-country")
    assert 'data-label="Members">1</td>' in plain and 'data-label="Conditions">None' in plain
    assert 'data-label="Members">0</td>' in by_country
    assert 'data-label="Conditions">2 conditions' in by_country


def test_a_form_without_members_or_conditions_is_refused(
    person: DashClient, dash_admin: Admin, org: str
) -> None:
    answer = person.post(segments_url(org), [("key", "nobody"), ("identifiers", "\n  \n")])
    assert answer.status_code == 400
    assert segment_form.NOBODY in text_of(answer)
    by_conditions = person.post(segments_url(org), [("key", "somebody"), *rows(("plan", "EXISTS",
                                                                                 ""))])  # fmt: skip
    assert by_conditions.status_code == 303
    assert stored(dash_admin, org, "somebody")["conditions"] == [
        {"attribute": "plan", "operator": "EXISTS", "values": []}
    ]


def test_bad_excluded_identifiers_are_named_by_line(person: DashClient, org: str) -> None:
    fields = [("key", "long"), ("identifiers", "alice"), ("excluded", "ok\n" + "x" * 1025)]
    answer = person.post(segments_url(org), fields)
    assert answer.status_code == 400
    assert "Line 2 of the list of excluded identifiers is longer than 1024 characters." in (
        text_of(answer)
    )


def test_a_list_too_long_for_the_page_is_kept_unless_replaced(
    person: DashClient, dash_admin: Admin, org: str, services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(segment_form, "EDITABLE_MAX", 3)
    dash_admin.request("PUT", f"/organizations/{org}/segments/big", {
        "userIdentifiers": [f"u{n}" for n in range(5)],
        "excludedUserIdentifiers": [f"x{n}" for n in range(4)]}, expect=200)  # fmt: skip
    page = person.get(segments_url(org, "big"))
    posted = form_of(page.text, segments_url(org, "big"))
    assert ("keep_members", "yes") in posted and ("identifiers", "") in posted
    assert "The 5 members are kept" in page.text and "The 4 excluded identifiers are kept" in (
        page.text
    )
    lists = [(n, v) for n, v in posted if not n.startswith("condition_")]
    posted = [*lists, *rows(("country", "EQUALS", "DE"))]
    assert person.post(segments_url(org, "big"), posted).status_code == 303
    after = stored(dash_admin, org, "big")
    assert after["userIdentifiers"] == [f"u{n}" for n in range(5)]
    assert after["excludedUserIdentifiers"] == [f"x{n}" for n in range(4)]
    assert after["conditions"] == [{"attribute": "country", "operator": "EQUALS",
                                    "values": ["DE"]}]  # fmt: skip
    replaced = [(n, "only-one" if n == "identifiers" else v) for n, v in posted]
    assert person.post(segments_url(org, "big"), replaced).status_code == 303
    assert services.store.segment_members(org, "big") == ["only-one"]


def test_a_change_made_here_is_audited_and_restorable(
    person: DashClient, dash_admin: Admin, org: str
) -> None:
    person.post(segments_url(org), [("key", "eu"), ("identifiers", "alice"), ("excluded", "bob"),
                                    *rows(("country", "IN", "DE\nAT"))])  # fmt: skip
    first = stored(dash_admin, org, "eu")
    person.post(segments_url(org, "eu"), [("identifiers", "dave")])
    change = dash_admin.request("GET", f"/organizations/{org}/audit", expect=200)["items"][0]
    assert (change["action"], change["actor"], change["after"]["conditions"]) == (
        "segment.put", "dashboard", [],
    )  # fmt: skip
    dash_admin.request("POST", f"/audit/{change['id']}/restore", expect=201)
    restored = stored(dash_admin, org, "eu")
    assert {**restored, "updatedAt": first["updatedAt"]} == first
