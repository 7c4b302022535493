"""The admin API (``/admin/v1/...``): organizations, environments, API keys, segments, flags.

``routes.add_admin_routes(app, services)`` registers every route; ``auth`` checks the admin
token; the resources live one concept per module.
"""
