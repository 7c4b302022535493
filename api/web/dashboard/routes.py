"""``add_dashboard_routes(app, services)``: every ``/dashboard`` page and action.

``ROUTES`` is the one list of them; the tests walk it to check that each route refuses a
request without a session, and each form one without its CSRF token.
"""

from __future__ import annotations

import falcon.asgi

from api.serving.services import Services
from api.web.admin.auth import AdminAuth
from api.web.dashboard.api_keys import ApiKeysPage, RevokeApiKeyAction
from api.web.dashboard.audit import AuditPage, RestoreAction
from api.web.dashboard.auth_pages import HomePage, SignInPage, SignOutAction
from api.web.dashboard.base import PREFIX, Dashboard, Page
from api.web.dashboard.cleanup import ArchiveFlagAction, CleanupPage
from api.web.dashboard.flags import (
    FlagEditorPage,
    FlagMetricsAction,
    FlagsPage,
    FlagToggleAction,
    FlagTryUserAction,
)
from api.web.dashboard.insights import InsightsPage
from api.web.dashboard.metrics import DeleteMetricAction, MetricPage, MetricsPage
from api.web.dashboard.organizations import (
    InsightsSwitchAction,
    OrganizationPage,
    OrganizationsPage,
)
from api.web.dashboard.rendering import Renderer
from api.web.dashboard.rollouts import StartRolloutAction, StopRolloutAction
from api.web.dashboard.schedules import CancelScheduleAction, SchedulesPage
from api.web.dashboard.segments import DeleteSegmentAction, SegmentMembersPage, SegmentsPage
from api.web.dashboard.sessions import SessionSigner
from api.web.dashboard.static_files import StaticFile
from api.web.dashboard.usage import UsagePage
from api.web.dashboard.webhooks import DeleteWebhookAction, WebhooksPage

PUBLIC_ROUTES: dict[str, type[Page]] = {"/sign-in": SignInPage}
"""Routes that answer without a session (the static files are added besides)."""

ROUTES: dict[str, type[Page]] = {
    "": HomePage,
    "/sign-out": SignOutAction,
    "/organizations": OrganizationsPage,
    "/organizations/{org_id}": OrganizationPage,
    "/organizations/{org_id}/usage": UsagePage,
    "/organizations/{org_id}/segments": SegmentsPage,
    "/organizations/{org_id}/segments/{segment_key}": SegmentMembersPage,
    "/organizations/{org_id}/segments/{segment_key}/delete": DeleteSegmentAction,
    "/organizations/{org_id}/metrics": MetricsPage,
    "/organizations/{org_id}/metrics/{metric_key}": MetricPage,
    "/organizations/{org_id}/metrics/{metric_key}/delete": DeleteMetricAction,
    "/environments/{env_id}/insights": InsightsSwitchAction,
    "/environments/{env_id}/api-keys": ApiKeysPage,
    "/api-keys/{key_id}/revoke": RevokeApiKeyAction,
    "/environments/{env_id}/flags": FlagsPage,
    "/environments/{env_id}/flags/{flag_key}": FlagEditorPage,
    "/environments/{env_id}/flags/{flag_key}/toggle": FlagToggleAction,
    "/environments/{env_id}/flags/{flag_key}/explain": FlagTryUserAction,
    "/environments/{env_id}/flags/{flag_key}/metrics": FlagMetricsAction,
    "/environments/{env_id}/flags/{flag_key}/archive": ArchiveFlagAction,
    "/environments/{env_id}/cleanup": CleanupPage,
    "/environments/{env_id}/flags/{flag_key}/insights": InsightsPage,
    "/environments/{env_id}/flags/{flag_key}/rollout": StartRolloutAction,
    "/environments/{env_id}/flags/{flag_key}/rollout/stop": StopRolloutAction,
    "/environments/{env_id}/flags/{flag_key}/schedules": SchedulesPage,
    "/environments/{env_id}/flags/{flag_key}/schedules/{schedule_id}/cancel": CancelScheduleAction,
    "/organizations/{org_id}/audit": AuditPage,
    "/organizations/{org_id}/audit/{audit_id}/restore": RestoreAction,
    "/organizations/{org_id}/webhooks": WebhooksPage,
    "/organizations/{org_id}/webhooks/{webhook_id}/delete": DeleteWebhookAction,
}
"""Every route that needs a session (and, for POST, the session's CSRF token)."""


def build_dashboard(services: Services) -> Dashboard:
    auth = AdminAuth(services.settings, services.store)
    signer = SessionSigner(
        services.store.signing_key(),
        auth.expected_hash,
        lambda: services.clock(),  # read per call: Services.clock is the one time source
    )
    return Dashboard(services=services, auth=auth, signer=signer, renderer=Renderer())


def add_dashboard_routes(app: falcon.asgi.App, services: Services) -> None:
    dashboard = build_dashboard(services)
    for path, page in {**PUBLIC_ROUTES, **ROUTES}.items():
        app.add_route(PREFIX + path, page(dashboard))
    static = StaticFile()
    app.add_route(f"{PREFIX}/static/{{name}}", static)
    app.add_route("/favicon.ico", static, suffix="favicon")
