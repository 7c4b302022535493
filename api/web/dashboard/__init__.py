"""The dashboard (``/dashboard``): server-rendered pages over the admin API's logic and the
warehouse, for the people running flags.

``routes.add_dashboard_routes(app, services)`` registers every page. Sign-in takes the admin
token once and answers with a signed, expiring session cookie (``sessions``); every form carries
a CSRF token bound to that session. Pages work without JavaScript; ``static/dashboard.js``
only adds a copy button and in-place rule reordering.
"""
