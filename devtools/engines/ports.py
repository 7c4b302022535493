"""Free loopback ports for the engines, test servers and benchmarks this project starts."""

from __future__ import annotations

import contextlib
import socket


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports nothing listens on now.

    Every socket stays bound until all are picked: ports asked for one after another, each
    released before the next, can come back twice (two SeaweedFS listeners were once given
    the same one, and the second could not start).
    """
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def free_port() -> int:
    return free_ports(1)[0]
