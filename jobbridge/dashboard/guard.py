"""Who may open the dashboard and what a request must carry to change anything.

Three guards, each against one failure:

- **the bind check** (`check_bind`): a dashboard retries and deletes jobs, so
  ``jobbridge dashboard`` listens on loopback unless told otherwise, and refuses
  any other address when no credential is asked for — a dashboard left open on
  ``0.0.0.0`` would let anyone on the network flush the failed store;
- **authentication** (`Auth`): a bearer token (``Authorization: Bearer``, or
  ``?token=`` once in a browser, which sets an HttpOnly cookie) or HTTP basic
  auth; anything else is answered 401 before any page runs. Mounted inside an
  application, the dashboard is usually given neither and sits behind that
  application's own login;
- **CSRF** (`csrf_token`, `csrf_ok`): every POST carries a token that must
  equal the one in the dashboard's own cookie (SameSite=Strict, HttpOnly), and a
  POST whose ``Origin`` or ``Sec-Fetch-Site`` says it came from another site is
  refused, so a page elsewhere cannot make a logged-in browser retry or delete.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request

#: the cookie holding the CSRF token (per browser)
CSRF_COOKIE = "jobbridge_csrf"
#: the cookie a browser keeps the dashboard's token in after ``?token=``
TOKEN_COOKIE = "jobbridge_token"


class UnsafeBind(ValueError):
    """A non-loopback address with no authentication."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine alone (127.0.0.0/8, ::1, localhost)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, auth: Auth | None) -> None:
    """Refuse to listen on ``host`` when it is not loopback and nothing authenticates requests."""
    if not is_loopback(host) and (auth is None or not auth.required):
        raise UnsafeBind(
            f"refusing to serve the dashboard on {host}, which is not a loopback address, without "
            "authentication: anyone who reaches it could retry and delete jobs. Give --token TOKEN "
            "(or JOBBRIDGE_DASHBOARD_TOKEN) or --basic-auth USER:PASSWORD, or bind to 127.0.0.1 "
            "and put it behind your own proxy")


@dataclass(frozen=True)
class Auth:
    """The credential every request must carry: a token, or a basic-auth user and password (or neither)."""

    token: str | None = None
    user: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and self.user is not None:
            raise ValueError("give a token or basic auth, not both")
        if self.token is not None and len(self.token) < 16:
            raise ValueError("the dashboard token must be at least 16 characters: generate one with "
                             "python -c 'import secrets; print(secrets.token_urlsafe(24))'")
        if self.user is not None and not self.password:
            raise ValueError("basic auth needs a password: --basic-auth USER:PASSWORD")

    @classmethod
    def basic(cls, pair: str) -> Auth:
        """``USER:PASSWORD`` as given on the command line."""
        user, sep, password = pair.partition(":")
        if not sep or not user or not password:
            raise ValueError("--basic-auth takes USER:PASSWORD, both non-empty")
        return cls(user=user, password=password)

    @property
    def required(self) -> bool:
        return self.token is not None or self.user is not None

    def allows(self, request: Request) -> bool:
        """Whether the request carries the credential."""
        if not self.required:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if self.token is not None:
            given = value.strip() if scheme.lower() == "bearer" else request.cookies.get(TOKEN_COOKIE, "")
            return _same(given, self.token)
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        # both compared whatever the first gives, so the time taken tells nothing
        return _same(user, self.user or "") & _same(password, self.password or "")

    def token_in_query(self, request: Request) -> bool:
        """A browser's first visit with ``?token=``: the right token, to be moved into the cookie."""
        return self.token is not None and _same(request.query_params.get("token", ""), self.token)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def csrf_token(request: Request) -> str:
    """This browser's CSRF token: its cookie's, or a new one the response will set (`new_csrf`)."""
    found = request.cookies.get(CSRF_COOKIE)
    if found and len(found) >= 32:
        return found
    made: str | None = getattr(request.state, "new_csrf", None)
    if made is None:
        made = secrets.token_urlsafe(32)
        request.state.new_csrf = made
    return made


def csrf_ok(request: Request, form: dict[str, str]) -> bool:
    """Whether a POST came from one of the dashboard's own forms in this browser."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    given = form.get("csrf", "")
    if not cookie or not given or not _same(given, cookie):
        return False
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin:  # "null" (a sandboxed frame elsewhere) is never this host
        return urlsplit(origin).netloc == request.headers.get("host", "")
    return True
