"""Each rule of the layer test fails on a violation injected into a module's source: the test
has no blind spot for these (``tests/test_architecture.py``, ``violations``)."""

from __future__ import annotations

import pytest

from tests.test_architecture import all_imports, import_cycles, violations

CLEAN = {
    "api.observability.logs": "from api.settings import Settings\n",
    "api.web.dashboard.pages": "from api.web.admin import views\nfrom api.web.errors import NotFound\n",
    "api.web.public.thing": "from api.web.jsonio import write_json\nimport falcon\n",
    "warehouse.thing": "import duckdb\nimport pyarrow.fs\n",
    "pipelines.thing": "import dagster\nfrom warehouse.read import flag_metrics\n",
}

INJECTED = {
    "a relative import": ("api.web.public.thing", "from ..admin import views\n", "relatively"),
    "a relative import going up": ("api.observability.x", "from ..web import app\n", "level 3"),
    "importlib.import_module": (
        "api.observability.x", "import importlib\nimportlib.import_module('api.web.app')\n",
        "level 3",
    ),
    "__import__": ("api.metering.x", "def f():\n    __import__('api.serving.local')\n", "level 4"),
    "an import up a level": ("api.infra.x", "from api.serving import local\n", "level 3"),
    "a sideways import": ("api.metering.x", "from api.controlplane import store\n", "level 4"),
    "Falcon below the edge": ("api.observability.x", "import falcon.asgi\n", "falcon"),
    "gunicorn in the edge": ("api.web.app", "import gunicorn\n", "gunicorn"),
    "Dagster in the warehouse": ("warehouse.x", "import dagster as dg\n", "dagster"),
    "DuckDB in the edge": ("api.web.dashboard.x", "import duckdb\n", "duckdb"),
    "pyarrow in serving": ("api.serving.x", "from pyarrow import fs\n", "pyarrow"),
    "public into admin": ("api.web.public.x", "from api.web.admin import views\n", "inside the edge"),
    "admin into the dashboard": (
        "api.web.admin.x", "from api.web.dashboard.base import Page\n", "inside the edge",
    ),
    "a route into the app": ("api.web.public.x", "from api.web.app import create_asgi_app\n",
                             "inside the edge"),
    "the core into api.settings": (
        "flagsight_core.rules", "from api.settings import Settings\n", "ships without",
    ),
}  # fmt: skip


@pytest.mark.parametrize("module", CLEAN)
def test_what_the_doc_allows_passes(module: str) -> None:
    assert violations(module, CLEAN[module]) == []


@pytest.mark.parametrize("case", INJECTED)
def test_each_injected_violation_is_found(case: str) -> None:
    module, source, said = INJECTED[case]
    found = violations(module, source)
    assert found and any(said in problem for problem in found), found


def test_a_cycle_closed_by_an_import_inside_a_function_is_found() -> None:
    sources = {
        "api.controlplane.a": "from api.controlplane import b\n",
        "api.controlplane.b": "def f():\n    from api.controlplane import a\n",
    }
    graph = {
        name: {target for target, _ in all_imports(source, name) if target in sources}
        for name, source in sources.items()
    }
    assert import_cycles(graph) == [
        ["api.controlplane.a", "api.controlplane.b", "api.controlplane.a"]
    ]
