"""The control-plane store's errors, in the store's own terms: a code and the values it concerns.

An error says what went wrong as data: its ``code``, and in ``details`` the identifier the
caller gave, the store's field at fault (as the store's methods name it, e.g.
``monthly_evaluation_limit``) and any value the refusal depends on (a limit, a segment key).
It carries no sentence for people, no HTTP and no driver's exception: the admin API and the
dashboard word each code in one place (``api/web/admin/error_messages.py``), so the store can
change its checks without changing what callers read, and the words cannot drift apart
between the places that show them. ``str(error)`` is a plain line for logs.

The subclasses say how the caller should take it (the admin API maps them to 404, 409, 400
and 503); ``NotFoundError.resource`` and ``ConflictError.reason`` are the coarse kinds a
caller may branch on, the code the exact case.

A code is a string, a member of the ``StrEnum`` of the slice that raises it (``FlagCode`` in
``resources/flags.py``); a new slice brings its own. ``store.ErrorCode`` is every slice's
codes gathered from the composed store (a ``CodeCatalogue``): ``ErrorCode.FLAG_NOT_FOUND`` is
``FlagCode.FLAG_NOT_FOUND`` itself. The values never change: failed schedules keep them in the
database, and the admin API words them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

Detail = str | int | float | None
"""A value an error carries: JSON-plain, so a failure can be kept in the database as it is."""


class StoreCode(StrEnum):
    """The one code no slice owns: each slice of the store defines its own codes beside its
    SQL (``api.controlplane.resources``), and ``store.ErrorCode`` gathers them all."""

    # UnavailableError
    UNAVAILABLE = "unavailable"


class CodeCatalogue:
    """Every error code of a composed store, each slice's ``StrEnum`` members side by side:
    ``catalogue.FLAG_NOT_FOUND`` is the very member the flags slice raises, and iterating
    gives each code once. Built from the slices' ``codes`` (``of``), so a slice that brings
    codes adds them here without this module knowing it; two slices may not share a name or a
    value (a code is kept in the database, and worded at the edge, by its value)."""

    def __init__(self, *enums: type[StrEnum]):
        self._by_name: dict[str, StrEnum] = {}
        for enum in enums:
            for member in enum:
                if member.name in self._by_name or member in self._by_name.values():
                    raise ValueError(f"error code {member.name} ({member}) defined twice")
                self._by_name[member.name] = member

    @classmethod
    def of(cls, store: type) -> CodeCatalogue:
        """``StoreCode`` and the ``codes`` of every class ``store`` is composed of, in its
        method resolution order."""
        found = [vars(klass)["codes"] for klass in store.__mro__ if "codes" in vars(klass)]
        return cls(StoreCode, *found)

    def __getattr__(self, name: str) -> StrEnum:
        try:
            return self.__dict__["_by_name"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __iter__(self) -> Iterator[StrEnum]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, code: object) -> bool:
        return code in self._by_name.values()


class Resource(StrEnum):
    """The kinds of record the store's slices address (``NotFoundError.resource``); a new
    slice may name its own kind (``resource`` is a string)."""

    ORGANIZATION = "organization"
    ENVIRONMENT = "environment"
    API_KEY = "api_key"
    SEGMENT = "segment"
    FLAG = "flag"
    SCHEDULE = "schedule"
    ROLLOUT = "rollout"
    WEBHOOK = "webhook"
    AUDIT_RECORD = "audit_record"


class ConflictReason(StrEnum):
    """Why a change was refused although every value in it is valid (``ConflictError``)."""

    KEY_TAKEN = "key_taken"
    """A key that must be unique within its organization is already used."""
    SEGMENT_IN_USE = "segment_in_use"
    """A segment still referenced by a flag's rule cannot be deleted."""
    NOT_RESTORABLE = "not_restorable"
    """The audit record's change cannot be undone: its kind has no restore, or the target has
    moved past it (a schedule applied since, or whose time has passed)."""
    NOTHING_TO_RESTORE = "nothing_to_restore"
    """Restoring would change nothing: the record's before-state is what there is now."""
    NO_PERCENTAGE_RULE = "no_percentage_rule"
    """A guarded rollout needs the flag to have a percentage rule to move."""
    METRIC_IN_USE = "metric_in_use"
    """A metric a guarded rollout guards on cannot be deleted, nor change its kind."""


class ControlPlaneError(Exception):
    """Base of the store's errors: ``code`` says which case, ``details`` its values."""

    def __init__(self, code: str, **details: Detail):
        super().__init__(code)
        self.code = code
        self.details: dict[str, Detail] = details

    def __str__(self) -> str:
        values = " ".join(f"{name}={value!r}" for name, value in self.details.items())
        return f"{self.code} {values}" if values else str(self.code)


class NotFoundError(ControlPlaneError):
    """The addressed record does not exist: ``resource`` names its kind and ``identifier`` the
    id or key the caller gave (for a flag, its key within the environment addressed)."""

    def __init__(self, code: str, resource: str, identifier: str, **details: Detail):
        super().__init__(code, identifier=identifier, **details)
        self.resource = resource
        self.identifier = identifier


class ConflictError(ControlPlaneError):
    """A key that must be unique is taken, or the change would break another record:
    ``reason`` says which, and ``field`` names the store's field at fault when there is one."""

    def __init__(
        self,
        code: str,
        reason: ConflictReason,
        field_name: str | None = None,
        **details: Detail,
    ):
        fields = {} if field_name is None else {"field": field_name}
        super().__init__(code, **fields, **details)
        self.reason = reason
        self.field = field_name


class InvalidError(ControlPlaneError):
    """A value is not acceptable; ``field`` names it as the store's method does."""

    def __init__(self, code: str, field_name: str, **details: Detail):
        super().__init__(code, field=field_name, **details)
        self.field = field_name


class UnavailableError(ControlPlaneError):
    """The database cannot be reached, or stayed busy too long: nothing was changed, and the
    same call can be retried. Evaluation goes on from each worker's last snapshot.

    ``str()`` is the driver's reason (``cause``), for operators: logs and ``/readyz`` show it.
    """

    def __init__(self, cause: str):
        super().__init__(StoreCode.UNAVAILABLE, cause=cause)
        self.cause = cause

    def __str__(self) -> str:
        return self.cause


@dataclass(frozen=True, slots=True)
class RecordedError:
    """An error kept in a record after it was raised (a schedule that could not be applied
    keeps why): its code and details, worded where it is shown, as the error would be."""

    code: str
    details: Mapping[str, Detail]

    @classmethod
    def of(cls, error: ControlPlaneError) -> RecordedError:
        return cls(error.code, dict(error.details))
