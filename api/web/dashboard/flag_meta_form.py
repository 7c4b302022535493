"""The flag editor's lifecycle fields (contract section 14): kind, owner and expiry.

They are checked by the admin API's own validation (``flags.flag_meta``), so the editor
accepts exactly what a ``PUT`` of the flag accepts and refuses the rest with the API's words,
each next to its field. The expiry is a ``datetime-local`` input read as UTC (the page says
so): the browser sends ``YYYY-MM-DDTHH:MM`` without an offset, and a ``Z`` is added before the
API's check.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from api.controlplane.model import FlagMeta
from api.web.admin.flags import flag_meta
from api.web.dashboard.forms import Form
from api.web.errors import BadRequest

KIND = "kind"
OWNER = "owner"
EXPIRES_AT = "expires_at"

BODY_NAMES = {KIND: "kind", OWNER: "owner", EXPIRES_AT: "expiresAt"}
"""Each form field and the ``PUT`` body's field it stands for."""


def _moment(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def as_utc_text(value: str) -> str:
    """The form's expiry as the API takes it: a ``Z`` added unless it gives its offset."""
    moment = _moment(value)
    return value if moment is not None and moment.tzinfo is not None else value + "Z"


def input_value(expires_at: str | None) -> str:
    """A stored expiry (``2030-01-31T09:30:00.000Z``) as a ``datetime-local`` value in UTC,
    as precise as it is (``2030-01-31T09:30``, or with its seconds and milliseconds)."""
    moment = _moment(expires_at.replace("Z", "+00:00")) if expires_at else None
    if moment is None:
        return expires_at or ""
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    return moment.strftime("%Y-%m-%dT%H:%M:%S" if moment.second else "%Y-%m-%dT%H:%M")


@dataclass(frozen=True)
class MetaDraft:
    """The three fields as the form holds them."""

    kind: str
    owner: str
    expires_at: str

    @classmethod
    def of(cls, meta: FlagMeta) -> MetaDraft:
        return cls(str(meta.kind), meta.owner or "", input_value(meta.expires_at))

    @classmethod
    def from_form(cls, form: Form, current: MetaDraft) -> MetaDraft:
        """The posted fields; one the form does not carry keeps ``current``'s value."""
        return cls(
            form.get(KIND, current.kind),
            form.get(OWNER, current.owner),
            form.get(EXPIRES_AT, current.expires_at).strip(),
        )

    @property
    def step(self) -> str:
        """The input's ``step``: seconds or milliseconds only when the value has them (a
        minute's step would make the browser refuse a value with seconds)."""
        length = len(self.expires_at)  # YYYY-MM-DDTHH:MM is 16, with :SS 19
        return "0.001" if length > 19 else "1" if length == 19 else "60"

    def body(self) -> dict[str, Any]:
        """What a ``PUT`` would carry: an empty owner or expiry is none."""
        return {
            "kind": self.kind,
            "owner": self.owner.strip() or None,
            "expiresAt": as_utc_text(self.expires_at) if self.expires_at else None,
        }


def checked(draft: MetaDraft) -> tuple[FlagMeta | None, dict[str, str]]:
    """The ``FlagMeta`` to save, or None and the API's message for each field it refuses."""
    body = draft.body()
    errors: dict[str, str] = {}
    for field, name in BODY_NAMES.items():
        try:
            flag_meta({name: body[name]})  # one field at a time: each gets its own message
        except BadRequest as refused:
            errors[field] = str(refused.description)
    return (None, errors) if errors else (flag_meta(body), {})
