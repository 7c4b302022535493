"""The reference: a minimal Falcon ASGI app that parses the JSON body and returns a fixed
JSON answer. Every ratio goal divides a flagsight figure by this app's, measured in the same
``make bench`` invocation under the same gunicorn configuration, worker class and count.
"""

from __future__ import annotations

import falcon
import falcon.asgi

ANSWER = {
    "value": True,
    "matchedRuleType": "PERCENTAGE",
    "error": None,
    "evaluationId": "AQAAAAAAAAChAAAAAAAAAAEAAb0pOmV1Ym9r5e1xUQ0000",
}


class EvaluateResource:
    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        await req.get_media()
        resp.media = ANSWER


def create_app() -> falcon.asgi.App:
    app = falcon.asgi.App()
    app.add_route("/v1/evaluate", EvaluateResource())
    return app


app = create_app()
