"""``HostSlots``: a bound per name across the processes of a host, freed when a holder dies."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

from api.infra.host_slots import HostSlots


def _hold(directory: Path, name: str, count: int, ready) -> None:
    slots = HostSlots(directory, 3)
    held = [slots.take(name) for _ in range(count)]
    ready.put(sum(slot is not None for slot in held))
    time.sleep(60)  # until killed


def test_the_limit_holds_across_processes_and_a_killed_holder_frees_its_slots(tmp_path) -> None:
    context = multiprocessing.get_context("fork")
    ready = context.Queue()
    other = context.Process(target=_hold, args=(tmp_path, "key_a", 2, ready))
    other.start()
    try:
        assert ready.get(timeout=30) == 2
        slots = HostSlots(tmp_path, 3)
        mine = slots.take("key_a")
        assert mine is not None and slots.take("key_a") is None  # 2 there, 1 here: full
        assert slots.take("key_b") is not None  # another name counts apart
        os.kill(other.pid, signal.SIGKILL)
        other.join(30)
        taken = [slots.take("key_a") for _ in range(3)]
        assert [slot is not None for slot in taken] == [True, True, False]
        assert slots.held("key_a") == 3
        mine.release()
        mine.release()  # once only
        assert slots.held("key_a") == 2
        assert slots.take("key_a") is not None
    finally:
        other.kill()
        other.join(30)


def _count_in_child(slots: HostSlots, name: str, result) -> None:
    result.put((slots.held(name), slots.take(name) is not None))


def test_a_fork_holds_none_of_its_parents_slots(tmp_path) -> None:
    slots = HostSlots(tmp_path, 2)
    first = slots.take("key")
    assert first is not None
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    child = context.Process(target=_count_in_child, args=(slots, "key", result))
    child.start()
    # the child holds nothing, and the parent's slot is still held: one of two is left
    assert result.get(timeout=30) == (0, True)
    child.join(30)
    assert slots.held("key") == 1
