"""``add_admin_routes(app, services)``: every ``/admin/v1/...`` route of contract sections 5, 9 and 10."""

from __future__ import annotations

import falcon.asgi

from api.admin.api_keys import ApiKeyResource, ApiKeysResource
from api.admin.audit import AuditResource, RestoreResource
from api.admin.auth import AdminAuth
from api.admin.environments import EnvironmentResource, EnvironmentsResource
from api.admin.errors import handle_control_plane_error
from api.admin.flags import FlagMetricsResource, FlagResource, FlagsResource
from api.admin.health import FlagHealthResource
from api.admin.organizations import OrganizationResource, OrganizationsResource, UsageResource
from api.admin.rollouts import RolloutResource
from api.admin.schedules import ScheduleResource, SchedulesResource
from api.admin.segments import SegmentResource, SegmentsResource
from api.admin.webhooks import WebhookResource, WebhooksResource
from api.controlplane.store import ControlPlaneError
from api.services import Services

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
