"""The web dashboard: queues, failures, workers and schedules of one connection, with retry a click away.

``jobbridge dashboard -A app`` serves it (``pip install 'jobbridge[dashboard]'``);
`create_app` and `create_wsgi_app` give the same application to mount inside
a Django, Flask or FastAPI application. docs/dashboard.md says what each page
shows and what keeps it safe.
"""

from __future__ import annotations

from jobbridge.dashboard.app import create_app, create_wsgi_app
from jobbridge.dashboard.guard import Auth, UnsafeBind, check_bind

__all__ = ["Auth", "UnsafeBind", "check_bind", "create_app", "create_wsgi_app"]
