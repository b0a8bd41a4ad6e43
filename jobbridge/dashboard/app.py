"""The dashboard as an ASGI application (Starlette) and as a WSGI one (a2wsgi), built from a `JobBridge`.

``jobbridge dashboard`` serves `create_app`'s application with uvicorn;
mounted in another application it sits behind that application's own
authentication (give it no `Auth` then), under whatever prefix it is mounted
at: every link and cookie path follows the mount's root path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

from jobbridge.app import JobBridge
from jobbridge.dashboard import actions, pages
from jobbridge.dashboard.guard import Auth
from jobbridge.dashboard.rendering import Handler, gate
from jobbridge.dashboard.store_view import StoreView

_ROUTES: list[tuple[str, Handler, str]] = [
    ("/", pages.overview, "GET"),
    ("/failed", pages.failed_list, "GET"),
    ("/failed/act", actions.failed_action, "POST"),
    ("/failed/{job_id:str}", pages.failed_one, "GET"),
    ("/jobs", pages.find_job, "GET"),
    ("/jobs/{job_id:str}", pages.job, "GET"),
    ("/jobs/{job_id:str}/cancel", actions.cancel_job, "POST"),
    ("/workers", pages.workers, "GET"),
    ("/schedules", pages.schedules, "GET"),
]


class Dashboard:
    """What every page reads: the store view, the credential asked for, whether actions are offered."""

    def __init__(self, bridge: JobBridge, *, connection: str | None = None, read_only: bool = False,
                 auth: Auth | None = None) -> None:
        self.view = StoreView(bridge, connection)
        self.read_only = read_only
        self.auth = auth


def create_app(bridge: JobBridge, *, connection: str | None = None, read_only: bool = False,
               auth: Auth | None = None) -> Starlette:
    """The dashboard of ``bridge``'s ``connection`` (the default one when None) as an ASGI application.

    Mount it in FastAPI or Starlette (``app.mount("/jobs", create_app(bridge))``) or serve it
    with any ASGI server. ``auth`` asks every request for a token or basic auth; leave it None
    when the surrounding application authenticates.
    """
    dash = Dashboard(bridge, connection=connection, read_only=read_only, auth=auth)
    routes = [Route(path, gate(handler, dash), methods=[method]) for path, handler, method in _ROUTES]
    return Starlette(routes=routes)


def create_wsgi_app(bridge: JobBridge, **options: Any) -> Callable[..., Any]:
    """The same application as a WSGI callable (Flask, Django, any WSGI server); options as `create_app`."""
    from a2wsgi import ASGIMiddleware

    return ASGIMiddleware(create_app(bridge, **options))  # type: ignore[arg-type]
