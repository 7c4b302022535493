"""``flagsight serve`` exactly as ``api.cli`` runs it, but loading ``tests.dashboard.asgi_app``.

``cmd_serve`` prepares the data directory and then execs gunicorn on ``api.asgi:app``; this
wrapper swaps only that argument, so the master, worker class and configuration are production's.
"""

from __future__ import annotations

import os
import sys

from api import cli

_real_execv = os.execv


def _execv(path: str, argv: list[str]) -> None:
    _real_execv(
        path, ["tests.dashboard.asgi_app:app" if arg == "api.asgi:app" else arg for arg in argv]
    )


if __name__ == "__main__":
    os.execv = _execv  # type: ignore[assignment]
    sys.exit(cli.main(["serve", *sys.argv[1:]]))
