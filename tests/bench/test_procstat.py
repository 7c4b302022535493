"""``bench.procstat.apart``: the measuring process on one core, a server's every thread on the
others, and everything back where it was afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.procstat import apart

THREADED = """
import threading, time
threading.Thread(target=time.sleep, args=(60,)).start()
print("up", flush=True)
time.sleep(60)
"""


def affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to part")
def test_the_server_and_this_process_part_cores_and_get_them_back() -> None:
    every = os.sched_getaffinity(0)
    server = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline() == "up\n"
        while len(os.listdir(f"/proc/{server.pid}/task")) < 2:
            time.sleep(0.01)
        with apart([server.pid]) as parted:
            assert parted
            assert os.sched_getaffinity(0) == {min(every)}
            assert affinities(server.pid) == [every - {min(every)}] * 2  # both its threads
        assert os.sched_getaffinity(0) == every
        assert affinities(server.pid) == [every] * 2
    finally:
        server.kill()
        server.wait()


def test_a_process_gone_meanwhile_is_skipped() -> None:
    every = os.sched_getaffinity(0)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with apart([gone.pid]):
        pass
    assert os.sched_getaffinity(0) == every
