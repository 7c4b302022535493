"""The contract's names that several layers share, each written once: the key pattern, the
limits, and the codes an answer carries.

Level 0 (``docs/architecture.md``): imports nothing of the project, so every layer may read it.
The validators, their messages and the OpenAPI document (``api/web/openapi``) derive from these
names; a limit changed here changes all of them. The SDK (``sdk/python``) imports nothing of
``api`` and keeps its own copies of the few it needs (its tests compare them with these).
"""

from __future__ import annotations

import re
from enum import StrEnum

# --- keys -------------------------------------------------------------------------------------

KEY_MAX = 128
"""Flag, segment and environment keys: 1 to this many characters (contract section 2)."""
KEY_CHARACTERS = "A-Za-z0-9._-"
"""What a key is made of, as a regular expression's character class."""
KEY_SPEC = f"[{KEY_CHARACTERS}]{{1,{KEY_MAX}}}"
"""The key pattern as the contract and the admin API's messages write it."""
KEY_PATTERN = re.compile(KEY_SPEC)
"""The key pattern; use ``fullmatch``. Keys are case-sensitive."""
KEY_SCHEMA_PATTERN = f"^{KEY_SPEC}$"
"""The key pattern as a JSON Schema ``pattern`` (anchored) in the OpenAPI document."""
KEY_IN_WORDS = f"1 to {KEY_MAX} letters, digits, '.', '_' or '-'"
"""The key pattern in words, for people (the dashboard's forms)."""

# --- limits (contract sections 2, 3 and 5) ----------------------------------------------------

FLAG_KEY_MAX = KEY_MAX
"""``flagKey`` of an evaluate request: 1 to this many characters (any characters)."""
USER_IDENTIFIER_MAX = 1024
"""``userIdentifier``, a bulk request's ``userIdentifiers`` and a segment's identifiers."""
SDK_MAX = 256
"""``sdk`` of an evaluate request, at most this many characters."""
ERROR_TYPE_MAX = 256
"""``errorType`` of a feedback event, at most this many characters."""
BULK_MAX_USERS = 10_000
"""``userIdentifiers`` of one bulk evaluate (more: 400)."""
BULK_MAX_FEEDBACKS = 500
"""``feedbacks`` of one bulk feedback request (more: 400)."""
TRACK_MAX_EVENTS = 500
"""``events`` of one ``POST /v1/track`` (more: 400; contract 13)."""
TRACK_MAX_AGE_S = 24 * 3600
"""A tracked event's ``at`` is at most this long before the request arrives."""
TRACK_MAX_AHEAD_S = 5 * 60
"""A tracked event's ``at`` is at most this long after the request arrives: the sender's clock
may run a little ahead of the service's."""
TRACK_SOURCE_HEADER = "Flagsight-Source"
"""The header in which a ``POST /v1/track`` client says it is the SDK (``sdk``) or its
OpenFeature provider (``provider``); without it the events' ``source`` is ``http``."""
LOCAL_REPORT_MAX = 10_000
"""``evaluations`` of one report of local evaluations (``POST /v1/local/report``; more: 400)."""
LOCAL_GRANT_MAX = 65_535
"""Quota one grant to a local SDK carries at most: one signed block of evaluation ids."""
MAX_SEGMENT_SIZE = 1_000_000
"""Identifiers of one segment."""
MAX_RULES = 100
"""Rules of one flag."""
MAX_NAME_LENGTH = 200
"""Names of organizations, environments and API keys."""

# --- attributes and conditions (contract section 12) ------------------------------------------

