"""The public API's authentication: ``Authorization: ApiKey <key>`` and nothing else."""

from __future__ import annotations

import falcon.asgi

from api.controlplane.cache import Caller, ConfigCache
from api.controlplane.model import KeyContext
from api.errors import Unauthorized

_SCHEME = "ApiKey "


def authenticate_api_key(req: falcon.asgi.Request, config: ConfigCache) -> KeyContext:
    """The caller's key context, or 401 with the spec's body; checked before any body is read."""
    header = req.get_header("Authorization")
    if not header or not header.startswith(_SCHEME):
        raise Unauthorized()
    context = config.authenticate(header[len(_SCHEME) :].strip())
    if context is None:
        raise Unauthorized()
    return context


def authenticate_caller(req: falcon.asgi.Request, config: ConfigCache) -> Caller:
    """``authenticate_api_key``, with what the key's requests read from the config."""
    header = req.get_header("Authorization")
    if not header or not header.startswith(_SCHEME):
        raise Unauthorized()
    caller = config.caller(header[len(_SCHEME) :].strip())
    if caller is None:
        raise Unauthorized()
    return caller
