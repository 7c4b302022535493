"""Reading JSON request bodies within limits, and writing JSON answers.

Bodies are decoded with msgspec into plain Python values; each endpoint then validates the
fields it needs with the helpers below, so every 400 names the field that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

import falcon
import falcon.asgi
import msgspec

from api.web.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from api.web.request_framing import body_cap

_decode = msgspec.json.decode
encode = msgspec.json.encode
T = TypeVar("T")


@lru_cache(maxsize=256)
def is_json(content_type: str | None) -> bool:
    """Memoised: clients send the same one or two content types on every request."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


TRUNCATED_BODY_MESSAGE = "The request body is shorter than its Content-Length header"


def truncated(req: falcon.asgi.Request, raw: bytes) -> bool:
    """Whether the client stopped before the end it announced.

    The stream ends early when the client goes away or gunicorn stops waiting for the rest
    (its body wait), and Falcon then hands over what arrived: such a body must be refused,
    never parsed, served, metered or logged.
    """
    length = req.content_length
    return length is not None and len(raw) < length


async def read_body(req: falcon.asgi.Request, limit: int) -> bytes:
    """The raw JSON body; 415 if it is not JSON, 413 if over ``limit``, 400 if cut short."""
    if not is_json(req.content_type):
        raise UnsupportedMediaType()
    length = req.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(limit)
    cap = body_cap(req.scope)
    if cap is not None:  # chunked under flagsight's worker: refused as soon as announced
        cap.limit_to(limit)
    raw = await req.stream.read(limit + 1)
    if len(raw) > limit:
        raise PayloadTooLarge(limit)
    if length is not None and len(raw) < length:  # ``truncated``, with the length read once
        raise BadRequest(TRUNCATED_BODY_MESSAGE)
    return raw


MALFORMED = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)
"""What decoding a client's bytes can raise: msgspec's own errors, invalid UTF-8 inside a
string (msgspec lets the codec's error through) and nesting deeper than the interpreter's
recursion limit (msgspec guards its C recursion with it, so this is safe to catch)."""


def malformed(exc: BaseException) -> BadRequest:
    """The 400 for a body that is not JSON, in words a client can act on."""
    if isinstance(exc, UnicodeDecodeError):
        return BadRequest("Malformed JSON body: a string is not valid UTF-8")
    if isinstance(exc, RecursionError):
        return BadRequest("Malformed JSON body: nested too deeply")
    return BadRequest(f"Malformed JSON body: {exc}")


def decode_json(raw: bytes) -> Any:
    """Plain Python values; 400 if malformed."""
    try:
        return _decode(raw)
    except MALFORMED as exc:
        raise malformed(exc) from None


def decode_json_overflowing(raw: bytes) -> Any:
    """Plain Python values, a number too large for a double read as an infinite float; 400 if
    malformed.

    Such a number is valid JSON (the grammar has no bound), which ``decode_json`` refuses as
    "Number out of range"; this reading lets a validator name the field that holds it, or
    OFREP ignore it as an attribute of a shape contract 12 does not take. Only then does it
    read the body again, with Python's own parser, holding it to what ``decode_json`` holds
    a body to: no ``NaN`` or ``Infinity`` tokens, valid UTF-8, no lone surrogate.
    """
    try:
        return _decode(raw)
    except msgspec.ValidationError:  # untyped, only a number out of a double's range
        pass
    except MALFORMED as exc:
        raise malformed(exc) from None
    try:
        decoded = json.loads(raw, parse_constant=_no_constant, parse_int=_int_or_infinite)
        encode(decoded)  # a lone surrogate (``"\\ud800"``), which msgspec refuses, raises here
    except UnicodeError:
        raise BadRequest("Malformed JSON body: a string is not valid UTF-8") from None
    except RecursionError:
        raise BadRequest("Malformed JSON body: nested too deeply") from None
    except ValueError as exc:
        raise BadRequest(f"Malformed JSON body: {exc}") from None
    return decoded


def _int_or_infinite(text: str) -> int | float:
    """A JSON integer; one past Python's 4,300 digits (far past a double) read as the infinity
    of its sign, as a number out of a double's range is, not as a malformed body."""
    try:
        return int(text)
    except ValueError:
        return float("-inf") if text.startswith("-") else float("inf")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def read_json(req: falcon.asgi.Request, limit: int) -> Any:
    """The decoded body; 415 if it is not JSON, 413 if over ``limit``, 400 if malformed."""
    return decode_json(await read_body(req, limit))


def decode_typed(
    raw: bytes,
    decoder: msgspec.json.Decoder,
    validate: Callable[[Any], T],
    decode: Callable[[bytes], Any] = decode_json,
) -> T | Any:
    """Decode straight into ``decoder``'s type, the fast path for valid bodies.

    When the body does not fit the type, ``validate`` runs over the plain decoded body (as
    ``decode`` reads it): it raises the 400 that names the field, in the same words as every
    other endpoint.
    """
    try:
        return decoder.decode(raw)
    except MALFORMED as exc:
        raise typed_error(raw, exc, validate, decode) from None


def typed_error(
    raw: bytes,
    exc: BaseException,
    validate: Callable[[Any], object],
    decode: Callable[[bytes], Any] = decode_json,
) -> BadRequest:
    """The 400 for ``raw`` that a typed decoder refused with ``exc`` (one of ``MALFORMED``):
    what ``decode_typed`` raises, for callers that decode inline."""
    if isinstance(exc, msgspec.ValidationError):
        validate(decode(raw))
        return BadRequest(f"Invalid body: {exc}")
    return malformed(exc)


def write_json(resp: falcon.asgi.Response, body: Any, status: int = 200) -> None:
    resp.status = status
    resp.data = encode(body)
    resp.content_type = falcon.MEDIA_JSON


def require_object(body: Any, where: str = "body") -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(f"The {where} must be a JSON object")
    return body


def require_str(
    obj: dict[str, Any], name: str, *, min_len: int = 1, max_len: int, where: str = ""
) -> str:
    value = obj.get(name)
    label = f"{where}{name}"
    if value is None:
        raise BadRequest(f"Field '{label}' is required")
    if not isinstance(value, str):
        raise BadRequest(f"Field '{label}' must be a string")
    if not min_len <= len(value) <= max_len:
        raise BadRequest(f"Field '{label}' must be {min_len} to {max_len} characters long")
    return value


def optional_str(obj: dict[str, Any], name: str, *, max_len: int, where: str = "") -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"Field '{where}{name}' must be a string or null")
    if len(value) > max_len:
        raise BadRequest(f"Field '{where}{name}' must be at most {max_len} characters long")
    return value


def require_bool(obj: dict[str, Any], name: str, *, where: str = "") -> bool:
    value = obj.get(name)
    if not isinstance(value, bool):
        problem = "is required" if value is None else "must be a boolean"
        raise BadRequest(f"Field '{where}{name}' {problem}")
    return value


def optional_bool(
    obj: dict[str, Any], name: str, default: bool | None = None, *, where: str = ""
) -> bool | None:
    value = obj.get(name, default)
    if value is not None and not isinstance(value, bool):
        raise BadRequest(f"Field '{where}{name}' must be a boolean")
    return value


def require_list(obj: dict[str, Any], name: str, *, max_items: int, where: str = "") -> list[Any]:
    value = obj.get(name)
    if value is None:
        raise BadRequest(f"Field '{where}{name}' is required")
    if not isinstance(value, list):
        raise BadRequest(f"Field '{where}{name}' must be an array")
    if len(value) > max_items:
        raise BadRequest(
            f"Field '{where}{name}' has {len(value)} items; at most {max_items} are allowed"
        )
    return value
