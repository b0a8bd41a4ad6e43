"""Pages from Jinja2 templates (autoescaped), the headers every answer carries, and the request gate.

Every endpoint runs behind `gate`: authentication first, then for a POST
the read-only check and the CSRF check, then the page itself off the event
loop (the drivers are synchronous), with a store that cannot be reached shown
as a page that says so rather than a traceback. The headers forbid framing
(clickjacking a Retry button), scripts of any origin (the pages have none),
caching (a page may show an error text) and sending the address elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from jobbridge.dashboard.guard import CSRF_COOKIE, TOKEN_COOKIE, csrf_ok, csrf_token
from jobbridge.errors import JobBridgeError
from jobbridge.redaction import mask_url

if TYPE_CHECKING:
    from jobbridge.dashboard.app import Dashboard

log = logging.getLogger("jobbridge.dashboard")

Form = dict[str, list[str]]
Handler = Callable[["Dashboard", Request, Form], Response]

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def ago(seconds: float | None) -> str:
    """``95`` as ``1m 35s``: how long ago, or how old."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            rest = seconds % size
            small = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}[unit]
            return f"{seconds // size}{unit}" + (f" {rest // small[1]}{small[0]}" if rest // small[1] else "")
    return f"{seconds}s"


def utc(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(float(epoch), UTC).strftime("%Y-%m-%d %H:%M:%S")


_env = Environment(loader=PackageLoader("jobbridge.dashboard", "templates"),
                   autoescape=select_autoescape(["html", "svg"]), trim_blocks=True, lstrip_blocks=True)
_env.filters["ago"] = ago
_env.filters["utc"] = utc


def first(form: Mapping[str, list[str]], key: str, default: str = "") -> str:
    values = form.get(key)
    return values[0].strip() if values else default


def href(request: Request, path: str, **query: object) -> str:
    """A link inside the dashboard, under the prefix it is mounted at."""
    params = {k: str(v) for k, v in query.items() if v not in (None, "")}
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return root + path + (f"?{urlencode(params)}" if params else "")


def render(dash: Dashboard, request: Request, template: str, status: int = 200, **context: Any) -> Response:
    page = _env.get_template(template).render(
        request=request, read_only=dash.read_only, csrf=csrf_token(request), where=dash.view.where(),
        href=lambda path, **q: href(request, path, **q), **context)
    return finish(request, HTMLResponse(page, status_code=status))


def finish(request: Request, response: Response) -> Response:
    """Add the security headers, and the CSRF cookie when this request made the token."""
    response.headers.update(HEADERS)
    made = getattr(request.state, "new_csrf", None)
    if made is not None:
        response.set_cookie(CSRF_COOKIE, made, httponly=True, samesite="strict", path=_cookie_path(request))
    return response


def redirect(request: Request, path: str, **query: object) -> Response:
    return finish(request, RedirectResponse(href(request, path, **query), status_code=303))


def _cookie_path(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/") or "/"


def problem(dash: Dashboard, request: Request, status: int, message: str) -> Response:
    return render(dash, request, "problem.html", status=status, message=message)


def gate(handler: Handler, dash: Dashboard) -> Callable[[Request], Any]:
    """``handler`` as a Starlette endpoint behind authentication, read-only mode and CSRF."""
    async def endpoint(request: Request) -> Response:
        refused = _authenticate(dash, request)
        if refused is not None:
            return refused
        form: Form = {}
        if request.method == "POST":
            if dash.read_only:
                return problem(dash, request, 403, "This dashboard is read-only: it changes nothing.")
            form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
            if not csrf_ok(request, {"csrf": first(form, "csrf")}):
                return problem(dash, request, 403, "This form's CSRF token is missing or does not match this "
                                                   "browser's: reload the page and submit it again.")
        try:
            response: Response = await run_in_threadpool(handler, dash, request, form)
        except JobBridgeError as exc:
            log.warning("dashboard: %s", exc)
            return problem(dash, request, 503, f"The store did not answer: {mask_url(str(exc))}")
        return response
    return endpoint


def _authenticate(dash: Dashboard, request: Request) -> Response | None:
    auth = dash.auth
    if auth is None or not auth.required:
        return None
    if request.method == "GET" and auth.token_in_query(request):
        query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(query)}" if query else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(TOKEN_COOKIE, auth.token or "", httponly=True, samesite="strict",
                            path=_cookie_path(request))
        return finish(request, response)
    if auth.allows(request):
        return None
    if auth.token is None:
        return finish(request, Response("authentication required\n", status_code=401, media_type="text/plain",
                                        headers={"WWW-Authenticate": 'Basic realm="jobbridge dashboard"'}))
    page = _env.get_template("login.html").render(request=request, read_only=True, where="",
                                                  href=lambda path, **q: href(request, path, **q))
    return finish(request, HTMLResponse(page, status_code=401, headers={"WWW-Authenticate": "Bearer"}))
