"""gunicorn configuration for ``flagsight serve``.

Worker class: gunicorn's native ``asgi`` worker (``api.server.http_worker`` adds a request-head
timeout, memoised answer heads, the single evaluate answered in the connection's own task, and
the contract's error body on gunicorn's own refusals). No ``pre_request`` or ``post_request``
hook and no access log: with any of them, every request would take gunicorn's slower path. Measured on this
project's 2-core machine with a minimal Falcon app (wrk, 64 keep-alive connections, 2 workers): asgi 32.4k requests/s
with p99 5.8 ms against gthread's 16.3k and 18.9 ms. It keeps connections alive.

The master also runs the event log's sealer process (``api.server.sealer_process``) for
flagsight's app: started before the workers, stopped after them so that it seals what they
handed off on the way out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from api.settings import Settings

_settings = Settings.from_env()
bind = os.environ.get("FLAGSIGHT_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("FLAGSIGHT_WORKERS", "2"))
worker_class = "api.server.http_worker.FlagsightWorker"
worker_connections = 1000
backlog = 2048  # connections the kernel queues while the workers cannot accept (docs/operations.md)
keepalive = _settings.keepalive_s
graceful_timeout = int(os.environ.get("FLAGSIGHT_GRACEFUL_TIMEOUT", "10"))
timeout = _settings.body_timeout_s
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = None
errorlog = "-"
loglevel = os.environ.get("FLAGSIGHT_LOG_LEVEL", "warning")
proc_name = "flagsight"


def post_fork(server, worker) -> None:  # noqa: ANN001 - gunicorn hook signature
    """Large request and answer buffers from the heap, not fresh pages (``api.server.allocator``)."""
    from api.server.allocator import tune_allocator

    tune_allocator()


def pre_fork(server, worker) -> None:  # noqa: ANN001 - gunicorn hook signature
    """Top up the spare metrics files a worker starting on a full disk takes, while there is
    room (``api.observability.metrics.reserve_spare_files``)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from api.observability.metrics import reserve_spare_files

        reserve_spare_files(directory)


def child_exit(server, worker) -> None:  # noqa: ANN001 - gunicorn hook signature
    """Let the Prometheus multi-process collector drop the dead worker's live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


FLAGSIGHT_APP = "api.asgi:app"
SEALER_START_TIMEOUT_S = 10.0
SEALER_STOP_TIMEOUT_S = 120.0
_sealer_pid: int | None = None


def on_starting(server) -> None:  # noqa: ANN001 - gunicorn hook signature
    """Start the sealer and wait until it holds its lock, so workers never load pyarrow."""
    global _sealer_pid
    from api.infra.processes import raise_open_file_limit

    raise_open_file_limit()  # before any worker forks: they inherit it
    if getattr(server.app, "app_uri", None) != FLAGSIGHT_APP:
        return
    from api.eventlog.sealer_lock import SealerLock, sealer_lock_path

    settings = _settings
    argv = [sys.executable, "-m", "api.server.sealer_process", str(os.getpid())]
    _sealer_pid = _spawn_detached(argv)
    lock = SealerLock(sealer_lock_path(settings))
    deadline = time.monotonic() + SEALER_START_TIMEOUT_S
    while not lock.held_elsewhere() and _running(_sealer_pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not lock.held_elsewhere():
        server.log.warning("event log sealer did not start; workers will seal in-process")


def on_exit(server) -> None:  # noqa: ANN001 - gunicorn hook signature
    """After the workers stopped: let the sealer seal what they handed off, then exit."""
    if _sealer_pid is None or not _running(_sealer_pid):
        return
    os.kill(_sealer_pid, signal.SIGTERM)
    deadline = time.monotonic() + SEALER_STOP_TIMEOUT_S
    while _running(_sealer_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _running(_sealer_pid):
        os.kill(_sealer_pid, signal.SIGKILL)  # what is left stays in wal/ for the next start


def _spawn_detached(argv: list[str]) -> int:
    """Start ``argv`` as a grandchild, so the master's children are exactly its workers
    (tools and tests count them); it stays in the master's process group."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read)
            os.write(write, str(subprocess.Popen(argv).pid).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        pid = int(answer.read())
    os.waitpid(child, 0)
    return pid


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphaned grandchild may wait for a reaper that never comes)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
