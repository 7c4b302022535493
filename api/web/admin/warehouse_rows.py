"""Admin resources that answer a flag environment's row of the published warehouse.

The metrics and health endpoints share their checks and their 404: the row exists only once
the insights pipeline has aggregated that flag environment. The flag itself need not exist
now: the warehouse also has rows for keys evaluated while missing, or deleted since.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import falcon.asgi
from flagsight_core.contract import FLAG_KEY_MAX

from api.web.admin.base import AdminResource
from api.web.admin.environments import existing_environment
from api.web.errors import BadRequest, NotFound
from api.web.jsonio import write_json

RowReader = Callable[[Path, str, str], Any]


def camel(name: str) -> str:
    """A warehouse column's name as the API writes fields: ``avg_latency_ms`` ->
    ``avgLatencyMs``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def camel_row(row: dict[str, Any]) -> dict[str, Any]:
    """A warehouse row with its columns named as the API writes fields."""
    return {camel(name): value for name, value in row.items()}


def daily_row(row: dict[str, Any]) -> dict[str, Any]:
    """One day of ``flag_environment_daily``, camelCase, its date as ``date``."""
    return {("date" if name == "evaluation_date" else camel(name)): v for name, v in row.items()}


class WarehouseRowResource(AdminResource):
    """``GET`` of one warehouse row; subclasses name it and say how it is answered."""

    what: ClassVar[str]
    """What the row holds, for the 404's message ("metrics", "health")."""

    def read_row(self, warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
        raise NotImplementedError

    def answer(self, row: Any) -> Any:
        return row

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        if not 0 < len(flag_key) <= FLAG_KEY_MAX:
            raise BadRequest(f"'flagKey' must be 1 to {FLAG_KEY_MAX} characters long")
        await existing_environment(self, env_id)
        warehouse = self.services.settings.warehouse_path
        row = await self.read(self.read_row, warehouse, env_id, flag_key)
        if row is None:
            raise NotFound(
                f"No {self.what} for flag '{flag_key}' in environment '{env_id}' yet:"
                " the insights pipeline has not aggregated it"
            )
        write_json(resp, self.answer(row))
