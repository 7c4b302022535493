"""Running a function in several forked processes at once and collecting what each returns."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any


def _put_result(out: mp.Queue, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    out.put(target(*args))


def run_forked(
    target: Callable[..., Any], arguments: Sequence[tuple[Any, ...]], timeout_s: float = 120
) -> list[Any]:
    """``target(*args)`` in one forked process per ``args``, all at once; their results, in
    the order they finished."""
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_put_result, args=(out, target, args)) for args in arguments]
    for p in procs:
        p.start()
    results = [out.get(timeout=timeout_s) for _ in procs]
    for p in procs:
        p.join()
    return results
