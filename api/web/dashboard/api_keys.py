"""The API Keys page of an environment: create (shown once), list without secrets, revoke.

A new key is shown only in the answer to the form that created it: it is rendered into that
response (``Cache-Control: no-store``), never put in a URL, cookie or redirect, and the store
keeps only its hash, so reloading or going back cannot show it again.
"""

from __future__ import annotations

import contextlib

import falcon
import falcon.asgi
from flagsight_core.contract import MAX_NAME_LENGTH

from api.controlplane.errors import NotFoundError
from api.web.dashboard.base import PREFIX, Page, environment_crumbs, signed_in


def api_keys_path(environment_id: str) -> str:
    return f"{PREFIX}/environments/{environment_id}/api-keys"


@falcon.before(signed_in)
class ApiKeysPage(Page):
    """``/dashboard/environments/{env_id}/api-keys``; ``POST`` creates a key."""

    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await self._show(req, resp, env_id)

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, env_id: str
    ) -> None:
        await self.environment(env_id)
        name = (await self.form(req)).get("name").strip()
        if len(name) > MAX_NAME_LENGTH:
            await self._show(req, resp, env_id, status=400, errors={
                "name": f"Use at most {MAX_NAME_LENGTH} characters."})  # fmt: skip
            return
        created = await self.write(self.store.create_api_key, env_id, name)
        await self._show(req, resp, env_id, status=201, created=created)

    async def _show(
        self,
        req: falcon.asgi.Request,
        resp: falcon.asgi.Response,
        env_id: str,
        *,
        status: int = 200,
        errors: dict[str, str] | None = None,
        created: object = None,
    ) -> None:
        environment, organization = await self.environment(env_id)
        keys = await self.read(self.store.list_api_keys, env_id)
        self.render(
            req, resp, "api_keys.html", status=status, environment=environment,
            organization=organization, keys=keys, created=created, errors=errors or {},
            revoked=req.get_param("revoked"), section="api-keys",
            crumbs=[*environment_crumbs(environment, organization),
                    ("API keys", api_keys_path(env_id))],
        )  # fmt: skip


@falcon.before(signed_in)
class RevokeApiKeyAction(Page):
    """``POST /dashboard/api-keys/{key_id}/revoke``: the key answers 401 within a second."""

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, key_id: str
    ) -> None:
        key = await self.read(self.store.get_api_key, key_id)
        if key is None:
            raise self.not_found(f"API key '{key_id}'")
        # Revoked meanwhile (another tab, the admin API): the outcome is the same.
        with contextlib.suppress(NotFoundError):
            await self.write(self.store.revoke_api_key, key_id)
        raise falcon.HTTPSeeOther(f"{api_keys_path(key.environment_id)}?revoked={key.id}")