ATTRIBUTE_NAME_MAX = 64
"""An attribute's name: 1 to this many of the key's characters."""
ATTRIBUTE_NAME_SPEC = f"[{KEY_CHARACTERS}]{{1,{ATTRIBUTE_NAME_MAX}}}"
"""The attribute name pattern as the contract and the messages write it."""
ATTRIBUTE_NAME_PATTERN = re.compile(ATTRIBUTE_NAME_SPEC)
"""The attribute name pattern; use ``fullmatch``. Names are case-sensitive."""
ATTRIBUTES_MAX = 50
"""Attributes of one user."""
ATTRIBUTE_STRING_MAX = 1024
"""Characters of an attribute's string value, and of each string of an array value."""
ATTRIBUTE_ARRAY_MAX = 100
"""Strings of an attribute's array value."""
USER_IDENTIFIER_ATTRIBUTE = "userIdentifier"
"""The reserved attribute name: in a condition it is the user's identifier; a request may not
send an attribute of that name."""
CONDITIONS_MAX = 20
"""Conditions of one segment."""
CONDITION_VALUES_MAX = 100
"""Values of one condition."""
CONDITION_PATTERN_MAX = 256
"""Characters of a ``MATCHES`` condition's regular expression."""
CONDITION_PROGRAM_MAX = 2_500
"""RE2 instructions a new ``MATCHES`` expression may compile to. RE2 matches in time linear in
the input, times the program's size where its DFA gives up (its state cache full) and its NFA
runs: ``(.{0,100}){0,10}x`` (18 characters, 9,014 instructions) took 56 ms over 1 KB, so
10,000 users of a bulk request 7 minutes. At 2,500 the worst measured is about 1.6 ms over
1 KB (``a.{300}x``, 2,406 instructions); a length bound as long as an expression can be,
``^.{0,256}$``, compiles to 2,306 (21 µs over 1 KB), and 256 characters of alternatives to
about 200. Checked where a segment is written, not where one is read: a segment stored before
keeps being served."""

# --- codes ------------------------------------------------------------------------------------


class ErrorType(StrEnum):
    """An evaluation's error (``EvaluateResponse.error.type``)."""

    FLAG_NOT_FOUND = "FLAG_NOT_FOUND"
    FLAG_ARCHIVED = "FLAG_ARCHIVED"
    FLAG_DISABLED = "FLAG_DISABLED"
    PLAN_LIMIT_EXCEEDED = "PLAN_LIMIT_EXCEEDED"


ERROR_MESSAGES: dict[ErrorType, str] = {
    ErrorType.FLAG_NOT_FOUND: "Flag not found",
    ErrorType.FLAG_ARCHIVED: "Flag archived",
    ErrorType.FLAG_DISABLED: "Flag disabled",
    ErrorType.PLAN_LIMIT_EXCEEDED: "Plan limit exceeded. Upgrade your plan to continue.",
}
"""``EvaluateResponse.error.message`` of each error type."""


class OfrepReason(StrEnum):
    """The OpenFeature reasons OFREP answers carry (contract section 7). A rule type's own
    reason is its ``ofrep_reason`` (``flagsight_core.rules``)."""

    STATIC = "STATIC"
    TARGETING_MATCH = "TARGETING_MATCH"
    SPLIT = "SPLIT"
    DEFAULT = "DEFAULT"
    """No rule matched."""
    DISABLED = "DISABLED"
    """The flag is disabled or archived."""


class OfrepErrorCode(StrEnum):
    """The OpenFeature error codes OFREP failures carry."""

    PARSE_ERROR = "PARSE_ERROR"
    TARGETING_KEY_MISSING = "TARGETING_KEY_MISSING"
    INVALID_CONTEXT = "INVALID_CONTEXT"
    GENERAL = "GENERAL"
    FLAG_NOT_FOUND = "FLAG_NOT_FOUND"


class Decision(StrEnum):
    """A release-health comparison's ``decision`` (contract section 9)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    INCONCLUSIVE = "inconclusive"
    WITHHELD = "withheld"


class WithheldReason(StrEnum):
    """Why a decision is withheld (``withheldReason``): each one a condition under which no
    interval can be trusted."""

    SAMPLE_RATIO_MISMATCH = "sample_ratio_mismatch"
    BELOW_MINIMUM_SAMPLE = "below_minimum_sample"
    QUANTILE_UNBOUNDED = "quantile_unbounded"
    NO_PERCENTAGE_RULE = "no_percentage_rule"
