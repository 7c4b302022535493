"""The native fast path of a single evaluate (and of the sealer's frame loop), and whether
this process has it.

Under load the server multiplies the cost of every Python step of a request (between two
requests gunicorn's own Python runs, and the next request finds little in the caches), so the
few microseconds a single evaluate spends deciding, signing its evaluation id and encoding its
event-log frame cost far more in the server than in-process (``docs/benchmarks.md``).
``fastpath.serve_one`` does those three in one C call and returns exactly what the Python path
builds: the same outcome and rule, the same id prefix for the same nonce, the same frame bytes
(``tests/native/test_fastpath.py`` checks each against the Python path).

``fastpath.buckets`` and ``fastpath.identifier_hashes`` hash a bulk request's identifiers in
one call each (a percentage rule's buckets, a segment table's keys), which the server plugs
into the core (``flagsight_core.hashing.use_batch_hashing``): about half of a plain
10,000-user request's work was encoding each identifier and calling mmh3 for it.

``fastpath.batch_bodies`` is the sealer's loop over a segment's ordinary frames (framing and
crc), for ``api.eventlog.frames.iter_runs``; the sealing tests compare both forms with a
reference decoder over random segments, torn and damaged ones among them.

The Python path stays the reference and the fallback: it serves when the module is not built
(no C compiler at install time), when ``FLAGSIGHT_NATIVE=0``, for any request the native
call refuses (an identifier that is not valid UTF-8, such as a lone surrogate), and for a
flag that uses a rule type ``fastpath.c`` does not implement: a rule type's ``native_kind``
(``flagsight_core.rules``) is its number in ``Flag.plan``, and a flag with a rule whose type
has none has no plan (``Flag.plan`` is None), so ``EvaluationServer.serve_one`` does not call
the C code for it.

A segment of conditions (contract 12) is decided in C by its lists and the request's
attributes (``serve_one``'s last argument), each condition by the core's own test of the
attribute's value (``DefinedSegment.native_plan``, ``conditions.hold_plan``): the walk is C, the
operators' meaning stays written once, in the core.

``fastpath.attribute_columns`` reads a bulk request's attributes (``attribute_columns.c``)
straight into a list per attribute name, a row per user (``flagsight_core.AttributeColumns``),
which the conditions read as their columns: no dict per user, every limit and name checked as
it reads. 10,000 users of seven attributes take 2.8 ms against msgspec's 5.3 ms into dicts,
and building the conditions' columns from those dicts is gone. Given a dict, it also says
each column's kinds (the types of its values, as it saw them), so a condition chooses its way
without looking at every value again; given another, each column of at most 255 distinct
strings, numbers and booleans coded (``flagsight_core.context.CodedColumn``: the distinct
values and a byte per row), so a condition on a country or a plan decides each distinct value
once and reads its answers out by the codes, and a repeated value is one object, not one per
user. With it and two smaller changes, the benchmark's 10,000-user request with attributes went
from 16.5-17.5 ms of the workers' CPU to 13.5-13.9 ms (``python -m bench.run --only
bulk-attributes``, ``bench/history.md``).
It takes only the common shape
and hands anything else on (None) to msgspec, which decodes and words the body as before;
``tests/native/test_attribute_columns.py`` holds it to msgspec's reading over random and
damaged bodies and at every limit.

``expressions.compile`` is a ``MATCHES`` expression compiled by RE2 natively
(``expressions.cc``, linked to Debian's ``libre2``), which the server plugs in as the core's
(``flagsight_core.conditions.use_expressions``): a single evaluate's search is a C call of
about 0.1 µs where google-re2's binding takes 1.4 µs, and a bulk request's column of 10,000
e-mail addresses is one call of 0.6 ms where the core's loop takes 7 ms. It replaced Arrow's
RE2 kernel for columns, which cost pyarrow in every worker (34 MB of resident memory each);
the core's own RE2 serves where the module is not built.
"""

from __future__ import annotations

import os
import re
from types import ModuleType
from typing import Any


def _load() -> ModuleType | None:
    if os.environ.get("FLAGSIGHT_NATIVE", "1") == "0":
        return None
    from flagsight_core.segments import DefinedSegment, SegmentMembership

    try:
        from api.native import _fastpath

        _fastpath.register_membership(SegmentMembership)
        _fastpath.register_defined_segment(DefinedSegment)
    except (ImportError, AttributeError):  # not built, or built from an older fastpath.c
        return None
    return _fastpath


fastpath: ModuleType | None = _load()
"""``api.native._fastpath`` when built and not switched off, else None."""


def _load_expressions() -> ModuleType | None:
    if os.environ.get("FLAGSIGHT_NATIVE", "1") == "0":
        return None
    try:
        from api.native import _expressions
    except ImportError:  # not built: no C++ compiler or no libre2-dev at install time
        return None
    return _expressions


_expressions = _load_expressions()

_TABLE_DEPENDENT = re.compile(r"\\[pP]|\(\?[A-Za-z-]*i")
"""A Unicode class (``\\p``, ``\\P``) or case folding (an ``i`` flag): the two things whose meaning
is a Unicode table, which RE2 releases update (Debian's RE2 of 2022 does not know the letters of
Unicode 15.1 that google-re2's of 2025 does). Matched loosely: a false alarm only costs the
native search."""


def compile_expression(source: str) -> Any:
    """``source`` compiled by the native RE2, or None where the core's own should decide it:
    where this RE2 refuses it, or where its meaning rests on a Unicode table
    (``_TABLE_DEPENDENT``), so that the service answers as google-re2 does, and as an
    application's local mode, which has google-re2 alone, does."""
    if _TABLE_DEPENDENT.search(source):
        return None
    return _expressions.compile(source)  # type: ignore[union-attr]


expressions = compile_expression if _expressions is not None else None
"""``compile_expression`` when the module is built and not switched off, else None: the core's
``ExpressionCompiler`` (``flagsight_core.conditions.use_expressions``)."""
