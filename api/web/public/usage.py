"""``GET /v1/usage``: an API key reads its organization's usage this month, in the body of the
admin usage call (``GET /admin/v1/organizations/{orgId}/usage``)."""

from __future__ import annotations

import falcon.asgi

from api.metering.meter import month_of
from api.serving.services import Services
from api.web import usage_answer
from api.web.auth import authenticate_api_key
from api.web.errors import Unauthorized
from api.web.jsonio import write_json
from api.web.public.evaluate import key_environment


class UsageResource:
    """``GET /v1/usage``: the key's organization's usage, the admin usage call's body."""

    def __init__(self, services: Services):
        self._services = services

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        key = authenticate_api_key(req, self._services.config)
        key_environment(self._services, key)  # a key whose environment is gone is not valid
        organization = self._services.config.organization(key.organization_id)
        if organization is None:  # nor one whose organization is (the 401 OpenAPI documents)
            raise Unauthorized()
        month = month_of(self._services.clock())
        evaluations = usage_answer.counted(self._services.meter, organization.id, month)
        write_json(resp, usage_answer.usage(organization, month, evaluations))
