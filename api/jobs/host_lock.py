"""One process of a host doing a job that every worker could do: a non-blocking ``flock``.

The kernel releases the lock when its holder dies, so another worker takes the job over at its
next try; ``held`` is cheap once the lock is held.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class HostLock:
    def __init__(self, path: Path):
        self._path = path
        self._fd: int | None = None

    def held(self) -> bool:
        """Whether this process holds the lock, taking it if it is free."""
        if self._fd is not None:
            return True
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
