"""``GET .../flags/{flag_key}/health``: release health as contract section 9 shapes it
(``api.controlplane.health_document``), from the warehouse's ``flag_health`` row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import falcon

from api.controlplane.health_document import health_answer
from api.web.admin.auth import require_admin
from api.web.admin.warehouse_rows import WarehouseRowResource


def read_flag_health(warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
    """The warehouse row, or None when there is none (or no warehouse file yet)."""
    from warehouse.read import flag_health

    return flag_health(warehouse_path, environment_id, flag_key)


@falcon.before(require_admin)
class FlagHealthResource(WarehouseRowResource):
    """``.../flags/{flag_key}/health``: the latest aggregation; 404 before the first one."""

    what = "health"

    def read_row(self, warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
        return read_flag_health(warehouse_path, environment_id, flag_key)

    def answer(self, row: Any) -> Any:
        return health_answer(row)
