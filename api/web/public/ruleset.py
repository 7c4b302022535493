"""``GET /v1/ruleset`` and ``GET /v1/stream``: what a local SDK decides from, and the push
that tells it to fetch again (contract section 11; ``docs/sdk.md``, "Local evaluation").

The ruleset is encoded once per environment and configuration version in each worker and
served with a strong ``ETag``; ``If-None-Match`` with it is 304. Neither route is metered: the
evaluations a local SDK makes from the ruleset are, when it asks for quota
(``api.web.public.local``).

The stream sends ``event: ruleset`` with ``{"version": N}`` at once and again within a second
of any change to the environment's ruleset, made on any host (``api.serving.change_feed``). The
SDK fetches until it holds the announced version (its fetch may reach a worker or host that
has not reloaded yet); OFREP's stream, whose providers re-fetch once, announces a change one
poll interval (and a margin) after this worker saw it, so the re-fetch finds it anywhere; a
comment line every ``HEARTBEAT_S`` keeps proxies from closing it and tells the client the
service is there. A key that no longer authenticates (revoked, its environment deleted) ends
its streams at the next reload, within a second; the next request gets 401.

Streams are bounded per key on each host (``settings.streams_per_key``, 500; both kinds
together): past it a new one gets 429 with ``Retry-After`` (contract 11), so one key cannot
take every connection a host can hold. The slot is taken before the answer starts and given
back when the stream ends, or, if its body never starts, when the generator is collected.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import AsyncIterator, Container

import falcon
import falcon.asgi
from falcon.asgi import SSEvent
from flagsight_core.ruleset import Ruleset, named_segments, ruleset_to_json
from flagsight_core.segments import SALT_BYTES, SaltedMembership, SegmentMembership, salted

from api.controlplane.cache import EnvironmentConfig
from api.infra.host_slots import Slot
from api.serving.services import Services
from api.web.auth import api_key_of, authenticate_caller
from api.web.errors import TooManyStreams, Unauthorized
from api.web.jsonio import encode

HEARTBEAT_S = 5.0
"""Seconds between comment lines on an idle stream (the contract asks for at most 15). Also
how soon a stream whose client went away ends: a client's FIN is taken as a half-close (it
may still read), so the stream ends when a write fails, the second heartbeat after it left."""
RETRY_MS = 1000
FULL_RETRY_AFTER_S = 10
"""``Retry-After`` of a stream refused because the key holds its most on this host."""
"""The reconnection delay a browser's ``EventSource`` takes from the stream."""
SETTLE_MARGIN_S = 0.1
"""Beyond one poll interval, the wait before announcing a change (a reload's own time)."""
_ENCODED_KEPT = 256
_SALTED_KEPT = 4096


def segment_salt(signing_key: bytes, environment_id: str) -> bytes:
    """The environment's segment salt (``flagsight_core.segments``): derived from the
    deployment's signing key, so every worker and host ships the same one without storing it,
    and no two environments share one."""
    return hashlib.blake2b(
        environment_id.encode(), key=signing_key, person=b"segment-salt", digest_size=SALT_BYTES
    ).digest()


def ruleset_etag(environment: EnvironmentConfig) -> str:
    """Strong: the environment's version moves with anything an answer there may depend on."""
    return version_etag(environment.version)


def version_etag(version: int) -> str:
    return f'"rs2-{version}"'  # rs2: the ruleset's format 2 (salted segment tables)


