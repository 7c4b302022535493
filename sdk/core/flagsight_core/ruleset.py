"""An environment's ruleset as JSON: what ``GET /v1/ruleset`` serves and a local SDK decides
from (contract section 11).

Both directions live here, in the pure core, so the service that writes a ruleset and the SDK
that reads it share one definition: flags as the admin API writes their rules, and each
segment a rule names as its membership table (``SegmentMembership.to_bytes``, base64), so a
local client answers segment rules exactly as the service does without ever holding the
segment's identifiers.

Shape (``format`` 1)::

    {"format": 1, "environmentId": "env_…", "version": 7,
     "flags": [{"key": "…", "enabled": true, "archived": false, "rules": [rule, …]}, …],
     "segments": {"beta": {"members": 3, "table": "<base64 of little-endian uint64 slots>"}}}
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flagsight_core.model import Flag, RuleError, rule_from_json, rule_to_json
from flagsight_core.segments import SegmentMembership

FORMAT = 1


@dataclass(frozen=True, slots=True)
class Ruleset:
    """One environment's flags and the segments they name, at one configuration version."""

    environment_id: str
    version: int
    flags: Mapping[str, Flag]
    segments: Mapping[str, Container[str]]


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
            table = base64.b64encode(members.to_bytes()).decode("ascii")
            segments[key] = {"members": len(members), "table": table}
    return {
        "format": FORMAT,
        "environmentId": ruleset.environment_id,
        "version": ruleset.version,
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


class InvalidRuleset(ValueError):
    """A document that is not a ruleset this core can decide from (a newer format, or a rule
    type it does not know): the client keeps the ruleset it has."""


def ruleset_from_json(document: Any) -> Ruleset:
    """The ``Ruleset`` of a ``ruleset_to_json`` document; ``InvalidRuleset`` otherwise."""
    try:
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise InvalidRuleset(f"not a format-{FORMAT} ruleset")
        flags = {}
        for raw in document["flags"]:
            rules = tuple(rule_from_json(rule) for rule in raw["rules"])
            flag = Flag(raw["key"], bool(raw["enabled"]), bool(raw["archived"]), rules)
            flags[flag.key] = flag
        segments = {
            key: SegmentMembership.from_bytes(base64.b64decode(raw["table"], validate=True))
            for key, raw in document["segments"].items()
        }
        return Ruleset(str(document["environmentId"]), int(document["version"]), flags, segments)
    except InvalidRuleset:
        raise
    except (KeyError, TypeError, ValueError, RuleError, binascii.Error) as exc:
        raise InvalidRuleset(f"malformed ruleset: {exc}") from None
