"""This host's stable identity: a random id made once and kept in ``FLAGSIGHT_DATA_DIR``.

Several hosts share one lake bucket. Each names its sealed objects after this id and the
write-ahead segment they come from, so two hosts never write the same object name, and any
process of one host that seals a segment again (after a crash) writes the same name as the
first attempt did. The id must therefore survive restarts (it lives beside the write-ahead log,
in the data directory) and must not be shared: never copy a data directory to a second host
with its ``host-id`` file.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path

_VALID = re.compile(r"[0-9a-f]{32}")


def host_id(path: Path) -> str:
    """The id stored at ``path``, made on first use. Concurrent first uses agree on one id."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
    fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, f"{uuid.uuid4().hex}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(candidate, path)  # fails if another process got there first: use theirs
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(candidate)
    _fsync_dir(path.parent)
    return _read(path)


def _read(path: Path) -> str:
    text = path.read_text().strip()
    if not _VALID.fullmatch(text):
        raise ValueError(f"{path} holds no host id (32 hex digits); delete it only if no "
                         "write-ahead segment of this host is left unsealed")  # fmt: skip
    return text


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
