"""Request bodies declared once, as ``msgspec.Struct``s: decoded, checked, and refused in the
admin API's words.

A body type (a ``Body``) declares each field's type and constraints with ``msgspec.Meta``
(lengths, patterns, ranges, descriptions); ``msgspec`` decides what is valid, and the OpenAPI
document is generated from the same declaration (``api/web/openapi/admin.py``), so the two
cannot drift apart. What a JSON Schema cannot state (steps that rise to 100, a webhook URL's
host, a rule of the registry) is a ``Body.checks`` entry, run on its field as soon as that field
has decoded, in the order the fields are declared: the message names the first field that is
wrong, as the admin API always has. A field whose rules another surface words too is checked
by that surface's validator first (``Body.prechecks``), so both say the same.

A refusal is worded from the field's declaration, not from ``msgspec``'s text: ``Field 'name'
is required``, ``must be a string``, ``must be 1 to 200 characters long``, ``must be one of
free, pro``, ``must match [A-Za-z0-9._-]{1,128}``, ``has 101 items; at most 100 are allowed``,
``must be a number above 0 and at most 10080``. A field whose words differ says them itself:
``Meta(extra=words(type="Field '{label}' must be a string or null"))``.

JSON's own rules hold: ``12073.0`` is the integer 12073 wherever an integer is declared (JSON
Schema agrees), ``null`` is an absent optional field, ``true`` is no number, unknown fields are
ignored unless the body type forbids them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_type_hints

import msgspec
import msgspec.inspect as mi
from flagsight_core.contract import KEY_MAX, KEY_SCHEMA_PATTERN, MAX_NAME_LENGTH
from msgspec import Meta

from api.web.errors import BadRequest
from api.web.jsonio import decode_json_overflowing

B = TypeVar("B", bound="Body")
_ABSENT = object()
FIELD = "Field"
QUERY_PARAMETER = "Query parameter"
FACETS = ("required", "type", "short", "long", "pattern", "range", "unknown")
"""What can be wrong with a value: absent (or null) though required, of another type, shorter
or longer than allowed (a string's characters, an array's items), not matching its pattern,
out of its range, an object's field that the type does not have."""


@dataclass(frozen=True)
class Place:
    """Where a check runs: the body's fields decoded so far (each at its default when absent),
    the prefix of its fields' names (``flag.`` inside a schedule), the enclosing body, and what
    the caller said of the request (``allow_private`` for a webhook's URL)."""

    prefix: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    parent: Place | None = None

    def label(self, name: str) -> str:
        """A field's name as messages write it: ``flag.rules``."""
        return self.prefix + name


Check = Callable[[Any, Place], None]
"""A field's check beyond its type: raises ``BadRequest`` (naming ``place.label(...)``)."""


class Body(msgspec.Struct, kw_only=True):
    """Base of the admin API's request bodies and query strings; the fields are declared in
    the order they are checked."""

    checks: ClassVar[Mapping[str, Check]] = {}
    """Field name -> what its value must satisfy beyond its declared type."""
    prechecks: ClassVar[Mapping[str, Check]] = {}
    """Field name -> a check of its plain JSON value before it is converted: a field whose
    rules another surface words too (contract 12's attributes, ``api.web.attributes``) is
    refused in those words; its declared type still states the rules (the document's)."""
    schema_extra: ClassVar[Mapping[str, Any]] = {}
    """What the OpenAPI schema adds to the generated one: rules between fields that the store
    enforces (the plan and the limit), written in JSON Schema next to the fields."""

    @staticmethod
    def unknown_field(name: str, place: Place) -> str:
        """The message for a field the body does not have (with ``forbid_unknown_fields``)."""
        if not place.prefix:
            return f"The body has no field '{name}'"
        return f"Field '{place.prefix.rstrip('.')}' has no field '{name}'"


