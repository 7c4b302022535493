"""The metric form (contract 13): a key, a name, the tracked event it reads, its kind, its
window after a user's first exposure, and which direction is better.

The admin API's body type checks what the form stands for (``MetricPut``), so the form refuses
exactly what ``PUT .../metrics/{metricKey}`` refuses, in the API's words, shown next to the
field they name; the store's own refusals (a key or event off the pattern) are worded by
``error_messages`` and placed by the field they name too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flagsight_core.contract import KEY_IN_WORDS, KEY_PATTERN

from api.controlplane.errors import ControlPlaneError
from api.controlplane.model import Better, Metric, MetricKind
from api.web.admin.bodies import convert
from api.web.admin.error_messages import message
from api.web.admin.metrics import MetricPut
from api.web.dashboard.forms import Form
from api.web.errors import BadRequest

KEY, NAME, EVENT, KIND, WINDOW_HOURS, BETTER = (
    "key", "name", "event", "kind", "window_hours", "better",
)  # fmt: skip
BODY_NAMES = {NAME: "name", EVENT: "event", KIND: "kind", WINDOW_HOURS: "windowHours",
              BETTER: "better"}  # fmt: skip
"""Each form field and the ``PUT`` body's field it stands for."""
STORE_NAMES = {"key": KEY, "event": EVENT, "window_hours": WINDOW_HOURS, "name": NAME}
"""The store's field names (``InvalidError.field``) and the form's."""
_NAMED = re.compile(r"Field '(\w+)")

KIND_CHOICES = (
    (MetricKind.CONVERSION, "Conversion: whether the user has the event (% of users)"),
    (MetricKind.COUNT, "Count: how many events the user has"),
    (MetricKind.SUM, "Sum: the sum of the events' values per user"),
    (MetricKind.MEAN, "Mean: the events' values per event (sum over count)"),
)
"""Each kind and what it makes of a user's events, in the contract's order."""
BETTER_CHOICES = ((Better.HIGHER, "Higher is better"), (Better.LOWER, "Lower is better"))
DEFAULT_WINDOW_HOURS = "72"
"""The contract's example window: three days after a user's first exposure."""


@dataclass(frozen=True)
class MetricDraft:
    """The form as the person filled it in (every field as typed)."""

    key: str = ""
    name: str = ""
    event: str = ""
    kind: str = str(MetricKind.CONVERSION)
    window_hours: str = DEFAULT_WINDOW_HOURS
    better: str = str(Better.HIGHER)

    @classmethod
    def from_form(cls, form: Form, key: str | None = None) -> MetricDraft:
        """The draft posted; ``key`` when the page names the metric (its edit form)."""
        return cls(
            key if key is not None else form.get(KEY).strip(),
            form.get(NAME), form.get(EVENT).strip(), form.get(KIND),
            form.get(WINDOW_HOURS).strip(), form.get(BETTER),
        )  # fmt: skip

    @classmethod
    def of(cls, metric: Metric) -> MetricDraft:
        """The edit form of a stored metric."""
        return cls(metric.key, metric.name, metric.event, str(metric.kind),
                   str(metric.window_hours), str(metric.better))  # fmt: skip


@dataclass(frozen=True)
class MetricChange:
    """What saving the form writes (the store's ``put_metric`` arguments)."""

    name: str
    event: str
    kind: MetricKind
    window_hours: int
    better: Better

    def arguments(self) -> dict[str, Any]:
        return {"name": self.name, "event": self.event, "kind": self.kind,
                "window_hours": self.window_hours, "better": self.better}  # fmt: skip


def _whole_number(text: str) -> object:
    """Digits as an integer; anything else as typed, for the API's check to word."""
    return int(text) if text.isascii() and text.isdigit() else text


def checked(draft: MetricDraft) -> tuple[MetricChange | None, dict[str, str]]:
    """The change the form stands for, or None and the API's words on the field they name."""
    errors: dict[str, str] = {}
    if not KEY_PATTERN.fullmatch(draft.key):
        errors[KEY] = f"Use {KEY_IN_WORDS}."
    plain = {body: getattr(draft, field) for field, body in BODY_NAMES.items()}
    plain["name"] = draft.name.strip()
    plain["windowHours"] = _whole_number(draft.window_hours)
    try:
        body = convert(MetricPut, plain)
    except BadRequest as refused:
        said = str(refused.description)
        named = _NAMED.match(said)
        field_name = next((f for f, b in BODY_NAMES.items() if named and named[1] == b), NAME)
        errors.setdefault(field_name, said)
    if errors:
        return None, errors
    return MetricChange(
        body.name, body.event, MetricKind(body.kind), body.windowHours, Better(body.better)
    ), {}


def refusal(exc: ControlPlaneError) -> dict[str, str]:
    """The store's refusal of a metric, by the form field it names (else the name's)."""
    field_name = STORE_NAMES.get(str(exc.details.get("field") or ""), "")
    return {field_name or "problem": message(exc)}
