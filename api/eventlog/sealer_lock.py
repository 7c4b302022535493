"""The sealer lock: which process of a server seals what the workers write.

A sealer process holds an exclusive ``flock`` on ``run/sealer.lock`` for its whole life; the
kernel drops it when that process dies, however it dies. Workers only probe it: while it is
held they hand closed segments off instead of sealing them (``api.eventlog.segmented``).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from api.settings import Settings

LOCK_NAME = "sealer.lock"


def sealer_lock_path(settings: Settings) -> Path:
    """The file whose ``flock`` says a sealer process is alive for this data directory."""
    return settings.meter_path.parent / LOCK_NAME


class SealerLock:
    """Probe or hold the sealer lock at ``path``."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    def held_elsewhere(self) -> bool:
        """Whether another open file description holds the lock (a live sealer)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # also drops the shared lock if we got it
        return False

    def acquire(self) -> None:
        """Take the lock, waiting for a worker that is probing it; held until ``release``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