def words(*, every: str | None = None, **facets: str) -> dict[str, Any]:
    """``Meta(extra=words(...))``: this value's messages, by ``FACETS`` (``every``: all but
    ``required``). Each is a template: ``{label}`` is the field's name as the API writes it
    (``steps[1]``), ``{what}`` ``Field`` or ``Query parameter``."""
    unknown = set(facets) - set(FACETS)
    if unknown:
        raise TypeError(f"no such facet: {', '.join(sorted(unknown))}")
    return {"words": {**({"every": every} if every else {}), **facets}}


# -- field types several slices declare -----------------------------------------------------


_ORDERS: dict[frozenset[Any], tuple[Any, ...]] = {}


def one_of(values: Iterable[str]) -> Any:
    """A string that is one of ``values`` (an enum's), as a ``Literal`` type: the document
    lists them where the field is (``{"enum": [...]}``), a refusal names them all, both in the
    order given (``msgspec`` sorts a ``Literal``'s values; ``in_order`` puts them back)."""
    ordered = tuple(str(value) for value in values)
    _ORDERS[frozenset(ordered)] = ordered
    return Literal[ordered]


def in_order(values: Iterable[Any]) -> list[Any]:
    """A ``Literal``'s values in the order ``one_of`` was given them."""
    values = list(values)
    return list(_ORDERS.get(frozenset(values), values))


Name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_LENGTH)]
Key = Annotated[str, Meta(min_length=1, max_length=KEY_MAX, pattern=KEY_SCHEMA_PATTERN)]
"""An environment's, segment's or flag's key: the length is checked before the characters."""
Timestamp = Annotated[str, Meta(extra_json_schema={"format": "date-time"})]
"""A time as the control plane writes it (``2025-03-15T10:04:05.123Z``), in answers."""


# -- decoding ---------------------------------------------------------------------------------


def decode(body_type: type[B], raw: bytes, context: Mapping[str, Any] | None = None) -> B:
    """The body in ``raw`` (JSON bytes) as ``body_type``; 400 for JSON that is malformed (all
    of it: invalid UTF-8 in a field the type does not have too) or not an object, or for a
    field that is wrong, naming it (a number past a double's range too: read as infinite,
    it is the field's value that is wrong, not the JSON)."""
    return convert(body_type, decode_json_overflowing(raw), context)


def convert(body_type: type[B], plain: Any, context: Mapping[str, Any] | None = None) -> B:
    """``body_type`` from plain JSON values (a decoded body, a dashboard form's fields)."""
    if not isinstance(plain, dict):
        raise BadRequest("The body must be a JSON object")
    return _struct(body_type, plain, Place(context=context or {}), FIELD)


def read_query(query_type: type[B], param: Callable[[str], str | None]) -> B:
    """``query_type`` from a query string (``param``: Falcon's ``req.get_param``): digits where
    an integer is declared, text for the rest; refusals name the ``Query parameter``."""
    plain: dict[str, Any] = {}
    for info, _ in _fields(query_type):
        text = param(info.encode_name)
        if text is not None:
            is_int = isinstance(_bare(info.type), mi.IntType) and text.isascii() and text.isdigit()
            plain[info.encode_name] = int(text) if is_int else text
    return _struct(query_type, plain, Place(), QUERY_PARAMETER)


def _struct(body_type: type[B], plain: dict[str, Any], place: Place, what: str) -> B:
    """Field by field, in their order: each converted by ``msgspec`` (a nested body field by
    field), refused in words naming it, then checked (``Body.checks``)."""
    seen: dict[str, Any] = {}
    for info, annotation in _fields(body_type):
        raw = plain.get(info.encode_name, _ABSENT)
        here = Place(place.prefix, seen, place.context, place.parent)
        if raw is _ABSENT or (raw is None and not _nullable(info.type)):
            if info.required:
                label = here.label(info.encode_name)
                raise BadRequest(_say(_words(info.type), "required", label, what,
                                      f"{what} '{label}' is required"))  # fmt: skip
            if raw is _ABSENT:
                seen[info.name] = _default(info)
                continue
        precheck = body_type.prechecks.get(info.name)
        if precheck is not None:
            precheck(raw, here)
        seen[info.name] = _value(info.type, annotation, raw, info.encode_name, here, what)
        check = body_type.checks.get(info.name)
        if check is not None:
            check(seen[info.name], here)
    if _info(body_type).forbid_unknown_fields:
        names = {info.encode_name for info, _ in _fields(body_type)}
        for name in plain:
            if name not in names:
                raise BadRequest(body_type.unknown_field(name, place))
    return body_type(**seen)


