"""Counts in words, agreeing with their number: ``1 organization``, ``2 organizations``.

The one helper for every message that says how many of something there are (the CLI's, the
dashboard's, the guardian's reasons), so that none says "1 users". Pure; imports nothing.
"""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` with thousands separators and ``noun`` in the number it takes: ``1 user``,
    ``0 users``, ``4,300 users``. ``plural`` for a noun that does not add an s (``1 entry``,
    ``2 entries``); the noun may be a phrase whose last word agrees (``1 more user``)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
