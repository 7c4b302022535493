"""The references: minimal Falcon ASGI apps answering ``POST /v1/evaluate`` with a fixed JSON
answer. Every ratio goal divides a flagsight figure by a reference's, measured in the same
``make bench`` invocation under the same gunicorn configuration, worker class and count.

- ``tight_app`` is as fast as Falcon allows for this request: it reads the raw body, decodes
  it with msgspec into the two fields it checks, and answers pre-encoded bytes. It is the
  ceiling the goals are set against.
- ``app`` (the first reference, kept so the history stays readable) decodes with Falcon's
  default media handler and answers through ``resp.media``.
"""

from __future__ import annotations

import falcon
import falcon.asgi
import msgspec

ANSWER = {
    "value": True,
    "matchedRuleType": "PERCENTAGE",
    "error": None,
    "evaluationId": "AQAAAAAAAAChAAAAAAAAAAEAAb0pOmV1Ym9r5e1xUQ0000",
}
ANSWER_BYTES = msgspec.json.encode(ANSWER)


class Evaluate(msgspec.Struct):
    flagKey: str  # noqa: N815 - the wire name
    userIdentifier: str  # noqa: N815


_decode = msgspec.json.Decoder(Evaluate).decode


class MediaEvaluateResource:
    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        await req.get_media()
        resp.media = ANSWER


class TightEvaluateResource:
    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        try:
            body = _decode(await req.stream.read())
        except msgspec.DecodeError:
            raise falcon.HTTPBadRequest() from None
        if not body.flagKey or not body.userIdentifier:
            raise falcon.HTTPBadRequest()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = ANSWER_BYTES


def create_app(resource: object) -> falcon.asgi.App:
    app = falcon.asgi.App()
    app.add_route("/v1/evaluate", resource)
    return app


app = create_app(MediaEvaluateResource())
tight_app = create_app(TightEvaluateResource())