def _value(info: Any, annotation: Any, raw: Any, name: str, place: Place, what: str) -> Any:
    """One field's value: a nested body field by field, anything else in one conversion."""
    label = place.label(name)
    nested = _nested(info)
    if nested is not None and isinstance(raw, dict):
        inner = Place(f"{label}.", {}, place.context, place)
        return _struct(nested, raw, inner, what)
    value = _integral(raw, info)
    try:
        return msgspec.convert(value, annotation)
    except msgspec.ValidationError as exc:
        raise BadRequest(problem(info, value, label, what) or f"Invalid body: {exc}") from None


@cache
def _info(body_type: type) -> mi.StructType:
    info = mi.type_info(body_type)
    assert isinstance(info, mi.StructType), body_type
    return info


@cache
def _fields(body_type: type) -> tuple[tuple[mi.Field, Any], ...]:
    """Each field's description and its annotation (what ``msgspec.convert`` takes)."""
    hints = get_type_hints(body_type, include_extras=True)
    return tuple((info, hints[info.name]) for info in _info(body_type).fields)


def _default(info: mi.Field) -> Any:
    """An optional field's default (``msgspec.inspect`` reports ``UNSET`` as no default)."""
    if info.default_factory is not msgspec.NODEFAULT:
        return info.default_factory()
    return msgspec.UNSET if info.default is msgspec.NODEFAULT else info.default


# -- what the declared types say ----------------------------------------------------------------


def _bare(info: Any) -> Any:
    """The type under its metadata and without ``None``: ``Annotated[str, ...] | None`` -> str."""
    if isinstance(info, mi.Metadata):
        return _bare(info.type)
    if isinstance(info, mi.UnionType):
        others = [t for t in info.types if not isinstance(t, mi.NoneType)]
        return _bare(others[0]) if len(others) == 1 else info
    return info


def _nullable(info: Any) -> bool:
    if isinstance(info, mi.Metadata):
        return _nullable(info.type)
    if isinstance(info, mi.UnionType):
        return any(isinstance(t, mi.NoneType) for t in info.types)
    return isinstance(info, mi.NoneType | mi.AnyType)


def _nested(info: Any) -> type[Body] | None:
    bare = _bare(info)
    if isinstance(bare, mi.StructType) and issubclass(bare.cls, Body):
        return bare.cls
    return None


def _words(info: Any) -> Mapping[str, str]:
    """The words a field's declaration gives (on the type, or on its non-null member)."""
    while True:
        if isinstance(info, mi.Metadata):
            return (info.extra or {}).get("words", {})
        if not isinstance(info, mi.UnionType):
            return {}
        others = [t for t in info.types if not isinstance(t, mi.NoneType)]
        if len(others) != 1:
            return {}
        info = others[0]


def _mentions_int(info: Any) -> bool:
    if isinstance(info, mi.Metadata):
        return _mentions_int(info.type)
    if isinstance(info, mi.IntType):
        return True
    if isinstance(info, mi.UnionType):
        return any(_mentions_int(t) for t in info.types)
    if isinstance(info, mi.ListType | mi.VarTupleType):
        return _mentions_int(info.item_type)
    if isinstance(info, mi.DictType):
        return _mentions_int(info.value_type)
    if isinstance(info, mi.StructType):
        return any(_mentions_int(f.type) for f in info.fields)
    return False


