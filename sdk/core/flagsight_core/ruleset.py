"""An environment's ruleset as JSON: what ``GET /v1/ruleset`` serves and a local SDK decides
from (contract section 11).

Both directions live here, in the pure core, so the service that writes a ruleset and the SDK
that reads it share one definition: flags as the admin API writes their rules, and each
segment a rule names as its membership table (``SegmentMembership.to_bytes``, base64), so a
local client answers segment rules exactly as the service does without ever holding the
segment's identifiers.

Shape (``format`` 2)::

    {"format": 2, "environmentId": "env_…", "version": 7, "segmentSalt": "<base64, 16 bytes>",
     "flags": [{"key": "…", "enabled": true, "archived": false, "rules": [rule, …]}, …],
     "segments": {"beta": {"members": 3, "table": "<base64 of little-endian uint64 slots>"}}}

Format 2 salts the tables per environment (``segments.salted``: each member's hash under
``segmentSalt``); a format-1 reader refuses it and keeps what it has, rather than look up
unsalted hashes in a salted table.

Format 3 (contract 12) is format 2 with what targeting by attributes adds: a segment with
conditions carries them, values included, and its excluded members as a second table salted
like the first (``"excludedMembers": 1, "excludedTable": "…", "conditions": [condition, …]``),
and a percentage rule may name a ``segment``. A ruleset that uses neither stays format 2, so a
client from before reads it as ever; one that uses either is format 3, which a format-2 reader
refuses (keeping what it has) rather than answer without the conditions.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flagsight_core.conditions import conditions_from_json
from flagsight_core.model import Flag, RuleError, rule_from_json, rule_to_json
from flagsight_core.segments import (
    SALT_BYTES,
    DefinedSegment,
    SaltedMembership,
    SegmentMembership,
    salted,
    segment_of,
)

FORMAT = 2
"""The format of a ruleset without targeting by attributes."""
TARGETING_FORMAT = 3
"""The format of one with a segment's conditions or a percentage within a segment."""
FORMATS = (FORMAT, TARGETING_FORMAT)


@dataclass(frozen=True, slots=True)
class Ruleset:
    """One environment's flags and the segments they name, at one configuration version."""

    environment_id: str
    version: int
    flags: Mapping[str, Flag]
    segments: Mapping[str, Container[str]]
    segment_salt: bytes = b""
    """The environment's salt for the tables the ruleset ships (``segments.SALT_BYTES``)."""


def named_segments(flags: Iterable[Flag]) -> set[str]:
    """The segment keys the flags' rules name (a rule type that reads a segment has one)."""
    return {
        segment
        for flag in flags
        for rule in flag.rules
        if isinstance(segment := getattr(rule, "segment", None), str)
    }


def ruleset_to_json(ruleset: Ruleset) -> dict[str, Any]:
    """The document ``GET /v1/ruleset`` answers. A named segment the organization does not
    have is left out, and a local client answers its rule as the service does: no member."""
    segments = {}
    for key in sorted(named_segments(ruleset.flags.values())):
        members = ruleset.segments.get(key)
        if isinstance(members, SegmentMembership):
            segments[key] = _segment_json(members, ruleset.segment_salt)
    targeting = any("conditions" in segment for segment in segments.values()) or any(
        getattr(rule, "segment", None) is not None and rule.type == "PERCENTAGE"
        for flag in ruleset.flags.values()
        for rule in flag.rules
    )
    return {
        "format": TARGETING_FORMAT if targeting else FORMAT,
        "environmentId": ruleset.environment_id,
        "version": ruleset.version,
        "segmentSalt": base64.b64encode(ruleset.segment_salt).decode("ascii"),
        "flags": [
            {
                "key": flag.key,
                "enabled": flag.enabled,
                "archived": flag.archived,
                "rules": [rule_to_json(rule) for rule in flag.rules],
            }
            for flag in sorted(ruleset.flags.values(), key=lambda f: f.key)
        ],
        "segments": segments,
    }


def _segment_json(members: SegmentMembership, salt: bytes) -> dict[str, Any]:
    """A segment as the ruleset ships it, its tables salted (by the caller, with its salt,
    or here)."""
    if not _is_salted(members):
        members = salted(members, salt)
    shipped: dict[str, Any] = {"members": len(members), "table": _table(members)}
    if isinstance(members, DefinedSegment):
        shipped["excludedMembers"] = len(members.excluded)
        shipped["excludedTable"] = _table(members.excluded)
        shipped["conditions"] = [condition.to_json() for condition in members.conditions]
    return shipped


def _is_salted(members: SegmentMembership) -> bool:
    if isinstance(members, DefinedSegment):
        return members.is_salted
    return isinstance(members, SaltedMembership)


def _table(members: SegmentMembership) -> str:
    return base64.b64encode(members.to_bytes()).decode("ascii")


class InvalidRuleset(ValueError):
    """A document that is not a ruleset this core can decide from (a newer format, or a rule
    type it does not know): the client keeps the ruleset it has."""


def ruleset_from_json(document: Any) -> Ruleset:
    """The ``Ruleset`` of a ``ruleset_to_json`` document; ``InvalidRuleset`` otherwise."""
    try:
        if not isinstance(document, dict) or document.get("format") not in FORMATS:
            raise InvalidRuleset(f"not a ruleset of format {' or '.join(map(str, FORMATS))}")
        flags = {}
        for raw in document["flags"]:
            rules = tuple(rule_from_json(rule) for rule in raw["rules"])
            flag = Flag(raw["key"], bool(raw["enabled"]), bool(raw["archived"]), rules)
            flags[flag.key] = flag
        salt = base64.b64decode(document["segmentSalt"], validate=True)
        if len(salt) != SALT_BYTES:
            raise InvalidRuleset(f"segmentSalt is {len(salt)} bytes, not {SALT_BYTES}")
        segments = {key: _segment_from_json(raw, salt) for key, raw in document["segments"].items()}
        return Ruleset(
            str(document["environmentId"]), int(document["version"]), flags, segments, salt
        )
    except InvalidRuleset:
        raise
    except (KeyError, TypeError, ValueError, RuleError, binascii.Error) as exc:
        raise InvalidRuleset(f"malformed ruleset: {exc}") from None


def _segment_from_json(raw: dict[str, Any], salt: bytes) -> SegmentMembership:
    """A shipped segment: its table, and its excluded table and conditions when it has any."""
    listed = SaltedMembership.from_table(base64.b64decode(raw["table"], validate=True), salt)
    if "conditions" not in raw:
        return listed
    excluded = SaltedMembership.from_table(
        base64.b64decode(raw["excludedTable"], validate=True), salt
    )
    return segment_of(listed, excluded, conditions_from_json(raw["conditions"]))
