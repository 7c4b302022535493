"""What every admin resource shares: its dependencies, reading its body and query string
into their declared types (``bodies``), and store calls.

Store calls are blocking (SQLite), so they run in a worker thread: a large segment upload
must not stall the evaluations this worker's event loop is serving. After a write the same
thread refreshes the worker's ``ConfigCache``, so the next request here reads the write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import falcon
import falcon.asgi

from api.controlplane.changes import Actor
from api.controlplane.store import ControlPlaneStore
from api.serving.services import Services
from api.web.admin import bodies
from api.web.admin.auth import AdminAuth
from api.web.jsonio import read_body

T = TypeVar("T")
B = TypeVar("B", bound=bodies.Body)


class AdminResource:
    """Base of the admin resources; subclasses are decorated with ``require_admin``."""

    actor: Actor = Actor.ADMIN_API
    """Who the audit log says made the changes written through ``write``."""

    def __init__(self, services: Services, auth: AdminAuth):
        self.services = services
        self.auth = auth

    @property
    def store(self) -> ControlPlaneStore:
        return self.services.store

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking store read off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store write, as ``actor``, off the event loop; then make this worker serve it."""

        def write_and_refresh() -> T:
            result = fn(*args, actor=self.actor, **kwargs)
            self.services.config.refresh()
            return result

        return await asyncio.to_thread(write_and_refresh)

    async def body(self, req: falcon.asgi.Request, body_type: type[B], **context: Any) -> B:
        """The body as ``body_type``: 415, 413 and 400 as the contract says, the 400 naming the
        field (``context``: what the body type's checks need to know of the request)."""
        raw = await read_body(req, self.services.settings.body_limits.admin)
        return bodies.decode(body_type, raw, context)

    async def optional_body(
        self, req: falcon.asgi.Request, body_type: type[B], **context: Any
    ) -> B:
        """Like ``body``, but a request with no body at all (and no content type) is ``{}``."""
        if not req.content_type and not req.content_length:
            return bodies.convert(body_type, {}, context)
        return await self.body(req, body_type, **context)

    def query(self, req: falcon.asgi.Request, query_type: type[B]) -> B:
        """The query string as ``query_type``; 400 naming the parameter."""
        return bodies.read_query(query_type, req.get_param)
