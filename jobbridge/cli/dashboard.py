"""``jobbridge dashboard``: serve the web dashboard of one connection (``pip install 'jobbridge[dashboard]'``).

Loopback unless told otherwise; another address is refused unless a token or
basic auth is asked for (`jobbridge.dashboard.guard.check_bind`), before the
app is even loaded. The server is uvicorn, in this process.
"""

from __future__ import annotations

from typing import Any

import click

from jobbridge.cli.options import announce, app_options, load_bridge

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8484


def _dashboard_package() -> Any:
    try:
        import uvicorn

        import jobbridge.dashboard as dashboard
    except ModuleNotFoundError as exc:
        if exc.name not in ("starlette", "jinja2", "uvicorn", "a2wsgi", "markupsafe"):
            raise
        raise click.UsageError(f"the dashboard needs {exc.name}: pip install 'jobbridge[dashboard]'") from None
    return dashboard, uvicorn


@click.command()
@app_options
@click.option("--host", default=DEFAULT_HOST, show_default=True,
              help="The address to listen on. Anything but loopback needs --token or --basic-auth.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535))
@click.option("--read-only", is_flag=True, help="Show everything, change nothing: no retry, delete or cancel.")
@click.option("--token", envvar="JOBBRIDGE_DASHBOARD_TOKEN", metavar="TOKEN",
              help="Ask every request for this token (at least 16 characters): Authorization: Bearer TOKEN, "
                   "or open /?token=TOKEN once in a browser. Also read from JOBBRIDGE_DASHBOARD_TOKEN.")
@click.option("--basic-auth", "basic_auth", envvar="JOBBRIDGE_DASHBOARD_BASIC_AUTH", metavar="USER:PASSWORD",
              help="Ask every request for HTTP basic auth. Also read from JOBBRIDGE_DASHBOARD_BASIC_AUTH.")
def dashboard(app: str | None, connection: str | None, host: str, port: int, read_only: bool,
              token: str | None, basic_auth: str | None) -> None:
    """Serve the web dashboard: queues, failed jobs (retry, delete), a job by id, workers and schedules.

    It listens on 127.0.0.1:8484 by default. Every action is a POST with a CSRF
    token, and no connection URL or password is ever shown. To mount the same
    pages inside your own web application use jobbridge.dashboard.create_app
    (ASGI) or create_wsgi_app (WSGI).
    """
    package, uvicorn = _dashboard_package()
    try:
        auth = package.Auth(token=token) if token else package.Auth.basic(basic_auth) if basic_auth else None
        package.check_bind(host, auth)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    bridge = load_bridge(app)
    name = announce(bridge, connection)
    application = package.create_app(bridge, connection=name, read_only=read_only, auth=auth)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"jobbridge dashboard on http://{shown}:{port}/{' (read-only)' if read_only else ''}", err=True)
    try:
        uvicorn.run(application, host=host, port=port, log_level="warning", server_header=False)
    finally:
        bridge.close()