class RulesetResource:
    """``GET /v1/ruleset``."""

    def __init__(self, services: Services):
        self._services = services
        self._encoded: dict[tuple[str, int], bytes] = {}
        self._pending: dict[tuple[str, int], asyncio.Future[bytes]] = {}
        self._salted: dict[tuple[str, str], tuple[SegmentMembership, bytes, SaltedMembership]] = {}
        """By (environment, segment key): the membership salted, the salt, the salted table."""
        """Encodings under way, by (environment, version): their askers wait for the one."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        caller = authenticate_caller(req, self._services.config)
        environment = caller.environment
        if environment is None:
            raise Unauthorized()
        etag = ruleset_etag(environment)
        resp.set_header("ETag", etag)
        resp.cache_control = ["no-cache"]  # keep it, but ask again (a 304 is cheap)
        if req.get_header("If-None-Match") in (etag, f"W/{etag}"):
            resp.status = falcon.HTTP_304
            return
        resp.content_type = falcon.MEDIA_JSON
        key = (environment.id, environment.version)
        body = self._encoded.get(key)
        if body is None:
            body = await self._encoding(key, environment)
        resp.data = body

    def _encoding(self, key: tuple[str, int], environment: EnvironmentConfig) -> asyncio.Future:
        """The ruleset's encoding, made once however many ask for it at once (every local
        client fetches within a moment of a change), in a thread: salting a large segment
        takes a while, and the event loop serves on meanwhile."""
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(asyncio.to_thread(self._body, environment))
            self._pending[key] = pending
            pending.add_done_callback(lambda _done: self._pending.pop(key, None))
        return asyncio.shield(pending)

    def _body(self, environment: EnvironmentConfig) -> bytes:
        salt = segment_salt(self._services.ids.signing_key, environment.id)
        ruleset = Ruleset(
            environment.id,
            environment.version,
            environment.flags,
            self._salted_segments(environment, salt),
            salt,
        )
        body = encode(ruleset_to_json(ruleset))
        if len(self._encoded) >= _ENCODED_KEPT:
            self._encoded.clear()
        self._encoded[(environment.id, environment.version)] = body
        return body

    def _salted_segments(
        self, environment: EnvironmentConfig, salt: bytes
    ) -> dict[str, Container[str]]:
        """The segments the flags name, their tables salted once per segment version: a flag
        change reuses them (the cache keeps the membership it salted, which the worker
        replaces only when the segment changes)."""
        segments: dict[str, Container[str]] = {}
        for key in named_segments(environment.flags.values()):
            members = environment.segments.get(key)
            if not isinstance(members, SegmentMembership):
                continue
            kept = self._salted.get((environment.id, key))
            if kept is None or kept[0] is not members or kept[1] != salt:
                if len(self._salted) >= _SALTED_KEPT:
                    self._salted.clear()
                kept = (members, salt, salted(members, salt))
                self._salted[(environment.id, key)] = kept
            segments[key] = kept[2]
        return segments


class StreamResource:
    """``GET /v1/stream``: server-sent events for one key's environment."""

    announce_first = True
    """Send the current version as soon as the stream opens (a client that reconnects learns
    at once whether it missed a change)."""
    settle = False
    """Whether to wait a poll interval before announcing a change. The SDK needs no wait: the
    event names the version, and it fetches again until it has it."""

    def __init__(self, services: Services):
        self._services = services
        self._settle_s = services.settings.config_poll_interval_s + SETTLE_MARGIN_S

    def event(self, version: int) -> SSEvent:
        """What a change to ``version`` sends."""
        return SSEvent(event="ruleset", json={"version": version})

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        caller = authenticate_caller(req, self._services.config)
        if caller.environment is None:
            raise Unauthorized()
        slots = self._services.stream_slots
        slot = slots.take(caller.key.key_id)
        if slot is None:
            raise TooManyStreams(slots.limit, FULL_RETRY_AFTER_S)
        api_key = api_key_of(req.get_header("Authorization")) or ""
        resp.cache_control = ["no-cache"]
        resp.set_header("X-Accel-Buffering", "no")  # nginx: pass each event on at once
        events = self._events(api_key, caller.environment.id, slot)
        weakref.finalize(events, slot.release)  # a body that never starts ends nothing
        resp.sse = events

    async def _events(
        self, api_key: str, environment_id: str, slot: Slot
    ) -> AsyncIterator[SSEvent | None]:
        try:
            async for event in self._versions(api_key, environment_id):
                yield event
        finally:
            slot.release()

    async def _versions(self, api_key: str, environment_id: str) -> AsyncIterator[SSEvent | None]:
        services = self._services
        feed, metrics = services.change_feed, services.metrics
        sent = self._version(api_key, environment_id)
        if sent is None:
            return
        metrics.streams_open.inc()
        try:
            first = self.event(sent) if self.announce_first else SSEvent()
            first.retry = RETRY_MS
            yield first
            while not feed.closing:
                if not await feed.wait(HEARTBEAT_S):
                    yield None  # ": ping"
                    continue
                version = self._version(api_key, environment_id)
                if version is None or feed.closing:
                    return  # revoked, or the environment is gone: a new request gets 401
                if version != sent:
                    if self.settle:
                        # Let every other worker and host reload first (each polls at this
                        # interval): the re-fetch this event causes may reach any of them.
                        await asyncio.sleep(self._settle_s)
                        version = self._version(api_key, environment_id)
                        if version is None or feed.closing:
                            return
                    sent = version
                    metrics.stream_events.inc()
                    yield self.event(version)
        finally:
            metrics.streams_open.dec()

    def _version(self, api_key: str, environment_id: str) -> int | None:
        """The environment's version while the key still authenticates for it, else None."""
        caller = self._services.config.caller(api_key)
        if caller is None or caller.environment is None or caller.environment.id != environment_id:
            return None
        return caller.environment.version


class OfrepStreamResource(StreamResource):
    """``GET /ofrep/v1/stream``, advertised by OFREP's bulk answer as its ``eventStreams``
    (ADR-0008 of the OFREP protocol): a change asks the provider to evaluate again."""

    announce_first = False
    settle = True  # a provider re-fetches once, and must find the change wherever it asks

    def event(self, version: int) -> SSEvent:
        return SSEvent(
            json={
                "type": "refetchEvaluation",
                "etag": version_etag(version),
                "lastModified": int(self._services.clock()),
            }
        )
