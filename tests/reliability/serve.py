"""``flagsight serve`` exactly as ``api.cli`` runs it, loading ``tests.reliability.asgi_app``."""

from __future__ import annotations

import os
import sys

from api import cli

_real_execv = os.execv


def _execv(path: str, argv: list[str]) -> None:
    app = "tests.reliability.asgi_app:app"
    _real_execv(path, [app if arg == "api.asgi:app" else arg for arg in argv])


if __name__ == "__main__":
    os.execv = _execv  # type: ignore[assignment]
    sys.exit(cli.main(["serve", *sys.argv[1:]]))
