"""Rendering pages: one Jinja environment (autoescaped) and the headers every page carries.

The Content-Security-Policy allows scripts and styles only from our own static files, so an
injected ``<script>`` or ``onclick`` would not run even if escaping failed somewhere; inline SVG
charts use presentation attributes, which CSP does not govern.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import falcon
import falcon.asgi
import jinja2
from flagsight_core.contract import KEY_MAX, MAX_NAME_LENGTH, USER_IDENTIFIER_MAX

from api.controlplane.model import OWNER_MAX
from api.web.dashboard.format import FILTERS

TEMPLATES_DIR = Path(__file__).with_name("templates")

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def build_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.globals.update(
        KEY_MAX=KEY_MAX,
        USER_IDENTIFIER_MAX=USER_IDENTIFIER_MAX,
        OWNER_MAX=OWNER_MAX,
        NAME_MAX=MAX_NAME_LENGTH,
    )  # inputs' maxlength
    return env


def apply_security_headers(resp: falcon.asgi.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        resp.set_header(name, value)


class Renderer:
    """Renders templates into responses; one instance per app, shared by the pages."""

    def __init__(self, environment: jinja2.Environment | None = None):
        self._env = environment or build_environment()

    def text(self, template: str, **context: Any) -> str:
        return self._env.get_template(template).render(**context)

    def page(
        self, resp: falcon.asgi.Response, template: str, *, status: int = 200, **context: Any
    ) -> None:
        resp.status = status
        resp.content_type = falcon.MEDIA_HTML
        apply_security_headers(resp)
        resp.text = self.text(template, **context)

    def status(self, status: int, title: str, message: str, **context: Any) -> falcon.HTTPStatus:
        """An HTML answer to raise from a hook (403 CSRF, 404 ...), bypassing the JSON
        error serializer that the API's errors use."""
        headers = {**SECURITY_HEADERS, "Content-Type": falcon.MEDIA_HTML}
        defaults = {"signed_in": False, "csrf_token": "", "crumbs": [], "path": ""}
        body = self.text("message.html", title=title, message=message, **{**defaults, **context})
        return falcon.HTTPStatus(status, headers=headers, text=body)
