"""How long a test waits for what the contract promises within a time: generously.

The contract's figures ("within one second" for a change to reach every worker, host and local
client) are measured by ``make bench`` (``docs/benchmarks.md``), on a machine doing nothing
else. A test checks that the thing happens, and waits up to ``PROMPTLY_S`` for it: five times
the promise, so that a machine loaded by other work (a shared CI runner, two CPU-bound
processes beside the suite) still passes, while a change that never arrives, or one that waits
on a multi-second timeout, still fails.
"""

from __future__ import annotations

PROMPTLY_S = 5.0
"""The bound of a test's wait for something the contract promises within one second."""
