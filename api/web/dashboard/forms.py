"""Reading the dashboard's HTML form posts: urlencoded, or multipart for file uploads.

The app's media handlers are configured for the JSON API, so forms are parsed here with
handlers of our own and the admin body limit; fields keep their order and repeats (the rule
editor relies on both), uploaded files are kept as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

import falcon.asgi
import falcon.media
from falcon.media.multipart import MultipartParseOptions

from api.web.jsonio import TRUNCATED_BODY_MESSAGE, truncated

URLENCODED = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
MAX_FORM_FIELDS = 2000


class FormError(Exception):
    """The body is not a form we accept (type, size, shape); the message is for people."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Form:
    """A posted form: ordered text fields (names may repeat) and uploaded files."""

    fields: list[tuple[str, str]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        """The first value of ``name``, or ``default``."""
        return next((value for key, value in self.fields if key == name), default)

    def getall(self, name: str) -> list[str]:
        """Every value of ``name`` in document order."""
        return [value for key, value in self.fields if key == name]


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


async def read_form(req: falcon.asgi.Request, limit: int) -> Form:
    """The posted form; ``FormError`` 415 for another body type, 413 over ``limit`` bytes."""
    media = _media_type(req.content_type)
    if req.content_length is not None and req.content_length > limit:
        raise FormError(413, f"The form is larger than {limit} bytes")
    if media == URLENCODED or (media == "" and not req.content_length):
        raw = await req.stream.read(limit + 1)
        if len(raw) > limit:
            raise FormError(413, f"The form is larger than {limit} bytes")
        if truncated(req, raw):
            raise FormError(400, TRUNCATED_BODY_MESSAGE)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FormError(400, "The form is not valid UTF-8") from None
        try:
            pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
        except ValueError:  # what parse_qsl raises past max_num_fields
            raise FormError(400, f"The form has more than {MAX_FORM_FIELDS} fields") from None
        return Form(fields=pairs)
    if media == MULTIPART:
        return await _read_multipart(req, limit)
    raise FormError(415, "Send the form as a web page does (urlencoded or multipart)")


async def _read_multipart(req: falcon.asgi.Request, limit: int) -> Form:
    options = MultipartParseOptions()
    options.max_body_part_buffer_size = limit
    handler = falcon.media.MultipartFormHandler(options)
    form = Form()
    try:
        parts = await handler.deserialize_async(req.stream, req.content_type, req.content_length)
        async for part in parts:
            if part.filename is not None:
                form.files[part.name] = await part.get_data()
            else:
                form.fields.append((part.name, await part.get_text() or ""))
    except falcon.MediaMalformedError as exc:
        raise FormError(400, f"The form could not be read: {exc.description}") from None
    except falcon.HTTPError as exc:
        raise FormError(exc.status_code, exc.description or "The form could not be read") from None
    return form
