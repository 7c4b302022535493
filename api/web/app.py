"""The Falcon ASGI application: ``create_app(services)`` wires routes around injected parts."""

from __future__ import annotations

import falcon
import falcon.asgi

from api.serving.services import Services
from api.web.admin.routes import add_admin_routes
from api.web.dashboard.routes import add_dashboard_routes
from api.web.errors import serialize_error
from api.web.front import EvaluateFront
from api.web.openapi.document import OpenApiResource
from api.web.public.evaluate import BulkEvaluateResource, EvaluateResource
from api.web.public.feedback import BulkFeedbackResource, FeedbackResource
from api.web.public.health import HealthResource, MetricsResource, ReadyResource
from api.web.public.local import add_local_routes
from api.web.public.ofrep import add_ofrep_routes
from api.web.public.ruleset import RulesetResource, StreamResource
from api.web.public.track import TrackResource
from api.web.public.usage import UsageResource
from api.web.request_tallies import RequestTallyMiddleware, TimedRequest


def create_app(services: Services, evaluate: EvaluateResource | None = None) -> falcon.asgi.App:
    """The Falcon app alone; ``evaluate`` is the single evaluate's resource when it is shared."""
    app = falcon.asgi.App(
        cors_enable=False,
        middleware=[RequestTallyMiddleware(services.tallies)],
        request_type=TimedRequest,
    )
    app.set_error_serializer(serialize_error)
    app.req_options.strip_url_path_trailing_slash = True

    app.add_route("/v1/evaluate", evaluate or EvaluateResource(services))
    app.add_route("/v1/evaluate/bulk", BulkEvaluateResource(services))
    app.add_route("/v1/feedback/report", FeedbackResource(services))
    app.add_route("/v1/feedback/bulk", BulkFeedbackResource(services))
    app.add_route("/v1/track", TrackResource(services))
    app.add_route("/v1/usage", UsageResource(services))
    app.add_route("/v1/ruleset", RulesetResource(services))
    app.add_route("/v1/stream", StreamResource(services))
    add_local_routes(app, services)
    add_ofrep_routes(app, services)
    add_admin_routes(app, services)
    add_dashboard_routes(app, services)

    app.add_route("/healthz", HealthResource())
    app.add_route("/readyz", ReadyResource(services))
    app.add_route("/metrics", MetricsResource(services))
    app.add_route("/openapi.json", OpenApiResource())
    return app


def create_asgi_app(services: Services) -> EvaluateFront:
    """The app a server runs: the Falcon app behind ``api.web.front``, which answers a valid
    single evaluate itself through the route's own resource (one quota cache, one month)."""
    evaluate = EvaluateResource(services)
    return EvaluateFront(create_app(services, evaluate), evaluate, services)
