"""Slots counted across every process of one host: a bound that holds for all of gunicorn's
workers together (at most ``limit`` event streams of one API key on a host, contract 11).

Each name's slots are the bytes of one file under ``directory``, and a slot is held by a POSIX
record lock (``fcntl.lockf``) on its byte. The kernel releases a process's record locks when it
exits, however it exits, so a killed worker leaves no slot taken and there is nothing to clean
up; no shared memory, no server. No library offers this (``filelock`` and ``portalocker`` lock
whole files, one holder each).

Two properties of record locks shape the code: they belong to a process, not to a file
descriptor (a process that locks a byte it already holds succeeds again), so each process
remembers the bytes it holds; and closing any descriptor of the file releases every lock the
process holds on it, so a process keeps one descriptor per name while it holds a slot of it.
A fork gets none of its parent's locks: a child starts with nothing held.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path


class Slot:
    """One held slot; ``release`` gives it back (once; later calls do nothing)."""

    __slots__ = ("_index", "_name", "_owner")

    def __init__(self, owner: HostSlots, name: str, index: int):
        self._owner, self._name, self._index = owner, name, index

    def release(self) -> None:
        owner, self._owner = self._owner, None  # type: ignore[assignment]
        if owner is not None:
            owner._release(self._name, self._index)


class HostSlots:
    """Up to ``limit`` slots per name, counted over every process of the host that uses
    ``directory``; see the module docstring."""

    def __init__(self, directory: Path, limit: int):
        self._directory = directory
        self.limit = limit
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._held: dict[str, tuple[int, set[int]]] = {}
        """By name: this process's descriptor of the name's file and the bytes it locked."""

    def take(self, name: str) -> Slot | None:
        """A free slot of ``name``, or None when all ``limit`` are held on this host."""
        with self._lock:
            self._forget_parent()
            fd, held = self._held.get(name) or (self._open(name), set())
            for index in range(self.limit):
                if index in held:
                    continue
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, index)
                except OSError:  # another process holds it
                    continue
                held.add(index)
                self._held[name] = (fd, held)
                return Slot(self, name, index)
            if not held:
                os.close(fd)
            return None

    def held(self, name: str) -> int:
        """Slots of ``name`` this process holds."""
        with self._lock:
            self._forget_parent()
            entry = self._held.get(name)
            return len(entry[1]) if entry else 0

    def _release(self, name: str, index: int) -> None:
        with self._lock:
            if os.getpid() != self._pid:
                return  # the parent's slot, seen from a fork: the child holds no lock on it
            entry = self._held.get(name)
            if entry is None or index not in entry[1]:
                return
            fd, held = entry
            held.discard(index)
            if held:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, index)
            else:  # closing the descriptor releases the last lock
                del self._held[name]
                os.close(fd)

    def _open(self, name: str) -> int:
        self._directory.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(name.encode()).hexdigest()[:32]
        return os.open(self._directory / digest, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _forget_parent(self) -> None:
        """In a forked child, the parent's descriptors are left open (closing them here would
        release nothing of the child's) and its slots forgotten."""
        pid = os.getpid()
        if pid != self._pid:
            self._pid, self._held = pid, {}
