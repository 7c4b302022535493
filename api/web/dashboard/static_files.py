"""The dashboard's own CSS and JavaScript, served by the app (no CDN, no build step).

Only the files listed here are served, so a request can never name a path outside the
directory. They hold no data, so they are served without a session: the sign-in page needs them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import falcon
import falcon.asgi

from api.web.dashboard.rendering import apply_security_headers

STATIC_DIR = Path(__file__).with_name("static")
STATIC_FILES = {
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


class StaticFile:
    """``/dashboard/static/{name}``, read once at start-up, revalidated by ETag."""

    def __init__(self) -> None:
        self._files = {name: (STATIC_DIR / name).read_bytes() for name in STATIC_FILES}
        self._etags = {
            name: hashlib.sha256(data).hexdigest()[:32] for name, data in self._files.items()
        }

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, name: str) -> None:
        if name not in self._files:
            raise falcon.HTTPNotFound()
        apply_security_headers(resp)
        resp.content_type = STATIC_FILES[name]
        resp.etag = self._etags[name]
        resp.cache_control = ["no-cache"]
        if req.if_none_match and any(tag == resp.etag for tag in req.if_none_match):
            resp.status = falcon.HTTP_304
            return
        resp.data = self._files[name]

    async def on_get_favicon(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        """``/favicon.ico``: what a browser asks for on a page with no icon link (the API's
        JSON, the OpenAPI document), so those pages do not log a 404 either."""
        await self.on_get(req, resp, "favicon.svg")
