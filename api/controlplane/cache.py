"""Each worker's in-memory copy of the control plane: what evaluation and authentication read.

Reads are dictionary lookups on an immutable snapshot, with no I/O and no lock. A daemon
thread polls ``store.config_version()`` (a one-row read) every ``poll_interval_s`` and, when
it moved, reads a consistent ``ConfigSnapshot`` and swaps in a new snapshot object in one
assignment. A change therefore reaches every worker within one poll interval plus a reload;
segments whose version did not change keep their membership tables and are not rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from flagsight_core import Flag
from flagsight_core.ids import environment_id_to_bytes
from flagsight_core.segments import SegmentMembership, segment_of

from api.controlplane.model import KeyContext, Organization
from api.controlplane.resources.snapshot import ConfigSnapshot, SegmentId
from api.controlplane.store import ControlPlaneStore
from api.observability.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EnvironmentConfig:
    """One environment as evaluation sees it.

    ``version`` changes whenever an answer evaluation can give here may change (a flag of
    this environment, the organization, or one of its segments), so it can key OFREP ETags.
    """

    id: str
    key: str
    name: str
    organization_id: str
    insights_enabled: bool
    flags: Mapping[str, Flag]
    segments: Mapping[str, Container[str]]
    version: int
    id_bytes: bytes
    """The id's 8 bytes, as an evaluation id carries them (``environment_id_to_bytes``)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """What a request made with one API key reads from the config, looked up once per
    snapshot: the key, its environment and its organization (None when gone), and the
    organization's hard threshold (0 without one)."""

    key: KeyContext
    environment: EnvironmentConfig | None
    organization: Organization | None
    hard_limit: int


@dataclass(frozen=True)
class _Snapshot:
    version: int
    api_keys: Mapping[str, KeyContext]
    environments: Mapping[str, EnvironmentConfig]
    organizations: Mapping[str, Organization]
    segment_versions: Mapping[SegmentId, int]
    segments: Mapping[SegmentId, SegmentMembership]
    callers: dict[str, Caller] = field(default_factory=dict, compare=False)
    """``ConfigCache.caller``'s memo, by API key: it goes with the snapshot it was read from."""


_EMPTY = _Snapshot(-1, {}, {}, {}, {}, {})


KEY_HASHES_KEPT = 10_000


