"""Facts about other processes on this machine."""

from __future__ import annotations

import os
import resource


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open descriptors to its hard limit; the new limit.

    Every connection holds a descriptor, and the common soft limit (1,024) is far below what
    a worker with ``worker_connections = 1000`` and its event log need: past it, fresh clients
    are refused and log segments cannot be opened. The hard limit is what the operator allows.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # an unlimited hard limit is above what Linux allows
        return soft
    return hard
