"""Webhooks of an organization (contract section 10): create (the secret is shown once),
list, delete. Deliveries come from the control plane's outbox (``api/jobs/webhooks.py``)."""

from __future__ import annotations

from typing import Annotated, Any

import falcon
import falcon.asgi
import msgspec
from msgspec import Meta

from api.controlplane import documents
from api.controlplane.changes import CreatedWebhook, EventType
from api.controlplane.changes import Webhook as WebhookRecord
from api.controlplane.webhook_targets import ForbiddenTarget, check_url
from api.web.admin.auth import require_admin
from api.web.admin.base import AdminResource
from api.web.admin.bodies import Body, Place, Timestamp, convert, one_of, words
from api.web.admin.organizations import existing_organization
from api.web.admin.slices import Answer, Operation, Route, Slice
from api.web.errors import BadRequest
from api.web.jsonio import write_json

MAX_URL_LENGTH = 2048
EVENTS = tuple(str(event) for event in EventType)
EVENTS_WORDS = f"Field 'events' must be a non-empty array of distinct {', '.join(EVENTS)}"
URL_PATTERN = (
    "^https?://(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9._~%-]+)"
    "(:0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}"
    "|655[0-2][0-9]|6553[0-5]))?([/?#][^\\s\\x00-\\x1f\\x7f]*)?$"
)
"""The URL's form as a pattern, for the document; the rules themselves, the host's included,
are ``webhook_targets.check_url``'s (``_check_url``), which refuses all the pattern does."""
URL_RULES = (
    "http:// or https:// with a host; no user information, port 0, white space or control"
    " characters. The host is judged as the HTTP client uses it (percent-decoded, IDNA; labels"
    " of at most 63 characters). Unless the operator allows it"
    " (FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE=1), a host that is or resolves to a loopback or private"
    " address is refused (400); link-local, multicast and reserved addresses always are, IPv6"
    " forms judged by the IPv4 address they embed"
)
EventName = one_of(EVENTS)
Event = Annotated[EventName, Meta(extra=words(every=EVENTS_WORDS))]


def _check_url(url: str, place: Place) -> None:
    try:
        check_url(url, place.context.get("allow_private", False))
    except ForbiddenTarget as refused:
        raise BadRequest(f"Field 'url' {refused}") from None


def _check_events(events: list[str], place: Place) -> None:
    if len(set(events)) != len(events):
        raise BadRequest(EVENTS_WORDS)


class WebhookCreate(Body):
    url: Annotated[
        str,
        Meta(min_length=1, max_length=MAX_URL_LENGTH, description=URL_RULES,
             extra_json_schema={"pattern": URL_PATTERN}),
    ]  # fmt: skip
    events: Annotated[
        list[Event],
        Meta(min_length=1, max_length=len(EVENTS), extra=words(short=EVENTS_WORDS),
             extra_json_schema={"uniqueItems": True}),
    ]  # fmt: skip

    checks = {"url": _check_url, "events": _check_events}


def webhook_of(body: Any, allow_private: bool) -> WebhookCreate:
    """A webhook's URL and events from plain JSON values (the dashboard's form): 400 as the
    API says."""
    return convert(WebhookCreate, body, {"allow_private": allow_private})


class Webhook(msgspec.Struct):
    id: Annotated[str, Meta(pattern="^whk_[0-9a-f]{16}$")]
    url: str
    events: list[EventName]  # type: ignore[valid-type]
    createdAt: Timestamp


class NewWebhook(Webhook):
    secret: Annotated[
        str, Meta(pattern="^whsec_", description="Signs every delivery; shown only in this answer")
    ]


class WebhookList(msgspec.Struct):
    items: list[Webhook]


def webhook(hook: WebhookRecord) -> Webhook:
    return Webhook(**documents.webhook(hook))


def created_webhook(created: CreatedWebhook) -> NewWebhook:
    """``secret`` appears only in the answer that created the webhook."""
    return NewWebhook(**documents.webhook(created.record), secret=created.secret)


@falcon.before(require_admin)
class WebhooksResource(AdminResource):
    async def on_get(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        await existing_organization(self, org_id)
        hooks = await self.read(self.store.list_webhooks, org_id)
        write_json(resp, WebhookList([webhook(hook) for hook in hooks]))

    async def on_post(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, org_id: str
    ) -> None:
        allow_private = self.services.settings.webhook_allow_private
        body = await self.body(req, WebhookCreate, allow_private=allow_private)
        created = await self.write(self.store.create_webhook, org_id, body.url, body.events)
        write_json(resp, created_webhook(created), status=201)


@falcon.before(require_admin)
class WebhookResource(AdminResource):
    async def on_delete(
        self, req: falcon.asgi.Request, resp: falcon.asgi.Response, webhook_id: str
    ) -> None:
        await self.write(self.store.delete_webhook, webhook_id)
        resp.status = falcon.HTTP_204


SLICE = Slice(
    Route("/organizations/{org_id}/webhooks", WebhooksResource, {
        "get": Operation("The organization's webhooks (without secrets)",
                         {200: Answer("Webhooks", WebhookList)}),
        "post": Operation("Subscribe a URL to events; the signing secret is in this answer only",
                          {201: Answer("Created", NewWebhook)}, body=WebhookCreate),
    }),
    Route("/webhooks/{webhook_id}", WebhookResource, {
        "delete": Operation("Delete a webhook; what is still queued for it is dropped",
                            {204: Answer("Done; no body")}),
    }),
)  # fmt: skip
