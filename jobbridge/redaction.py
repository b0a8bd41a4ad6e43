"""Credentials masked out of a URL before it is shown: banners, ``jobbridge status``, errors, reprs.

A store's URL is printed where operators, terminals and log collectors see it.
The clients behind jobbridge take a password in more places than the userinfo:
psycopg and redis-py read ``?password=`` from the query string, libpq a keyword
DSN (``host=db password=...``), SQLAlchemy dialects ``sslpassword`` and friends.
And a URL that fails validation is the one most likely to be shown in full (an
error quotes what was wrong) and to hold a mistyped password. So `mask_url`
works on the text, never on a parse: it cannot raise, whatever it is given,
and it masks

- the userinfo password: from the first ``:`` after ``scheme://`` (or from the
  start of a text that has no ``://``) to the *last* ``@``, so a password that
  holds an unencoded ``@``, ``/``, ``?`` or ``#`` is masked whole, and so is a
  URL typed without its ``//``;
- the value of every ``key=value`` pair whose key names a credential (any key
  containing one of `SECRET_WORDS`, in any case: ``password``, ``sslpassword``,
  ``sasl.password``, ``token``, ``aws_secret_access_key``, ...), in a query
  string or a keyword DSN, quoted or not.

It errs towards masking too much: a URL with an ``@`` in its query string
loses what lies between the first ``:`` and that ``@``. Nothing in the
standard library, SQLAlchemy or kombu covers these forms (they mask the
userinfo of a URL they can parse, and nothing else), hence this module.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "SECRET_WORDS", "is_secret_key", "mask_url", "quoted"]

#: what a masked credential is replaced with
MASK = "***"
#: a setting or query key holding one of these (case-insensitively) holds a credential
SECRET_WORDS = ("pass", "pwd", "secret", "token", "auth", "key", "sig", "cred", "jwt", "private")

_SECRET_KEY = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)
# A pair starts a text or follows a separator: ? & ; , (query strings) or whitespace (keyword DSNs).
# Its value is quoted (libpq style, backslash escapes, perhaps never closed) or runs to & or whitespace.
_PAIR = re.compile(
    r"(?:^|(?<=[\s?&;,]))[\w.\-\[\]%]*(?:" + "|".join(SECRET_WORDS) + r")[\w.\-\[\]%]*\s*=\s*"
    r"(?P<value>'(?:\\.|[^\\'])*'?|\"(?:\\.|[^\\\"])*\"?|[^&\s]*)",
    re.IGNORECASE,
)


def mask_url(url: str) -> str:
    """``url`` with every credential in it replaced by ``***``; any text is accepted, parseable or not."""
    spans = [m.span("value") for m in _PAIR.finditer(url)]
    userinfo = _password_span(url)
    if userinfo is not None:
        spans.append(userinfo)
    shown, end = [], 0
    for start, stop in _merged(spans):
        shown.append(url[end:start] + MASK)
        end = stop
    return "".join(shown) + url[end:]


def _password_span(url: str) -> tuple[int, int] | None:
    """Where a userinfo password lies: after the first ``:`` of what follows ``://``, up to the last ``@``."""
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    at = url.rfind("@")
    if at < start:
        return None
    head = url[start:at]
    # a bracketed IPv6 host comes before its port's ':', never before a password's
    skip = head.find("]") + 1 if head.startswith("[") else 0
    colon = head.find(":", skip)
    return None if colon < 0 else (start + colon + 1, at)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans as one, in order; empty ones (nothing to hide) dropped."""
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(stop, merged[-1][1]))
        else:
            merged.append((start, stop))
    return merged


def is_secret_key(key: str) -> bool:
    """Whether a setting or parameter named ``key`` holds a credential, so its value is never shown."""
    return _SECRET_KEY.search(key) is not None


def quoted(value: object, key: str = "") -> str:
    """``repr(value)`` for a message or a repr: credentials masked, a ``key`` that names one hidden whole."""
    if key and is_secret_key(key):
        return MASK
    return repr(mask_url(value)) if isinstance(value, str) else mask_url(repr(value))