def _key_hash(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()


def _memberships(
    data: ConfigSnapshot, previous: _Snapshot
) -> tuple[dict[SegmentId, SegmentMembership], int]:
    """Every segment's membership, reusing the previous one when its version is unchanged: its
    members' table, or with conditions a ``DefinedSegment`` (``segments.segment_of``) that
    decides by its lists and conditions."""
    memberships: dict[SegmentId, SegmentMembership] = {}
    rebuilt = 0
    for segment_id, version in data.segment_versions.items():
        members = data.segment_members.get(segment_id)
        if members is None and previous.segment_versions.get(segment_id) == version:
            memberships[segment_id] = previous.segments[segment_id]
            continue
        listed = SegmentMembership.build(members if members is not None else ())
        defined = data.segment_conditions.get(segment_id)
        if defined is not None:
            excluded = SegmentMembership.build(defined.excluded)
            listed = segment_of(listed, excluded, defined.conditions)
        memberships[segment_id] = listed
        rebuilt += 1
    return memberships, rebuilt


def _build(data: ConfigSnapshot, previous: _Snapshot) -> tuple[_Snapshot, int]:
    memberships, rebuilt = _memberships(data, previous)
    by_org: dict[str, dict[str, Container[str]]] = {o.id: {} for o in data.organizations}
    for (organization_id, key), membership in memberships.items():
        by_org.setdefault(organization_id, {})[key] = membership
    org_segments = {org: MappingProxyType(segments) for org, segments in by_org.items()}
    flags: dict[str, dict[str, Flag]] = {e.id: {} for e in data.environments}
    for record in data.flags:
        flag = Flag(record.key, record.enabled, record.archived, record.rules)
        flags.setdefault(record.environment_id, {})[record.key] = flag
    environments = {
        env.id: EnvironmentConfig(
            id=env.id,
            key=env.key,
            name=env.name,
            organization_id=env.organization_id,
            insights_enabled=env.insights_enabled,
            flags=MappingProxyType(flags[env.id]),
            segments=org_segments.get(env.organization_id, MappingProxyType({})),
            version=data.environment_versions[env.id],
            id_bytes=environment_id_to_bytes(env.id),
        )
        for env in data.environments
    }
    snapshot = _Snapshot(
        version=data.version,
        api_keys=dict(data.api_keys),
        environments=environments,
        organizations={o.id: o for o in data.organizations},
        segment_versions=dict(data.segment_versions),
        segments=memberships,
    )
    return snapshot, rebuilt


class ConfigCache:
    """The control plane as one worker serves it; see the module docstring."""

    def __init__(
        self,
        store: ControlPlaneStore,
        poll_interval_s: float = 0.25,
        metrics: Metrics | None = None,
    ):
        self._store = store
        self._poll_interval_s = poll_interval_s
        self._metrics = metrics
        self._snapshot = _EMPTY
        self._key_hashes: dict[str, str] = {}
        self._reload_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.segments_built = 0
        """Segment tables built since this cache was made (a reload skips unchanged ones)."""
        self._listeners: list[Callable[[], None]] = []
        self.refresh()

    # -- reads: no I/O ----------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The config version this worker serves."""
        return self._snapshot.version

    def authenticate(self, api_key: str) -> KeyContext | None:
        """Who holds ``api_key``; None for an unknown or revoked key.

        The SHA-256 of a key that authenticated is remembered (up to ``KEY_HASHES_KEPT``
        keys), so a client's every request after its first costs a dict lookup, not a hash.
        The lookup by hash still goes through the current snapshot: revoking a key takes
        effect as before. Keys that fail are not remembered, so they cannot fill the memo.
        """
        digest = self._key_hashes.get(api_key)
        if digest is not None:
            return self._snapshot.api_keys.get(digest)
        digest = _key_hash(api_key)
        context = self._snapshot.api_keys.get(digest)
        if context is not None:
            if len(self._key_hashes) >= KEY_HASHES_KEPT:
                self._key_hashes.clear()
            self._key_hashes[api_key] = digest
        return context

    def caller(self, api_key: str) -> Caller | None:
        """``authenticate``, with the key's environment and organization, from one snapshot.

        Memoised in the snapshot (up to ``KEY_HASHES_KEPT`` keys that authenticated), so a
        client's every request after its first costs one dict lookup; a reload starts a new
        memo, so revoking a key or changing its environment or organization takes effect as
        with ``authenticate``.
        """
        snapshot = self._snapshot
        caller = snapshot.callers.get(api_key)
        if caller is not None:
            return caller
        digest = self._key_hashes.get(api_key)
        if digest is None:
            digest = _key_hash(api_key)
        context = snapshot.api_keys.get(digest)
        if context is None:
            return None
        if len(self._key_hashes) >= KEY_HASHES_KEPT:
            self._key_hashes.clear()
        self._key_hashes[api_key] = digest
        organization = snapshot.organizations.get(context.organization_id)
        caller = Caller(
            context,
            snapshot.environments.get(context.environment_id),
            organization,
            0 if organization is None else organization.hard_limit,
        )
        if len(snapshot.callers) >= KEY_HASHES_KEPT:
            snapshot.callers.clear()
        snapshot.callers[api_key] = caller
        return caller

    def environment(self, environment_id: str) -> EnvironmentConfig | None:
        return self._snapshot.environments.get(environment_id)

    def organization(self, organization_id: str) -> Organization | None:
        return self._snapshot.organizations.get(organization_id)

    # -- reloading --------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every reload, on the thread that reloaded (the poller's, or
        an admin write's): what pushes a change to the worker's open streams."""
        self._listeners.append(listener)

    def refresh(self) -> bool:
        """Reload now if the store's version moved; True when a reload happened.

        The admin API calls this after each write, so the worker that wrote reads its write.
        """
        with self._reload_lock:
            if self._store.config_version() == self._snapshot.version:
                return False
            previous = self._snapshot
            data = self._store.read_config(previous.segment_versions)
            self._snapshot, rebuilt = _build(data, previous)
            self.segments_built += rebuilt
        if self._metrics is not None:
            self._metrics.config_reloads.inc()
            self._metrics.serve_config_version(data.version)
        for listener in self._listeners:
            listener()
        return True

    def start(self) -> None:
        """Start polling in a daemon thread. Call it in the process that serves (after fork)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._poll, name="flagsight-config", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)

    def _poll(self) -> None:
        """Reload when the version moves. While the store cannot be read (a locked file,
        PostgreSQL down) keep serving the last snapshot and retry every interval, logging
        when the outage starts and when it ends, not at every failed poll."""
        failing_since: float | None = None
        while not self._stopping.wait(self._poll_interval_s):
            try:
                self.refresh()
            except Exception:
                if failing_since is None:
                    failing_since = time.monotonic()
                    log.exception("control-plane reload failed; serving version %s", self.version)
                continue
            if failing_since is not None:
                log.warning(
                    "control-plane reloads work again after %.1f s; serving version %s",
                    time.monotonic() - failing_since, self.version,
                )  # fmt: skip
                failing_since = None
