"""What every check reports of the rows that fail it."""

import dagster as dg

_SAMPLE = 20


def sample(rows: list[tuple]) -> dg.MetadataValue:
    """At most 20 offending rows, as JSON metadata."""
    return dg.MetadataValue.json([list(map(str, row)) for row in rows[:_SAMPLE]])