def _integral(value: Any, info: Any) -> Any:
    """``value`` with each float that has no fractional part made an int where the declared
    type takes an integer and no other number (JSON, and JSON Schema, call 12073.0 an
    integer; ``msgspec`` does not)."""
    if not _mentions_int(info):
        return value
    bare = _bare(info)
    if isinstance(value, float) and value.is_integer():
        numbers = bare.types if isinstance(bare, mi.UnionType) else (bare,)
        if not any(isinstance(t, mi.FloatType) for t in numbers):
            return int(value)
    if isinstance(value, list) and isinstance(bare, mi.ListType | mi.VarTupleType):
        return [_integral(item, bare.item_type) for item in value]
    if isinstance(value, dict) and isinstance(bare, mi.DictType):
        return {key: _integral(item, bare.value_type) for key, item in value.items()}
    if isinstance(value, dict) and isinstance(bare, mi.StructType):
        types = {f.encode_name: f.type for f in bare.fields}
        return {k: _integral(v, types[k]) if k in types else v for k, v in value.items()}
    return value


def _bounds(info: mi.IntType | mi.FloatType) -> str:
    if info.ge is not None and info.le is not None:
        return f" from {info.ge} to {info.le}"
    parts = [
        f"{word} {limit}"
        for word, limit in (("above", info.gt), ("at least", info.ge), ("below", info.lt),
                            ("at most", info.le))
        if limit is not None
    ]  # fmt: skip
    return " " + " and ".join(parts) if parts else ""


def phrase(info: Any) -> str:
    """What a value of the declared type is, in the words of a message: ``a string``,
    ``one of free, pro``, ``a number above 0 and at most 100``."""
    info = _bare(info)
    if isinstance(info, mi.LiteralType):
        return "one of " + ", ".join(str(value) for value in in_order(info.values))
    if isinstance(info, mi.IntType):
        return "an integer" + _bounds(info)
    if isinstance(info, mi.FloatType):
        return "a number" + _bounds(info)
    if isinstance(info, mi.UnionType):
        return " or ".join(phrase(t) for t in info.types)
    simple = {mi.StrType: "a string", mi.BoolType: "a boolean", mi.NoneType: "null",
              mi.ListType: "an array", mi.VarTupleType: "an array", mi.DictType: "an object",
              mi.StructType: "an object"}  # fmt: skip
    return simple.get(type(info), "a valid value")


def _unanchored(pattern: str) -> str:
    return pattern.removeprefix("^").removesuffix("$")


def _say(
    words: Mapping[str, str], facet: str, label: str, what: str, default: str, **values: Any
) -> str:
    template = words.get(facet) or (words.get("every") if facet != "required" else None)
    return default if template is None else template.format(label=label, what=what, **values)


def problem(info: Any, value: Any, label: str, what: str = FIELD) -> str | None:
    """Why ``value`` is not of the declared type, in the admin API's words (the first thing
    wrong, checked as the API always has: type, then length, then pattern or range, then each
    item); None when it is."""
    if value is None and _nullable(info):
        return None
    found, bare = _words(info), _bare(info)
    if isinstance(bare, mi.UnionType):  # several types besides null: none of them fits
        if any(problem(t, value, label, what) is None for t in bare.types):
            return None
        return _say(found, "type", label, what, f"{what} '{label}' must be {phrase(bare)}")
    return _problem(bare, value, label, what, found)


