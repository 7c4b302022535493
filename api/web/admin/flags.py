"""Flags of an environment: put (create or replace), read, list, delete, and their metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import falcon
import falcon.asgi

from api.web.admin import fields, views
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.environments import existing_environment
from api.web.admin.warehouse_rows import WarehouseRowResource
from api.web.errors import NotFound
from api.web.jsonio import write_json


@falcon.before(require_admin)
class FlagsResource(AdminResource):
    """``/admin/v1/environments/{env_id}/flags``: every flag, by key."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await existing_environment(self, env_id)
        flags = await self.read(self.store.list_flags, env_id)
        write_json(resp, views.items(map(views.flag, flags)))


@falcon.before(require_admin)
class FlagResource(AdminResource):
    """``/admin/v1/environments/{env_id}/flags/{flag_key}``; PUT answers 201 when created."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await existing_environment(self, env_id)
        flag = await self.read(self.store.get_flag, env_id, flag_key)
        if flag is None:
            raise NotFound(f"Flag '{flag_key}' does not exist in environment '{env_id}'")
        write_json(resp, views.flag(flag))

    async def on_put(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        fields.key_param(flag_key, "flagKey")
        raw = await self.body(req)
        body, meta = fields.flag_body(raw), fields.flag_meta(raw)
        flag, created = await self.write(
            self.store.put_flag, env_id, flag_key, body.enabled, body.archived, body.rules,
            meta=meta,
        )  # fmt: skip
        write_json(resp, views.flag(flag), status=201 if created else 200)

    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str, flag_key: str
    ) -> None:
        await self.write(self.store.delete_flag, env_id, flag_key)
        resp.status = falcon.HTTP_204


def read_flag_metrics(warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
    """The warehouse row, or None when there is none or no warehouse module/file yet."""
    try:
        from warehouse.read import flag_metrics
    except ModuleNotFoundError as exc:
        if exc.name not in ("warehouse", "warehouse.read"):
            raise
        return None
    return flag_metrics(warehouse_path, environment_id, flag_key)


@falcon.before(require_admin)
class FlagMetricsResource(WarehouseRowResource):
    """``.../flags/{flag_key}/metrics``: the latest aggregation; 404 before the first one."""

    what = "metrics"

    def read_row(self, warehouse_path: Path, environment_id: str, flag_key: str) -> Any:
        return read_flag_metrics(warehouse_path, environment_id, flag_key)

    def answer(self, row: Any) -> Any:
        return views.flag_metrics(row)
