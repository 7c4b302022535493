"""The public API's authentication: ``Authorization: ApiKey <key>`` and nothing else."""

from __future__ import annotations

import falcon.asgi

from api.controlplane.cache import Caller, ConfigCache
from api.controlplane.model import KeyContext
from api.web.errors import Unauthorized

_SCHEME = "ApiKey "


def authenticate_api_key(req: falcon.asgi.Request, config: ConfigCache) -> KeyContext:
    """The caller's key context, or 401 with the spec's body; checked before any body is read."""
    api_key = api_key_of(req.get_header("Authorization"))
    context = None if api_key is None else config.authenticate(api_key)
    if context is None:
        raise Unauthorized()
    return context


def authenticate_caller(req: falcon.asgi.Request, config: ConfigCache) -> Caller:
    """``authenticate_api_key``, with what the key's requests read from the config."""
    api_key = api_key_of(req.get_header("Authorization"))
    caller = None if api_key is None else config.caller(api_key)
    if caller is None:
        raise Unauthorized()
    return caller


def api_key_of(authorization: str | None) -> str | None:
    """The API key an ``Authorization`` field value carries, None without the ``ApiKey``
    scheme: the one reading of the field, for Falcon's requests and for ``api.web.front``'s."""
    if not authorization or not authorization.startswith(_SCHEME):
        return None
    key = authorization[len(_SCHEME) :].rstrip(" \t")  # trailing white space is no part of it
    if not key or " " in key or "\t" in key:
        return None  # the scheme is exact: one space, then the key ("ApiKey  k" is no key)
    return key
