"""Ships the evaluation core (``flagsight_core``, from ``sdk/core``) inside the SDK's wheel.

The local mode decides with the service's own core. Asking for it by name (a dependency on
``flagsight-core``) would make ``pip install ./sdk/python[local]`` fail, as no index has it,
and would install whatever anyone published under that name on PyPI (dependency confusion).
So the wheel carries the core's package itself, and the ``local`` extra asks PyPI only for
what the core needs (mmh3, numpy).

From the repository the core is ``../core/flagsight_core``; in the SDK's sdist it is the
``flagsight_core`` folder this hook put there, so a wheel built from the sdist carries it too.
An editable install (the repository's development environment) carries nothing: there the
core is its own editable install, and a copy would hide edits to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

CORE_PACKAGE = "flagsight_core"


class CoreInsideHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        build_data["force_include"][str(self._core_source())] = CORE_PACKAGE

    def _core_source(self) -> Path:
        root = Path(self.root)
        for candidate in (root / CORE_PACKAGE, root.parent / "core" / CORE_PACKAGE):
            if (candidate / "__init__.py").is_file():
                return candidate
        raise FileNotFoundError(
            f"{CORE_PACKAGE} not found beside the SDK ({root / CORE_PACKAGE}) nor in "
            f"{root.parent / 'core'}: build the SDK from the repository or from its sdist"
        )
