"""Database URLs that name a database configured elsewhere: ``django://ALIAS``.

A web project already holds its database's credentials in its own settings.
Writing them a second time into ``JOBBRIDGE_DATABASE_URL`` gives two copies that
drift apart (a rotated password, a moved host) and one more place a secret sits
in. A scheme listed here stands for such a database: its resolver turns the URL
into the real one each time the database driver or the result store opens it,
from the settings as they are then (a test run's database included).

A resolver is named by dotted path and imported on first use, so this driver
never imports a web framework, and a framework's integration is loaded only by
a URL that asks for it. `register` adds a scheme of one's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from jobbridge.errors import ConfigurationError
from jobbridge.redaction import quoted

Resolver = Callable[[str], str]

_RESOLVERS: dict[str, str | Resolver] = {
    "django": "jobbridge.integrations.django_databases:database_url",
}


def schemes() -> tuple[str, ...]:
    """The schemes that name a database configured elsewhere."""
    return tuple(_RESOLVERS)


def register(scheme: str, resolver: Resolver) -> None:
    """Make ``scheme://...`` resolve through ``resolver`` (the URL in, the real database URL out)."""
    _RESOLVERS[scheme.lower()] = resolver


def resolve(url: str) -> str:
    """The real database URL for ``url``: ``url`` itself unless its scheme names one configured elsewhere."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    found = _RESOLVERS.get(scheme)
    if found is None:
        return url
    if isinstance(found, str):
        module, _, attr = found.partition(":")
        try:
            found = _RESOLVERS[scheme] = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise ConfigurationError(
                f"the database url {quoted(url)} needs {exc.name!r}, which is not installed: "
                f"pip install 'jobbridge[{scheme}]'") from None
    return found(url)
