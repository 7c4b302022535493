"""``add_admin_routes(app, services)``: every ``/admin/v1/...`` route of contract sections 5, 9 and 10."""

from __future__ import annotations

import falcon.asgi

from api.controlplane.errors import ControlPlaneError
from api.serving.services import Services
from api.web.admin.api_keys import ApiKeyResource, ApiKeysResource
from api.web.admin.audit import AuditResource, RestoreResource
from api.web.admin.auth import AdminAuth
from api.web.admin.environments import EnvironmentResource, EnvironmentsResource
from api.web.admin.errors import handle_control_plane_error
from api.web.admin.flags import FlagMetricsResource, FlagResource, FlagsResource
from api.web.admin.health import FlagHealthResource
from api.web.admin.organizations import OrganizationResource, OrganizationsResource, UsageResource
from api.web.admin.rollouts import RolloutResource
from api.web.admin.schedules import ScheduleResource, SchedulesResource
from api.web.admin.segments import SegmentResource, SegmentsResource
from api.web.admin.webhooks import WebhookResource, WebhooksResource

PREFIX = "/admin/v1"

ROUTES = {
    "/organizations": OrganizationsResource,
    "/organizations/{org_id}": OrganizationResource,
    "/organizations/{org_id}/usage": UsageResource,
    "/organizations/{org_id}/environments": EnvironmentsResource,
    "/organizations/{org_id}/segments": SegmentsResource,
    "/organizations/{org_id}/segments/{segment_key}": SegmentResource,
    "/environments/{env_id}": EnvironmentResource,
    "/environments/{env_id}/api-keys": ApiKeysResource,
    "/api-keys/{key_id}": ApiKeyResource,
    "/environments/{env_id}/flags": FlagsResource,
    "/environments/{env_id}/flags/{flag_key}": FlagResource,
    "/environments/{env_id}/flags/{flag_key}/metrics": FlagMetricsResource,
    "/environments/{env_id}/flags/{flag_key}/health": FlagHealthResource,
    "/environments/{env_id}/flags/{flag_key}/rollout": RolloutResource,
    "/environments/{env_id}/flags/{flag_key}/schedules": SchedulesResource,
    "/environments/{env_id}/flags/{flag_key}/schedules/{schedule_id}": ScheduleResource,
    "/organizations/{org_id}/audit": AuditResource,
    "/audit/{audit_id}/restore": RestoreResource,
    "/organizations/{org_id}/webhooks": WebhooksResource,
    "/webhooks/{webhook_id}": WebhookResource,
}


def add_admin_routes(app: falcon.asgi.App, services: Services) -> None:
    """Register the admin resources, sharing one ``AdminAuth``, and map store errors."""
    auth = AdminAuth(services.settings, services.store)
    for path, resource in ROUTES.items():
        app.add_route(PREFIX + path, resource(services, auth))
    app.add_error_handler(ControlPlaneError, handle_control_plane_error)
