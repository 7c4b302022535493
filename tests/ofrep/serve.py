"""``flagsight serve`` exactly as ``api.cli`` runs it, but loading ``tests.ofrep.asgi_app``.

``cmd_serve`` prepares the data directory and then execs gunicorn on ``api.asgi:app``; this
wrapper only swaps that one argument, so the master, the worker class and the configuration
are the production ones.
"""

from __future__ import annotations

import os
import sys

from api import cli

_real_execv = os.execv


def _execv(path: str, argv: list[str]) -> None:
    _real_execv(
        path, ["tests.ofrep.asgi_app:app" if arg == "api.asgi:app" else arg for arg in argv]
    )


if __name__ == "__main__":
    os.execv = _execv  # type: ignore[assignment]
    sys.exit(cli.main(["serve", *sys.argv[1:]]))
