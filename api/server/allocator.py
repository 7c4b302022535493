"""glibc ``malloc`` settings for the API's worker processes.

A 10,000-user bulk answer is a string of about a megabyte, encoded to bytes, next to a 200 KB
request body. glibc serves every allocation above its mmap threshold (128 KiB at first) with
freshly mapped pages and unmaps them on free, so each such buffer pays a page fault per 4 KiB
on first touch, every request: measured, that was two thirds of the time to encode a bulk
answer. Raising the threshold serves these buffers from the heap, whose pages stay mapped from
one request to the next; the trim threshold bounds how much freed memory the heap keeps.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("flagsight.allocator")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024


def tune_allocator() -> bool:
    """Apply the thresholds where the C library is glibc; False (and nothing changed) elsewhere."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    if not applied:
        log.warning("malloc thresholds not applied", extra={"event": "allocator_not_tuned"})
    return applied