def _problem(info: Any, value: Any, label: str, what: str, found: Mapping[str, str]) -> str | None:
    def say(facet: str, default: str, **values: Any) -> str:
        return _say(found, facet, label, what, default, **values)

    must_be = f"{what} '{label}' must be {phrase(info)}"
    wrong_type = say("type", must_be)
    if isinstance(info, mi.AnyType):
        return None
    if isinstance(info, mi.NoneType):
        return None if value is None else wrong_type
    if isinstance(info, mi.LiteralType):
        return (
            None if any(value == v and type(value) is type(v) for v in info.values) else wrong_type
        )
    if isinstance(info, mi.BoolType):
        return None if isinstance(value, bool) else wrong_type
    if isinstance(info, mi.IntType | mi.FloatType):
        kinds = int if isinstance(info, mi.IntType) else int | float
        if isinstance(value, bool) or not isinstance(value, kinds):
            return wrong_type
        return None if _within(info, value) else say("range", must_be)
    if isinstance(info, mi.StrType):
        return _text_problem(info, value, label, what, say)
    if isinstance(info, mi.ListType | mi.VarTupleType):
        return _array_problem(info, value, label, what, say)
    if isinstance(info, mi.DictType):
        if not isinstance(value, dict):
            return wrong_type
        for key, item in value.items():
            if problem(info.key_type, key, label, what) is not None:
                return say("unknown", f"{what} '{label}' has no field '{key}'", key=key)
            inner = problem(info.value_type, item, f"{label}.{key}", what)
            if inner is not None:
                return inner
        return None
    if isinstance(info, mi.StructType):
        if not isinstance(value, dict):
            return wrong_type
        return _object_problem(info, value, label, what)
    return None  # a type worded no further: the caller says what msgspec said


def _within(info: mi.IntType | mi.FloatType, value: float) -> bool:
    return not (
        (info.gt is not None and value <= info.gt)
        or (info.ge is not None and value < info.ge)
        or (info.lt is not None and value >= info.lt)
        or (info.le is not None and value > info.le)
    )


def _text_problem(
    info: mi.StrType, value: Any, label: str, what: str, say: Callable[..., str]
) -> str | None:
    if not isinstance(value, str):
        return say("type", f"{what} '{label}' must be a string")
    low, high = info.min_length, info.max_length
    if low is not None and high is not None:
        length = f"{what} '{label}' must be {low} to {high} characters long"
    elif high is not None:
        length = f"{what} '{label}' must be at most {high} characters long"
    else:
        length = f"{what} '{label}' must be at least {low} characters long"
    if low is not None and len(value) < low:
        return say("short", length)
    if high is not None and len(value) > high:
        return say("long", length)
    if info.pattern is not None and not re.search(info.pattern, value):
        return say("pattern", f"{what} '{label}' must match {_unanchored(info.pattern)}")
    return None


def _array_problem(
    info: mi.ListType | mi.VarTupleType, value: Any, label: str, what: str, say: Callable[..., str]
) -> str | None:
    if not isinstance(value, list):
        return say("type", f"{what} '{label}' must be an array")
    count, low, high = len(value), info.min_length, info.max_length
    if low is not None and count < low:
        return say("short", f"{what} '{label}' must have at least {low} items", count=count)
    if high is not None and count > high:
        return say(
            "long", f"{what} '{label}' has {count} items; at most {high} are allowed", count=count
        )
    for index, item in enumerate(value):
        inner = problem(info.item_type, item, f"{label}[{index}]", what)
        if inner is not None:
            return inner
    return None


def _object_problem(
    info: mi.StructType, value: dict[str, Any], label: str, what: str
) -> str | None:
    for inner in info.fields:
        raw = value.get(inner.encode_name, _ABSENT)
        name = f"{label}.{inner.encode_name}"
        if raw is _ABSENT or (raw is None and not _nullable(inner.type)):
            if inner.required:
                return _say(
                    _words(inner.type), "required", name, what, f"{what} '{name}' is required"
                )
            if raw is _ABSENT:
                continue
        found = problem(inner.type, raw, name, what)
        if found is not None:
            return found
    if info.forbid_unknown_fields:
        names = {inner.encode_name for inner in info.fields}
        for key in value:
            if key not in names:
                return f"{what} '{label}' has no field '{key}'"
    return None
